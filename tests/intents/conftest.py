import pytest

from tests.intents.helpers import EMBEDDER


@pytest.fixture(autouse=True)
def _test_embedder(settings):
    settings.WAYMARK_INTENT_EMBEDDER = "tests.intents.helpers.embedder_factory"
    EMBEDDER.embedded.clear()
    yield
