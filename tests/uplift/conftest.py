import pytest


@pytest.fixture(autouse=True)
def production_policy(settings):
    """uplift's own tests judge by the production default policy (the suite's default relaxes it)."""
    settings.WAYMARK_CERTIFICATION_POLICY = {}
