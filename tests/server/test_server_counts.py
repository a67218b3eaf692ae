"""``GET /v1/interrupts/counts`` over real HTTP: per tool, filtered, within the identity's scope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import auth, bearer, mail_agent, order_app, serving, wait_for

from interlock.server import create_app

COUNTS = "/v1/interrupts/counts"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    """A server of two apps: orders (questions that gate no tool) and a mail agent."""

    def factory() -> Any:
        apps = {"orders": order_app(tmp_path / "o.db"), "mail": mail_agent(tmp_path / "m.db")}
        return create_app(apps, auth=auth())

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as c:
        for thread in ("t1", "ops-1", "ops-2"):
            run(c, "orders", thread, {"n": 1})
        for thread in ("m1", "m2"):
            run(c, "mail", thread, {"messages": [{"role": "user", "content": "hi"}]})
        wait_for(lambda: len(inbox(c)) == 5)
        yield c


def run(client: httpx.Client, app: str, thread: str, input: dict[str, Any]) -> None:
    r = client.post(
        f"/v1/threads/{thread}/runs",
        json={"input": input, "app": app},
        headers=bearer("ana"),
    )
    assert r.status_code == 202, r.text


def inbox(client: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(
        "/v1/interrupts", params={"limit": 100}, headers=bearer("vic")
    ).json()["items"]
    return items


def counts(client: httpx.Client, who: str = "vic", **params: Any) -> dict[str, Any]:
    r = client.get(COUNTS, params=params, headers=bearer(who))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["total"] == sum(e["pending"] for e in body["by_tool"])
    return body


def test_counts_are_per_tool_across_apps_and_agree_with_the_inbox(client: httpx.Client) -> None:
    body = counts(client)
    assert body == {
        "by_tool": [{"tool": "send_email", "pending": 2}, {"tool": None, "pending": 3}],
        "total": 5,
    }
    listed: dict[str | None, int] = {}
    for item in inbox(client):
        listed[item["tool"]] = listed.get(item["tool"], 0) + 1
    assert {e["tool"]: e["pending"] for e in body["by_tool"]} == listed


def test_counts_take_the_inbox_filters(client: httpx.Client) -> None:
    assert counts(client, app="orders")["by_tool"] == [{"tool": None, "pending": 3}]
    assert counts(client, tool="send_email")["by_tool"] == [{"tool": "send_email", "pending": 2}]
    assert counts(client, thread="ops-1")["by_tool"] == [{"tool": None, "pending": 1}]
    assert counts(client, key="no-such-key") == {"by_tool": [], "total": 0}
    assert counts(client, older_than=3600) == {"by_tool": [], "total": 0}
    assert counts(client, deadline_before=1e10) == {"by_tool": [], "total": 0}
    for bad in ({"older_than": -1}, {"deadline_before": "x"}):
        r = client.get(COUNTS, params=bad, headers=bearer("vic"))
        assert r.status_code == 400, r.text
    assert client.get(COUNTS, params={"app": "nope"}, headers=bearer("vic")).status_code == 404
    assert client.get(COUNTS).status_code == 401


def test_a_decision_leaves_the_counts(client: httpx.Client) -> None:
    (item,) = [i for i in inbox(client) if i["thread"] == "m1"]
    body = {"answer": True, "payload_hash": item["payload_hash"]}
    headers = {**bearer("ana"), "Idempotency-Key": "k1"}
    r = client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)
    assert r.status_code == 201, r.text
    assert counts(client)["by_tool"] == [
        {"tool": "send_email", "pending": 1},
        {"tool": None, "pending": 3},
    ]


def test_an_identity_counts_only_the_tools_in_its_scope(client: httpx.Client) -> None:
    # mailer sees send_* only: the questions that gate no tool are not counted for it.
    assert counts(client, "mailer") == {
        "by_tool": [{"tool": "send_email", "pending": 2}],
        "total": 2,
    }
    assert counts(client, "mailer", app="orders") == {"by_tool": [], "total": 0}


def test_an_identity_scoped_to_thread_prefixes_must_name_a_thread(client: httpx.Client) -> None:
    # ops sees threads starting with "ops-": the index cannot count a prefix.
    refused = client.get(COUNTS, headers=bearer("ops"))
    assert refused.status_code == 403
    assert "all threads" in refused.json()["message"]
    assert counts(client, "ops", thread="ops-2") == {
        "by_tool": [{"tool": None, "pending": 1}],
        "total": 1,
    }
    assert counts(client, "ops", thread="t1") == {"by_tool": [], "total": 0}


def test_the_route_is_in_the_openapi_document(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    operation = document["paths"][COUNTS]["get"]
    assert operation["operationId"] == "count_interrupts"
    assert "InterruptCounts" in document["components"]["schemas"]
