"""The HTTP API over real HTTP: the inbox, decisions and their refusals, threads, runs, pauses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from _serving import Serving, auth, bearer, mail_agent, order_app, serving, wait_for

from interlock import SqliteStore
from interlock.server import create_app

Poll = Callable[[Callable[[], Any]], Any]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orders.db"


@pytest.fixture
def server(db: Path) -> Iterator[Serving]:
    with serving(lambda: create_app(order_app(db), auth=auth())) as s:
        yield s


@pytest.fixture
def client(server: Serving) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def start(client: httpx.Client, thread: str, who: str = "ana") -> dict[str, Any]:
    """Start a run of the order graph and return its pending interrupt as the inbox lists it."""
    r = client.post(f"/v1/threads/{thread}/runs", json={"input": {"n": 1}}, headers=bearer(who))
    assert r.status_code == 202, r.text

    def pending() -> Any:
        items = client.get("/v1/interrupts", params={"thread": thread}, headers=bearer("vic"))
        return items.json()["items"]

    found: list[dict[str, Any]] = wait_for(pending)
    return found[0]


def decide(
    client: httpx.Client,
    item: dict[str, Any],
    answer: Any,
    who: str = "ana",
    key: str = "k1",
    **extra: Any,
) -> httpx.Response:
    body = {"answer": answer, "payload_hash": item["payload_hash"], **extra}
    headers = {**bearer(who), "Idempotency-Key": key}
    return client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=headers)


def audit_kinds(db: Path, thread: str) -> list[tuple[str, str | None]]:
    """The thread's audit log as (kind, actor), read from the file by a store of our own."""

    async def read() -> list[tuple[str, str | None]]:
        store = SqliteStore(db)
        try:
            return [(r.kind, r.actor) for r in await store.audit_log(thread=thread)]
        finally:
            await store.close()

    return anyio.run(read)


def test_an_approval_round_trip_records_the_identity_and_finishes_the_run(
    client: httpx.Client, db: Path
) -> None:
    item = start(client, "t1")
    assert item["summary"] == "Ship order 2?"
    assert item["info"]["details"] == {"n": 2}
    detail = client.get(f"/v1/interrupts/{item['id']}", headers=bearer("vic")).json()
    assert detail["thread_status"] == "interrupted"
    assert detail["values"] == {"n": 2}
    assert [a["kind"] for a in detail["audit"]] == ["interrupt"]
    r = decide(client, item, True, reason="looks fine")
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["decision"]["actor"] == "ana"
    assert body["decision"]["reason"] == "looks fine"
    assert body["continued"] is True

    def finished() -> Any:
        view = client.get("/v1/threads/t1", headers=bearer("vic")).json()
        return view if view["status"] == "done" else None

    view = wait_for(finished)
    assert view["values"] == {"n": 2, "approved": True, "done": True}
    assert ("decision", "ana") in audit_kinds(db, "t1")
    assert client.get("/v1/interrupts", headers=bearer("vic")).json()["items"] == []


def test_the_actor_is_never_a_field_the_client_sets(client: httpx.Client, db: Path) -> None:
    item = start(client, "t1")
    r = decide(client, item, True, actor="root")
    assert r.status_code == 422
    assert "actor" in r.json()["message"]
    assert decide(client, item, True).json()["decision"]["actor"] == "ana"


def test_the_second_decider_is_told_who_decided_first(client: httpx.Client, db: Path) -> None:
    item = start(client, "t1")
    assert decide(client, item, True).status_code == 201
    r = decide(client, item, False, who="ben", key="other")
    assert r.status_code == 409
    refusal = r.json()
    assert refusal["error"] == "already_decided"
    assert refusal["decision"]["actor"] == "ana"
    assert "already decided by ana" in refusal["message"]
    assert [k for k in audit_kinds(db, "t1") if k[0] == "decision"] == [("decision", "ana")]


def test_an_idempotency_key_replays_its_request_and_refuses_another_body(
    client: httpx.Client, db: Path
) -> None:
    item = start(client, "t1")
    first = decide(client, item, True, key="same")
    again = decide(client, item, True, key="same")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["replayed"] is True
    assert again.json()["decision"] == first.json()["decision"]
    reused = decide(client, item, False, key="same")
    assert reused.status_code == 422
    assert reused.json()["error"] == "idempotency_key_reused"
    # Another person's key of the same text is their own: a conflict, not a replay.
    other = decide(client, item, True, who="ben", key="same")
    assert other.status_code == 409
    assert [k for k in audit_kinds(db, "t1") if k[0] == "decision"] == [("decision", "ana")]


