"""What a task retries on.

Errors worth a retry with backoff: the network and the broker (OSError covers ConnectionError and TimeoutError) and a
dropped or busy database connection. Tasks opt in: @shared_task(..., **RETRY) — five retries with exponential
backoff on those errors only; any other error fails the task at once.
"""

from django.db.utils import InterfaceError as DatabaseInterfaceError
from django.db.utils import OperationalError as DatabaseOperationalError

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OSError, DatabaseOperationalError, DatabaseInterfaceError)
RETRY = {"autoretry_for": TRANSIENT_ERRORS, "retry_backoff": True, "max_retries": 5}
