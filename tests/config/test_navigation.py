"""The main navigation (config/navigation.py): the section of the path marked current, the admin's links for
admins only, built once per combination and the same on every page."""

import pytest
from django.urls import reverse

from config import navigation
from tests.conftest import logged_in


def nav_of(html: str) -> str:
    return html.split('<nav class="nav" aria-label="Main">', 1)[1].split("</nav>", 1)[0]


@pytest.mark.parametrize(
    ("path", "current"),
    [
        ("/", "Dashboard"),
        ("/trajectories/", "Trajectories"),
        ("/trajectories/12/", "Trajectories"),
        ("/procedures/versions/3/", "Procedures"),
        ("/accounts/settings/", None),  # no section of the navigation
    ],
)
def test_the_section_of_the_path_is_marked_current(path, current):
    html = navigation.main_nav(path, administers=False)
    marked = [part.rsplit(">", 1)[-1] for part in html.split("</a>") if 'aria-current="page"' in part]
    assert marked == ([current] if current else [])


def test_the_dashboard_is_current_on_its_own_path_only():
    assert 'href="/" aria-current="page"' not in navigation.main_nav("/trajectories/", administers=False)


def test_admins_get_the_audit_and_the_admin_site():
    for_admin = navigation.main_nav("/", administers=True)
    for_others = navigation.main_nav("/", administers=False)
    assert reverse("accounts:audit") in for_admin and reverse("accounts:audit") not in for_others
    assert 'title="Django admin: users and their roles">Admin</a>' in for_admin
    assert "Admin</a>" not in for_others
    assert 'aria-current="page"' not in navigation.main_nav(reverse("admin:index"), administers=True)


def test_the_pages_carry_it(operator, admin_user):
    page = logged_in(operator).get(reverse("trajectories:list")).content.decode()
    assert nav_of(page).strip() == navigation.main_nav(reverse("trajectories:list"), administers=False)
    assert 'aria-current="page">Trajectories</a>' in nav_of(page)
    audit = logged_in(admin_user).get(reverse("accounts:audit")).content.decode()
    assert 'aria-current="page">Audit</a>' in nav_of(audit)


def test_anonymous_pages_have_none(client):
    assert '<nav class="nav" aria-label="Main">' not in client.get(reverse("accounts:login")).content.decode()
