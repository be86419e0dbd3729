"""What a task retries on.

Errors worth a retry with backoff: the network and the broker (OSError covers ConnectionError and TimeoutError) and a
dropped or busy database connection. Tasks opt in: @shared_task(autoretry_for=TRANSIENT_ERRORS, ...).
"""

from django.db.utils import InterfaceError as DatabaseInterfaceError
from django.db.utils import OperationalError as DatabaseOperationalError

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OSError, DatabaseOperationalError, DatabaseInterfaceError)
