def test_healthz_reports_database_and_broker(client, db):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True


def test_dashboard_needs_login(client, db):
    response = client.get("/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
