"""The event stream over real HTTP: what it sends, to whom, and resuming from Last-Event-ID."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from _serving import Serving, auth, bearer, mail_agent, order_app, serving

from interlock.server import create_app


class Listener:
    """Reads an event stream in a thread; events arrive on a queue as (id, type, data)."""

    def __init__(self, url: str, who: str, headers: dict[str, str] | None = None) -> None:
        self.events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
        self.status: queue.Queue[int] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._read, args=(url, {**bearer(who), **(headers or {})}), daemon=True
        )
        self._thread.start()
        assert self.status.get(timeout=10) == 200

    def _read(self, url: str, headers: dict[str, str]) -> None:
        # The server ends open streams when it stops: that is the end of the listening.
        with contextlib.suppress(httpx.HTTPError):
            self._frames(url, headers)

    def _frames(self, url: str, headers: dict[str, str]) -> None:
        with httpx.Client(timeout=None) as client, client.stream("GET", url, headers=headers) as r:
            self.status.put(r.status_code)
            frame: dict[str, str] = {}
            for line in r.iter_lines():
                if self._stop.is_set():
                    return
                if not line:
                    if "data" in frame:
                        self.events.put((frame["id"], frame["event"], json.loads(frame["data"])))
                    frame = {}
                elif not line.startswith(":"):
                    field, _, value = line.partition(": ")
                    frame[field] = value

    def next(self, timeout: float = 10.0) -> tuple[str, str, dict[str, Any]]:
        return self.events.get(timeout=timeout)

    def until(self, kind: str) -> tuple[str, str, dict[str, Any]]:
        while True:
            event = self.next()
            if event[1] == kind:
                return event

    def close(self) -> None:
        self._stop.set()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Serving]:
    db = tmp_path / "orders.db"
    with serving(lambda: create_app(order_app(db), auth=auth(), heartbeat=0.2)) as s:
        yield s


def _start(client: httpx.Client, thread: str) -> None:
    r = client.post(f"/v1/threads/{thread}/runs", json={"input": {"n": 1}}, headers=bearer("ana"))
    assert r.status_code == 202


def _decide(client: httpx.Client, interrupt_id: str, who: str = "ana") -> None:
    detail = client.get(f"/v1/interrupts/{interrupt_id}", headers=bearer(who)).json()
    body = {"answer": True, "payload_hash": detail["interrupt"]["payload_hash"]}
    headers = {**bearer(who), "Idempotency-Key": interrupt_id}
    r = client.post(f"/v1/interrupts/{interrupt_id}/decision", json=body, headers=headers)
    assert r.status_code == 201, r.text


def test_the_stream_tells_of_the_question_the_decision_and_the_end(server: Serving) -> None:
    listener = Listener(f"{server.url}/v1/events", "vic")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        _start(client, "t1")
        _, kind, created = listener.next()
        assert kind == "interrupt.created"
        assert created["thread"] == "t1"
        assert created["summary"] == "Ship order 2?"
        assert created["app"] == "orders"
        _decide(client, created["interrupt_id"])
        _, kind, decided = listener.next()
        assert (kind, decided["actor"], decided["interrupt_id"]) == (
            "interrupt.decided",
            "ana",
            created["interrupt_id"],
        )
        _, kind, finished = listener.next()
        assert (kind, finished["thread"]) == ("run.finished", "t1")
    listener.close()


def test_reconnecting_with_last_event_id_continues_after_it(server: Serving) -> None:
    first = Listener(f"{server.url}/v1/events", "vic")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        _start(client, "t1")
        seen_id, _, created = first.next()
        first.close()
        _decide(client, created["interrupt_id"])
        _start(client, "t2")
        # Missed while away: the decision, the end of t1's run, t2's question; in order.
        again = Listener(f"{server.url}/v1/events", "vic", {"Last-Event-ID": seen_id})
        kinds = [again.next()[1:] for _ in range(3)]
        assert [(k, d["thread"]) for k, d in kinds] == [
            ("interrupt.decided", "t1"),
            ("run.finished", "t1"),
            ("interrupt.created", "t2"),
        ]
        assert again.events.empty()
        again.close()
        # From the very first id: everything after it, nothing before.
        replay = Listener(f"{server.url}/v1/events?last_event_id={seen_id}", "vic")
        assert replay.next()[1] == "interrupt.decided"
        replay.close()


def test_the_stream_shows_only_what_the_identity_may_see(tmp_path: Path) -> None:
    orders, mail = tmp_path / "orders.db", tmp_path / "mail.db"
    apps = {"orders": order_app(orders), "mail": mail_agent(mail)}
    with (
        serving(lambda: create_app(apps, auth=auth())) as s,
        httpx.Client(base_url=s.url, timeout=10) as client,
    ):
        mailer = Listener(f"{s.url}/v1/events?types=interrupt.created", "mailer")
        everyone = Listener(f"{s.url}/v1/events?types=interrupt.created", "vic")
        r = client.post(
            "/v1/threads/o1/runs", json={"input": {"n": 1}, "app": "orders"}, headers=bearer("ana")
        )
        assert r.status_code == 202
        r = client.post(
            "/v1/threads/m1/runs",
            json={"input": {"messages": [{"role": "user", "content": "hi"}]}, "app": "mail"},
            headers=bearer("ana"),
        )
        assert r.status_code == 202
        got = {everyone.next()[2]["app"], everyone.next()[2]["app"]}
        assert got == {"orders", "mail"}
        only = mailer.next()[2]
        assert (only["app"], only["tool"]) == ("mail", "send_email")
        with pytest.raises(queue.Empty):
            mailer.next(timeout=0.5)
        mailer.close()
        everyone.close()


def test_bad_stream_requests_are_refused(server: Serving) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/v1/events").status_code == 401
        for params in ({"types": "nope"}, {"last_event_id": "@@"}, {"last_event_id": "WzFd"}):
            r = client.get("/v1/events", params=params, headers=bearer("vic"))
            assert r.status_code == 400, params
            assert r.json()["error"] == "bad_parameter"


def test_a_failed_run_is_told_on_the_stream(server: Serving) -> None:
    listener = Listener(f"{server.url}/v1/events?types=run.failed,run.finished", "vic")
    with httpx.Client(base_url=server.url, timeout=10) as client:
        r = client.post("/v1/threads/f/runs", json={"input": {"n": "x"}}, headers=bearer("ana"))
        assert r.status_code == 202
        _, kind, event = listener.next()
        assert (kind, event["thread"]) == ("run.failed", "f")
        assert event["summary"].startswith("The run failed: NodeError: ")  # the reason
    listener.close()
