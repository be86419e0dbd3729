import pytest
from django.core.cache import cache

from graphs.cache import clear_local


@pytest.fixture(autouse=True)
def _fresh_caches():
    """The server's caches outlive the test database (locmem, per process): each test starts and ends with none."""
    cache.clear()
    clear_local()
    yield
    cache.clear()
    clear_local()
