"""The approval server on PostgreSQL: the inbox, a decision and the event stream."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx2 as httpx
from _serving import auth, bearer, order_graph, serving

from interlock.server import create_app
from interlock.stores import PostgresStore


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
