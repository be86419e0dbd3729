import pytest


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/reviews/queue?kind=a%00b",
        "/api/v1/trajectories?source=%00",
        "/api/v1/graphs/two%00hop/active",
        "/api/v1/procedures?intent=%00",
        "/api/v1/procedures?%00=refund",  # in a key
        "/api/v1/procedures?intent=a&x=b%00",  # in a later value
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
def test_a_nul_in_a_page_request_answers_400_before_any_view_runs(client, admin_user, path, django_assert_num_queries):
    client.force_login(admin_user)
    with django_assert_num_queries(0):  # each of these views reads the database (and the session loads lazily)
        response = client.get(path)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert response.content == b"The request holds a NUL character."


def test_a_raw_nul_in_the_query_string_is_refused_too(rf):
    from config.middleware import RejectNulMiddleware

    request = rf.get("/api/v1/procedures")
    request.META["QUERY_STRING"] = "intent=a\x00b"  # as a server that does not percent-encode might pass it
    response = RejectNulMiddleware(lambda request: pytest.fail("the view ran"))(request)
    assert response.status_code == 422


def test_an_encoded_percent_before_00_is_no_nul(client, db):
    assert client.get("/api/v1/trajectories?source=a%2500").status_code != 422


def test_the_api_error_names_where_the_nul_is(client, db):
    assert client.get("/api/v1/trajectories?source=a%00").json()["details"]["errors"][0]["loc"] == ["query", "source"]
    assert client.get("/api/v1/graphs/two%00hop/active").json()["details"]["errors"][0]["loc"] == ["path"]


@pytest.mark.parametrize("path", ["/trajectories/?source=plain", "/accounts/audit/?verb=plain", "/reviews/?kind=plain"])
def test_ordinary_requests_pass_through_to_the_view(client, admin_user, path):
    client.force_login(admin_user)
    response = client.get(path)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert client.get("/healthz").status_code == 200