def test_a_decision_needs_an_idempotency_key(client: httpx.Client) -> None:
    item = start(client, "t1")
    body = {"answer": True, "payload_hash": item["payload_hash"]}
    r = client.post(f"/v1/interrupts/{item['id']}/decision", json=body, headers=bearer("ana"))
    assert r.status_code == 400
    assert "Idempotency-Key" in r.json()["message"]


def test_a_stale_payload_hash_is_refused_and_nothing_is_recorded(
    client: httpx.Client, db: Path
) -> None:
    item = start(client, "t1")
    r = decide(client, {**item, "payload_hash": "0" * 32}, True)
    assert r.status_code == 412
    assert r.json()["error"] == "question_changed"
    assert (
        client.get(f"/v1/interrupts/{item['id']}", headers=bearer("vic")).json()["decision"] is None
    )
    assert [k for k, _ in audit_kinds(db, "t1")] == ["interrupt"]


def test_an_answer_that_fails_the_schema_is_refused_and_changes_nothing(
    client: httpx.Client, db: Path
) -> None:
    item = start(client, "t1")
    r = decide(client, item, {"not": "a bool"})
    assert r.status_code == 422
    assert r.json()["error"] == "invalid_answer"
    assert [k for k, _ in audit_kinds(db, "t1")] == ["interrupt"]
    assert decide(client, item, True, key="k2").status_code == 201


