"""Sessions are read from the cache and written to both the cache and the database (Django's cached_db): a logged-in
page reads its session without a query, and a session outlives the loss of the cache."""

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import logged_in

pytestmark = pytest.mark.django_db
PAGE = "/accounts/settings/"


def session_queries(client) -> tuple[int, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        status = client.get(PAGE).status_code
    return status, [q["sql"] for q in captured if "django_session" in q["sql"]]


def test_a_logged_in_page_reads_its_session_from_the_cache(viewer):
    client = logged_in(viewer)
    assert session_queries(client) == (200, [])


def test_a_session_outlives_the_cache_and_logging_out_ends_it(viewer):
    client = logged_in(viewer)
    cache.clear()  # a restarted Redis, a flushed file cache
    status, queries = session_queries(client)
    assert status == 200 and len(queries) == 1  # read back from the database, still logged in
    assert session_queries(client) == (200, [])  # and cached again
    client.handler.enforce_csrf_checks = False  # (the form's token is not what this test is about)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get(PAGE).status_code == 302  # to the login page: the session is gone from both
