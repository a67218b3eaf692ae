"""The approval server on PostgreSQL: the inbox, a decision and the event stream."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx2 as httpx
import psycopg
from _serving import auth, bearer, failing_update_graph, order_graph, serving, wait_for

from interlock.server import create_app
from interlock.stores import PostgresStore
from interlock.workers import Workers


def test_a_round_trip_on_postgresql_with_its_events(dsn: str) -> None:
    factory = lambda: create_app(order_graph().compile(store=PostgresStore(dsn)), auth=auth())  # noqa: E731
    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        events: list[dict[str, Any]] = []
        ready = threading.Event()

        def listen() -> None:
            try:
                with httpx.stream(
                    "GET", f"{s.url}/v1/events", headers=bearer("vic"), timeout=None
                ) as r:
                    ready.set()
                    for line in r.iter_lines():
                        if line.startswith("data: "):
                            events.append(json.loads(line[6:]))
            except httpx.HTTPError:
                return

        threading.Thread(target=listen, daemon=True).start()
        assert ready.wait(10)
        started = client.post(
            "/v1/threads/pg1/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
        )
        question = started.json()["thread_view"]["interrupts"][0]
        inbox = client.get("/v1/interrupts", headers=bearer("vic")).json()["items"]
        assert [i["id"] for i in inbox] == [question["id"]]
        body = {"answer": True, "payload_hash": question["payload_hash"], "wait": True}
        decided = client.post(
            f"/v1/interrupts/{question['id']}/decision",
            json=body,
            headers={**bearer("ben"), "Idempotency-Key": "k"},
        )
        assert decided.status_code == 201
        assert decided.json()["thread_view"]["values"]["approved"] is True
        again = client.post(
            f"/v1/interrupts/{question['id']}/decision",
            json=body,
            headers={**bearer("ana"), "Idempotency-Key": "other"},
        )
        assert again.status_code == 409
        deadline = time.monotonic() + 10
        while len(events) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [(e["type"], e.get("actor")) for e in events] == [
            ("interrupt.created", None),
            ("interrupt.decided", "ben"),
            ("run.finished", None),
        ]


def _decide(client: httpx.Client, thread: str) -> dict[str, Any]:
    started = client.post(
        f"/v1/threads/{thread}/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
    )
    question = started.json()["thread_view"]["interrupts"][0]
    decided = client.post(
        f"/v1/interrupts/{question['id']}/decision",
        json={"answer": True, "payload_hash": question["payload_hash"]},
        headers={**bearer("ben"), "Idempotency-Key": thread},
    )
    assert decided.status_code == 201, decided.text
    return dict(decided.json())


def test_a_background_continuation_that_cannot_run_leaves_the_thread_failed(dsn: str) -> None:
    app = failing_update_graph("orders").compile(store=PostgresStore(dsn))
    with (
        serving(lambda: create_app(app, auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        assert _decide(client, "bad")["continued"] is True
        view = wait_for(lambda: _thread_if(client, "bad", "failed"))
        failed = client.get("/v1/threads", params={"status": "failed"}, headers=bearer("vic"))
        everything = client.get("/v1/threads", headers=bearer("vic"))
    assert view["interrupts"] == [] and view["error"].startswith("InvalidUpdate: ")
    assert view["continue_with"] == "interlock resume bad --app MODULE:ATTR"
    assert [(t["thread"], t["error"]) for t in failed.json()["items"]] == [("bad", view["error"])]
    assert [t["thread"] for t in everything.json()["items"]] == ["bad"]
    # The server closed its App's store.
    reader = failing_update_graph("orders").compile(store=PostgresStore(dsn))
    state = reader.get_state_sync("bad")
    assert state.metadata["error"].startswith("InvalidUpdate: ")
    assert state.metadata["continue_with"] == "interlock resume bad --app MODULE:ATTR"
    assert reader.get_state_sync("bad", state.parent_id).status == "ready"  # the decision's
    asyncio.run(reader.store.close())


def _thread_if(client: httpx.Client, thread: str, status: str) -> dict[str, Any] | None:
    view = client.get(f"/v1/threads/{thread}", headers=bearer("vic")).json()
    return dict(view) if view["status"] == status else None


def test_the_server_leaves_continuations_to_installed_workers(dsn: str) -> None:
    app = order_graph().compile(store=PostgresStore(dsn))
    asyncio.run(Workers(app).install())
    with (
        serving(lambda: create_app(app, auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        assert _decide(client, "w1")["continued"] is False
        # The workers' trigger queued the one continuation; nobody else runs it.
        with psycopg.connect(dsn) as conn:
            jobs = conn.execute("SELECT status::text, lock FROM procrastinate_jobs").fetchall()
        assert jobs == [("todo", "interlock/w1")]
        assert client.get("/v1/threads/w1", headers=bearer("vic")).json()["status"] == "ready"


def test_a_thread_another_graph_wrote_is_shown_from_its_record(dsn: str) -> None:
    old = order_graph().compile(store=PostgresStore(dsn))
    assert old.run_sync({"n": 1}, thread="old-1").status == "interrupted"
    asyncio.run(old.store.close())
    # Another graph of the same name: it cannot read the thread's state.
    changed = failing_update_graph("orders").compile(store=PostgresStore(dsn))
    with (
        serving(lambda: create_app(changed, auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        shown = client.get("/v1/threads/old-1", headers=bearer("vic"))
    assert shown.status_code == 200, shown.text
    view = shown.json()
    assert (view["status"], view["values"]) == ("interrupted", None)
    assert [i["summary"] for i in view["interrupts"]] == ["Ship order 2?"]
    assert view["error"].startswith("GraphChanged: thread 'old-1' was checkpointed")
