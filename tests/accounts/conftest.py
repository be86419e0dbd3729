import pytest
from django.core.cache import cache
from django.test import Client

PASSWORD = "correct horse battery staple"  # tests/factories.py UserFactory


@pytest.fixture(autouse=True)
def _fresh_login_counters():
    """Login throttling lives in the cache; every test starts with none."""
    cache.clear()
    yield
    cache.clear()


class Browser:
    """A CSRF-enforcing client that behaves like a browser: it reads the token from the page's cookie."""

    def __init__(self, remote_addr: str = "203.0.113.7") -> None:
        self.client = Client(enforce_csrf_checks=True, REMOTE_ADDR=remote_addr)

    def csrf(self) -> str:
        self.client.get("/accounts/login/")
        return self.client.cookies["csrftoken"].value

    def login(self, username: str, password: str, **extra):
        data = {"username": username, "password": password, "csrfmiddlewaretoken": self.csrf(), **extra}
        return self.client.post("/accounts/login/", data)


@pytest.fixture
def browser():
    return Browser()
