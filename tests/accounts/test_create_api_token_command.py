"""`manage.py create_api_token`, run the way a shell runs it: argv in, stdout/stderr and the exit status out."""

import pytest
from django.core.management import ManagementUtility
from django.db import connections

from accounts.models import ApiToken, AuditEvent
from accounts.services import api_token_authenticate

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _keep_the_test_connection(monkeypatch):
    """run_from_argv closes every connection when it ends, which would end the test's transaction with it."""
    monkeypatch.setattr(connections, "close_all", lambda: None)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        ManagementUtility(["manage.py", "create_api_token", *args]).execute()
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def test_it_prints_only_the_plaintext_of_a_working_token(capsys, operator):
    status, out, err = _run(
        capsys, "--user", "otto", "--name", "miner", "--scope", "procedures:mine", "--scope", "graphs:read"
    )
    assert (status, err) == (0, "")
    plaintext = out.strip()
    assert out == plaintext + "\n"
    token = api_token_authenticate(plaintext)
    assert token is not None
    assert (token.user, token.name, token.scopes) == (operator, "miner", ["graphs:read", "procedures:mine"])
    event = AuditEvent.objects.get(verb="api_token.create")
    assert event.actor_label == "system"


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--user", "nobody", "--name", "x", "--scope", "graphs:read"], "unknown user 'nobody'"),
        (["--user", "vera", "--name", "x", "--scope", "graphs:everything"], "unknown scope(s): graphs:everything"),
        (["--user", "vera", "--name", "x", "--scope", "reviews:judge"], "reviews:judge needs the reviewer role"),
        (["--user", "vera", "--name", "x"], "at least one --scope is required"),
        (["--name", "x", "--scope", "graphs:read"], "--user is required"),
        (["--user", "vera", "--scope", "graphs:read"], "a token needs a name"),
        (["--user", "oscar", "--name", "x", "--scope", "graphs:read"], "inactive"),
    ],
    ids=["unknown-user", "unknown-scope", "scope-not-allowed", "no-scope", "no-user", "no-name", "inactive-user"],
)
def test_bad_input_exits_2_with_a_one_line_reason_and_creates_nothing(capsys, viewer, outsider, args, reason):
    status, out, err = _run(capsys, *args)
    assert status == 2
    assert out == ""
    assert reason in err
    assert len(err.strip().splitlines()) == 1
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.exists()


def _revoke(capsys, *args: str) -> tuple[int, str, str]:
    try:
        ManagementUtility(["manage.py", "revoke_api_token", *args]).execute()
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("form", ["prefix", "display", "plaintext"])
def test_revoke_api_token_revokes_by_prefix_and_is_audited(capsys, viewer, make_token, form):
    plaintext = make_token(viewer, "graphs:read")
    prefix = plaintext.split("_")[1]
    given = {"prefix": prefix, "display": f"wm_{prefix}_…", "plaintext": plaintext}[form]
    status, out, err = _revoke(capsys, given)
    assert (status, err) == (0, "")
    assert "of vera revoked at" in out
    assert api_token_authenticate(plaintext) is None
    assert AuditEvent.objects.filter(verb="api_token.revoke").count() == 1
    status, out, _ = _revoke(capsys, prefix)
    assert status == 0 and "already revoked" in out
    assert AuditEvent.objects.filter(verb="api_token.revoke").count() == 1


def test_revoke_api_token_refuses_an_unknown_prefix(capsys, viewer, make_token):
    make_token(viewer, "graphs:read")
    status, out, err = _revoke(capsys, "wm_000000000000_x")
    assert status == 2 and out == ""
    assert "no token with prefix '000000000000'" in err
    assert ApiToken.objects.get().revoked_at is None
