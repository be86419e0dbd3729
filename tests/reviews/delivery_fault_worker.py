"""The Celery app of the webhook delivery fault test's worker subprocess (tests/faults.py): private targets allowed
(the test's receiver listens on 127.0.0.1), a short claim window, and a test-only wrap of the HTTP post that
writes the pool process's pid (so the receiver can kill it while holding the request) and SIGKILLs the pool
process once at "answered": the receiver answered, the attempt is not recorded yet."""

import os
from datetime import timedelta

from tests.faults import die_once_at, worker_app

app = worker_app()

from django.conf import settings  # noqa: E402

from reviews import webhooks  # noqa: E402

settings.WAYMARK_WEBHOOKS_ALLOW_PRIVATE = True
webhooks.WEBHOOK_CLAIM = timedelta(seconds=float(os.environ.get("FAULT_CLAIM_SECONDS", "2")))

_post = webhooks._post


def post(url, body, headers):
    with open(os.path.join(os.environ["FAULT_DIR"], "attempt.pid"), "w") as pid:
        pid.write(str(os.getpid()))
    result = _post(url, body, headers)
    if result[0] is not None and 200 <= result[0] < 300:
        die_once_at("answered")
    return result


webhooks._post = post
