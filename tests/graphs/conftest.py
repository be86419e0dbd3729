import pytest
from django.core.cache import cache

from graphs.cache import graphs


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Each test starts with empty caches: the database is rolled back between tests, the cache is not."""
    cache.clear()
    graphs.clear()
    yield
    cache.clear()
    graphs.clear()