def test_without_a_valid_token_every_v1_route_answers_401(client: httpx.Client) -> None:
    from interlock.server._routes import ROUTES

    for route in ROUTES:
        url = route.path.replace("{id}", "x").replace("{thread}", "t")
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
            r = client.request(route.method, url, headers=headers, json={})
            assert r.status_code == 401, (route.name, headers, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/metrics").status_code == 401


def test_roles_and_scopes_are_enforced(client: httpx.Client, db: Path) -> None:
    item = start(client, "t1")
    viewer = decide(client, item, True, who="vic")
    assert viewer.status_code == 403
    assert "approver role" in viewer.json()["message"]
    # mailer may decide send_* calls only: a question that gates no tool is out of scope, and
    # so, to mailer, no question at all.
    mailer = decide(client, item, True, who="mailer")
    assert mailer.status_code == 404
    assert mailer.json()["error"] == "unknown_interrupt"
    assert client.get("/v1/interrupts", headers=bearer("mailer")).json()["items"] == []
    # ops sees threads starting with "ops-" only.
    ops = client.get(f"/v1/interrupts/{item['id']}", headers=bearer("ops"))
    assert ops.status_code == 404
    assert client.get("/v1/threads/t1", headers=bearer("ops")).status_code == 404
    # Starting or continuing a run there is refused before anything is looked up.
    started = client.post("/v1/threads/t2/runs", json={"input": {}}, headers=bearer("ops"))
    assert (started.status_code, started.json()["error"]) == (403, "out_of_scope")
    assert client.post("/v1/threads/t1/pause", json={}, headers=bearer("ana")).status_code == 403
    assert [k for k, _ in audit_kinds(db, "t1")] == ["interrupt"]


def test_four_eyes_refuses_the_starter(db: Path) -> None:
    factory = lambda: create_app(order_app(db), auth=auth(), four_eyes=True)  # noqa: E731
    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        item = start(client, "t1", who="ana")
        detail = client.get(f"/v1/interrupts/{item['id']}", headers=bearer("ben")).json()
        assert detail["started_by"] == "ana"
        refused = decide(client, item, True, who="ana")
        assert refused.status_code == 403
        assert refused.json()["error"] == "four_eyes"
        assert decide(client, item, True, who="ben").status_code == 201
        assert client.get("/v1/me", headers=bearer("ben")).json()["four_eyes"] is True


def test_four_eyes_holds_for_the_later_questions_of_the_run(tmp_path: Path) -> None:
    from _serving import two_step_app

    factory = lambda: create_app(two_step_app(tmp_path / "t.db"), auth=auth(), four_eyes=True)  # noqa: E731
    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        r = client.post(
            "/v1/threads/t/runs", json={"input": {}, "wait": True}, headers=bearer("ana")
        )
        first = r.json()["thread_view"]["interrupts"][0]
        done = decide(client, first, True, who="ben", wait=True)
        assert done.status_code == 201
        second = done.json()["thread_view"]["interrupts"][0]
        assert second["summary"] == "Send the invoice?"
        # The run ben continued is still ana's: she may not approve its next question.
        refused = decide(client, second, True, who="ana", key="k2")
        assert (refused.status_code, refused.json()["error"]) == (403, "four_eyes")
        assert decide(client, second, True, who="ben", key="k3").status_code == 201


def test_decisions_are_rate_limited_per_identity(db: Path) -> None:
    factory = lambda: create_app(  # noqa: E731
        order_app(db), auth=auth(), decisions_per_second=0.01, decision_burst=2
    )
    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        item = start(client, "t1")
        bad = {**item, "payload_hash": "0" * 32}
        assert decide(client, bad, True, key="a").status_code == 412
        assert decide(client, bad, True, key="b").status_code == 412
        limited = decide(client, item, True, key="c")
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert decide(client, item, True, who="ben", key="d").status_code == 201


def test_a_body_over_the_limit_is_refused_unread(db: Path) -> None:
    factory = lambda: create_app(order_app(db), auth=auth(), max_body_bytes=1000)  # noqa: E731
    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        item = start(client, "t1")
        r = decide(client, item, True, reason="x" * 5000)
        assert r.status_code == 413
        assert r.json()["error"] == "body_too_large"
        assert decide(client, item, True, key="k2").status_code == 201


def test_no_get_changes_anything(client: httpx.Client, db: Path) -> None:
    from interlock.server._routes import ROUTES

    item = start(client, "t1")

    def record() -> tuple[Any, ...]:
        import sqlite3

        with closing(sqlite3.connect(db)) as conn, conn:
            return tuple(
                conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                for (table,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            )

    head = client.get("/v1/threads/t1", headers=bearer("vic")).json()["checkpoint_id"]
    before = record()
    for route in ROUTES:
        if route.method != "GET":
            continue
        url = route.path.replace("{id}", item["id"]).replace("{thread}", "t1")
        url = url.replace("{checkpoint}", head)
        if route.name == "get_events":
            with client.stream("GET", url, headers=bearer("root")) as events:
                assert events.status_code == 200
            continue
        # The principals and tokens of a server that reads a tokens file are not listed (409).
        listed = 409 if route.path in ("/v1/principals", "/v1/tokens") else 200
        assert client.get(url, headers=bearer("root")).status_code == listed, route.name
        for who in ("vic", "ana"):
            status = client.get(url, headers=bearer(who)).status_code
            assert status in (listed, 403), (route.name, who)
    for plain in ("/healthz", "/readyz", "/openapi.json", "/inbox", "/"):
        assert client.get(plain).status_code in (200, 307)
    assert record() == before


def test_history_audit_and_pause(client: httpx.Client) -> None:
    item = start(client, "t1")
    history = client.get("/v1/threads/t1/history", params={"limit": 2}, headers=bearer("vic"))
    page = history.json()
    assert [i["status"] for i in page["items"]] == ["interrupted", "ready"]
    assert page["next"] == page["items"][-1]["checkpoint_id"]
    older = client.get(
        "/v1/threads/t1/history", params={"before": page["next"]}, headers=bearer("vic")
    ).json()
    assert (
        older["items"] and older["items"][0]["checkpoint_id"] != page["items"][0]["checkpoint_id"]
    )
    assert (
        client.get("/v1/threads/t1/history", headers=bearer("vic")).json()["items"][0]["metadata"][
            "started_by"
        ]
        == "ana"
    )
    audit = client.get("/v1/threads/t1/audit", headers=bearer("vic")).json()
    assert [a["data"]["interrupt"] for a in audit["items"]] == [item["id"]]
    paused = client.post("/v1/threads/t1/pause", json={"forced": True}, headers=bearer("root"))
    assert paused.status_code == 202
    assert client.post("/v1/threads/nope/pause", json={}, headers=bearer("root")).status_code == 404
    assert client.get("/v1/threads/nope", headers=bearer("vic")).status_code == 404


def test_runs_refuse_new_input_on_a_waiting_thread_and_wait_when_asked(
    client: httpx.Client,
) -> None:
    item = start(client, "t1")
    refused = client.post("/v1/threads/t1/runs", json={"input": {"n": 5}}, headers=bearer("ana"))
    assert refused.status_code == 409
    assert refused.json()["error"] == "thread_interrupted"
    assert client.post("/v1/threads/none/runs", json={}, headers=bearer("ana")).status_code == 404
    waited = client.post(
        "/v1/threads/t9/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
    )
    assert waited.status_code == 200
    assert waited.json()["thread_view"]["status"] == "interrupted"
    assert item["id"] not in [i["id"] for i in waited.json()["thread_view"]["interrupts"]]


def test_the_inbox_pages_and_filters(client: httpx.Client) -> None:
    ids = [start(client, f"p{n}")["id"] for n in range(5)]
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"after": after} if after else {})}
        page = client.get("/v1/interrupts", params=params, headers=bearer("vic")).json()
        seen += [i["id"] for i in page["items"]]
        after = page["next"]
        if after is None:
            break
    assert seen == ids
    only = client.get("/v1/interrupts", params={"thread": "p3"}, headers=bearer("vic")).json()
    assert [i["id"] for i in only["items"]] == [ids[3]]
    for bad in ({"limit": 0}, {"limit": "x"}, {"after": "!!"}, {"older_than": -1}):
        assert client.get("/v1/interrupts", params=bad, headers=bearer("vic")).status_code == 400
    fresh = client.get("/v1/interrupts", params={"older_than": 3600}, headers=bearer("vic"))
    assert fresh.json()["items"] == []


