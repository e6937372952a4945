"""Every route but /v1/health needs the bearer token; a refused request changes nothing."""

from __future__ import annotations

import httpx
import pytest
from agent_harness import PY, TOKEN, Agent

from scheduler.agent.client import AgentClient
from scheduler.agent.errors import AgentAuthError

START_BODY = {"job_id": "sneaky", "gpus": [0], "argv": [PY, "-c", "print('ran')"]}
ROUTES = [
    ("GET", "/v1/gpus", None),
    ("GET", "/v1/jobs", None),
    ("GET", "/v1/jobs/sneaky", None),
    ("POST", "/v1/jobs", START_BODY),
    ("POST", "/v1/jobs/sneaky/stop", {"grace_s": 0}),
    ("GET", "/v1/jobs/sneaky/log", None),
    ("GET", "/v1/no-such-route", None),
]
BAD_HEADERS = [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {TOKEN}x"},
]


@pytest.mark.parametrize(
    "headers", BAD_HEADERS, ids=["missing", "wrong", "basic", "empty", "longer"]
)
def test_every_route_but_health_refuses_without_the_token(
    agent: Agent, headers: dict[str, str]
) -> None:
    with httpx.Client(base_url=agent.url, headers=headers) as http:
        for method, path, body in ROUTES:
            response = http.request(method, path, json=body)
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]
            assert response.headers["www-authenticate"] == "Bearer"
    # nothing was started, no log or exit file written
    assert agent.store.all_jobs() == []
    assert list((agent.state_dir / "logs").iterdir()) == []
    assert list((agent.state_dir / "exits").iterdir()) == []


def test_health_needs_no_token(agent: Agent) -> None:
    response = httpx.get(f"{agent.url}/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "status": "ok",
        "agent_version": body["agent_version"],
        "api_version": 1,
        "host": "test-host",
        "simulated": True,
        "tls": False,
        "report_only": False,
        "root": body["root"],  # whether it runs as root: this machine's matter
    }


def test_the_right_token_is_accepted_with_any_scheme_case(agent: Agent) -> None:
    response = httpx.get(f"{agent.url}/v1/jobs", headers={"Authorization": f"bearer {TOKEN}"})
    assert response.status_code == 200
    assert response.json() == {"jobs": []}


def test_the_client_reports_a_wrong_token_as_agent_auth_error(agent: Agent) -> None:
    with AgentClient(agent.url, "not-the-token") as client:
        assert client.health().status == "ok"
        with pytest.raises(AgentAuthError) as caught:
            client.gpus()
    assert caught.value.status == 401
    assert "wrong agent token" in str(caught.value)
