import pytest

from accounts.models import AuditEvent


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/reviews/queue?kind=a%00b",
        "/api/v1/trajectories?source=%00",
        "/api/v1/graphs/two%00hop/active",
        "/api/v1/procedures?intent=%00",
    ],
)
def test_a_nul_in_an_api_request_answers_422_with_the_error_body(client, db, path):
    response = client.get(path)
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid"
    assert body["details"]["errors"][0]["type"] == "string_nul"


@pytest.mark.parametrize(
    "path", ["/trajectories/?source=%00", "/accounts/audit/?verb=%00", "/models/?role=x%00", "/reviews/?kind=%00"]
)
def test_a_nul_in_a_page_request_answers_400(client, admin_user, path):
    client.force_login(admin_user)
    response = client.get(path)
    assert response.status_code == 400
    assert not AuditEvent.objects.filter(verb__startswith="x").exists()


def test_ordinary_requests_pass_through(client, db):
    assert client.get("/healthz").status_code == 200