def test_an_edit_of_a_tool_call_is_checked_against_the_tools_schema(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    with (
        serving(lambda: create_app(mail_agent(db), auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        r = client.post(
            "/v1/threads/m1/runs",
            json={"input": {"messages": [{"role": "user", "content": "hello"}]}},
            headers=bearer("ana"),
        )
        assert r.status_code == 202, r.text
        item = wait_for(
            lambda: client.get("/v1/interrupts", headers=bearer("mailer")).json()["items"]
        )[0]
        assert item["tool"] == "send_email"
        assert item["info"]["arguments"] == {"to": "cfo@example.com", "body": "hello"}
        bad = decide(client, item, {"action": "edit", "arguments": {"to": 5}}, who="mailer")
        assert bad.status_code == 422
        assert [k for k, _ in audit_kinds(db, "m1")] == ["interrupt"]
        good = decide(
            client,
            item,
            {"action": "edit", "arguments": {"to": "ceo@example.com", "body": "hello"}},
            who="mailer",
            key="k2",
        )
        assert good.status_code == 201, good.text
        assert good.json()["decision"]["details"]

        def finished() -> Any:
            view = client.get("/v1/threads/m1", headers=bearer("vic")).json()
            return view if view["status"] == "done" else None

        view = wait_for(finished)
        assert view["messages"][-1]["content"] == "finished: sent to ceo@example.com"


def test_health_readiness_metrics_and_the_openapi_document(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    item = start(client, "t1")
    decide(client, item, True)
    metrics = client.get("/metrics", headers=bearer("vic")).text
    assert 'interlock_decisions_total{outcome="recorded"} 1.0' in metrics
    doc = client.get("/openapi.json").json()
    assert doc["openapi"] == "3.1.0"
    assert "/v1/interrupts/{id}/decision" in doc["paths"]
    assert set(doc["components"]["schemas"]) >= {"DecisionRequest", "InterruptPage", "ErrorBody"}


def test_create_app_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    one = order_app(tmp_path / "a.db")
    with pytest.raises(TypeError, match="authenticate"):
        create_app(one, auth=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share a store"):
        create_app({"a": one, "b": one}, auth=auth())
    with pytest.raises(ValueError, match="app name"):
        create_app({"a:b": one}, auth=auth())
    with pytest.raises(ValueError, match="at least one"):
        create_app({}, auth=auth())
    with pytest.raises(ValueError, match="poll_interval"):
        create_app(one, auth=auth(), poll_interval=0)
    anyio.run(one.store.close)


def test_a_quorum_needs_two_distinct_approvers(tmp_path: Path) -> None:
    from _serving import quorum_app

    db = tmp_path / "pay.db"
    with (
        serving(lambda: create_app(quorum_app(db), auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        r = client.post(
            "/v1/threads/q1/runs", json={"input": {}, "wait": True}, headers=bearer("root")
        )
        item = r.json()["thread_view"]["interrupts"][0]
        assert (item["approvals"], item["approved_by"]) == (2, [])
        first = decide(client, item, True, who="ana", key="a")
        assert first.status_code == 201
        assert first.json()["decision"]["final"] is False
        assert first.json()["continued"] is False
        listed = client.get("/v1/interrupts", headers=bearer("vic")).json()["items"]
        assert listed[0]["approved_by"] == ["ana"]
        # The question on its own shows the votes so far too, as the inbox does.
        one = client.get(f"/v1/interrupts/{item['id']}", headers=bearer("vic")).json()
        assert one["interrupt"]["approved_by"] == ["ana"]
        twice = decide(client, item, True, who="ana", key="b")
        assert twice.status_code == 422
        assert "ana" in twice.json()["message"]
        second = decide(client, item, True, who="ben", key="c", wait=True)
        assert second.status_code == 201
        body = second.json()
        assert body["decision"]["final"] is True
        assert body["decision"]["approved_by"] == ["ana", "ben"]
        assert body["thread_view"]["values"] == {"approved": True}
        kinds = audit_kinds(db, "q1")
        assert kinds.count(("approval", "ana")) == 1 and ("decision", "ben") in kinds


def test_the_inbox_of_several_apps_pages_in_time_order_within_scopes(tmp_path: Path) -> None:
    apps = lambda: {  # noqa: E731
        "orders": order_app(tmp_path / "o.db"),
        "mail": mail_agent(tmp_path / "m.db"),
    }
    with (
        serving(lambda: create_app(apps(), auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        made: list[str] = []
        for n in range(6):
            if n % 2:
                message = {"messages": [{"role": "user", "content": f"m{n}"}]}
                body = {"input": message, "app": "mail", "wait": True}
            else:
                body = {"input": {"n": n}, "app": "orders", "wait": True}
            r = client.post(f"/v1/threads/x{n}/runs", json=body, headers=bearer("root"))
            made.append(r.json()["thread_view"]["interrupts"][0]["id"])

        def pages(who: str, limit: int) -> list[str]:
            seen: list[str] = []
            after = None
            for _ in range(20):
                params: dict[str, Any] = {"limit": limit, **({"after": after} if after else {})}
                page = client.get("/v1/interrupts", params=params, headers=bearer(who)).json()
                seen += [i["id"] for i in page["items"]]
                after = page["next"]
                if after is None:
                    return seen
            raise AssertionError("the pages never ended")

        assert pages("vic", 2) == made
        assert pages("vic", 5) == made
        assert pages("mailer", 1) == made[1::2]
        only = client.get("/v1/interrupts", params={"app": "mail"}, headers=bearer("vic"))
        assert [i["id"] for i in only.json()["items"]] == made[1::2]
        static = client.get("/web/inbox.js")
        assert static.headers["x-content-type-options"] == "nosniff"


def test_cors_is_off_unless_origins_are_named(tmp_path: Path, client: httpx.Client) -> None:
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    r = client.options("/v1/interrupts/x/decision", headers=preflight)
    assert "access-control-allow-origin" not in r.headers
    r = client.get("/v1/me", headers={**bearer("vic"), "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
    factory = lambda: create_app(  # noqa: E731
        order_app(tmp_path / "c.db"), auth=auth(), cors_origins=["https://ok.example"]
    )
    with serving(factory) as s, httpx.Client(base_url=s.url) as other:
        ok = other.options(
            "/v1/interrupts/x/decision", headers={**preflight, "Origin": "https://ok.example"}
        )
        assert ok.headers["access-control-allow-origin"] == "https://ok.example"
        evil = other.options("/v1/interrupts/x/decision", headers=preflight)
        assert "access-control-allow-origin" not in evil.headers


def test_input_the_state_cannot_take_is_refused_and_a_failed_run_is_reported(
    client: httpx.Client,
) -> None:
    for bad in ({"zzz": 1}, 5, [1]):
        r = client.post("/v1/threads/bad/runs", json={"input": bad}, headers=bearer("ana"))
        assert (r.status_code, r.json()["error"]) == (422, "invalid_input"), bad
    assert client.get("/v1/threads/bad", headers=bearer("vic")).status_code == 404
    failed = client.post(
        "/v1/threads/f1/runs", json={"input": {"n": "x"}, "wait": True}, headers=bearer("ana")
    )
    assert failed.status_code == 200
    assert failed.json()["thread_view"]["status"] == "failed"
    r = client.post("/v1/threads/f2/runs", json={"input": {"n": "x"}}, headers=bearer("ana"))
    assert r.status_code == 202
    view = wait_for(
        lambda: (
            (v := client.get("/v1/threads/f2", headers=bearer("vic"))).status_code == 200
            and v.json()["status"] == "failed"
        )
    )
    assert view
