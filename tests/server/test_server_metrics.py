"""``GET /metrics`` over real HTTP: the server's own metrics and the runtime's beside them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import auth, bearer, mail_agent, order_app, serving, wait_for
from prometheus_client.parser import text_string_to_metric_families

from interlock.observability import _hooks
from interlock.server import create_app

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""A scrape's samples, by name and labels."""


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    def factory() -> Any:
        apps = {"orders": order_app(tmp_path / "o.db"), "mail": mail_agent(tmp_path / "m.db")}
        return create_app(apps, auth=auth())

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        yield c


def scrape(client: httpx.Client) -> Samples:
    r = client.get("/metrics", headers=bearer("vic"))
    assert r.status_code == 200, r.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def scrape_until(client: httpx.Client, name: str, status: str, value: float) -> Samples:
    """Scrape until ``name{status=...}`` reads ``value`` (a background run stops just after
    its commit, so its count may lag the inbox by a moment)."""

    def check() -> Samples | None:
        found = scrape(client)
        return found if found.get((name, (("status", status),))) == value else None

    found: Samples = wait_for(check)
    return found


def pending(client: httpx.Client) -> list[dict[str, Any]]:
    r = client.get("/v1/interrupts", params={"limit": 100}, headers=bearer("vic"))
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def test_metrics_show_the_runtime_beside_the_server(client: httpx.Client) -> None:
    for app, thread, body in (
        ("orders", "o1", {"n": 1}),
        ("orders", "o2", {"n": 1}),
        ("mail", "m1", {"messages": [{"role": "user", "content": "hi"}]}),
    ):
        r = client.post(
            f"/v1/threads/{thread}/runs", json={"input": body, "app": app}, headers=bearer("ana")
        )
        assert r.status_code == 202, r.text
    wait_for(lambda: len(pending(client)) == 3)
    found = scrape_until(client, "interlock_runs_total", "interrupted", 3)
    assert found[("interlock_interrupts_pending", (("tool", ""),))] == 2
    assert found[("interlock_interrupts_pending", (("tool", "send_email"),))] == 1
    raised = "interlock_interrupts_raised_total"
    assert found[(raised, (("kind", "dynamic"), ("tool", "send_email")))] == 1
    # The server's own metrics keep their names.
    assert ("interlock_sse_clients", ()) in found
    assert any(name == "interlock_http_requests_total" for name, _ in found)

    item = next(i for i in pending(client) if i["thread"] == "o1")
    body = {"answer": True, "payload_hash": item["payload_hash"]}
    headers = {**bearer("ana"), "Idempotency-Key": "k1"}
    r = client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)
    assert r.status_code == 201, r.text
    done = scrape_until(client, "interlock_runs_total", "done", 1)
    assert done[("interlock_interrupts_pending", (("tool", ""),))] == 1
    assert done[("interlock_decision_seconds_count", (("tool", ""),))] == 1


def test_the_runtime_metrics_are_detached_when_the_server_stops(tmp_path: Path) -> None:
    with serving(lambda: create_app(order_app(tmp_path / "o.db"), auth=auth())):
        wait_for(lambda: _hooks.OBSERVERS)
    assert _hooks.OBSERVERS == []


def test_the_metrics_are_read_only_by_an_identity_that_sees_everything(
    client: httpx.Client,
) -> None:
    # The series are labelled by tool and count every thread: a scoped identity would read
    # the names of tools its scopes leave out.
    for scoped in ("mailer", "ops"):
        refused = client.get("/metrics", headers=bearer(scoped))
        assert (refused.status_code, refused.json()["error"]) == (403, "out_of_scope")
        assert "interlock_" not in refused.text
    assert client.get("/metrics", headers=bearer("vic")).status_code == 200
