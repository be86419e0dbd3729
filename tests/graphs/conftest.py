import pytest
from django.core.cache import cache

from graphs.cache import clear_local


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Each test starts with empty caches: the database is rolled back between tests, the cache is not."""
    cache.clear()
    clear_local()
    yield
    cache.clear()
    clear_local()
