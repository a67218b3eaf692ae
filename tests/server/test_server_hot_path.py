"""What an approval round trip over HTTP costs the store: the reads the server adds to a run.

Every store call the server makes from a request, or from its change-feed follower beside the
requests, takes a turn on the store's one worker thread and a wake-up of the event loop. These
tests hold the server to the calls it needs, over real HTTP on loopback.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from _serving import auth, bearer, order_app, serving, wait_for
from prometheus_client.parser import text_string_to_metric_families

from interlock.server import create_app

POLL = 0.25
"""The follower's poll interval in these tests: long enough to count its reads by it."""


@dataclass
class Calls:
    """Store calls counted by method, and the moments of the change-feed reads."""

    by_server: dict[str, int] = field(default_factory=dict)
    """Calls made directly from the server's own code (``interlock.server``)."""
    changes_at: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, name: str, frame: Any) -> None:
        with self.lock:
            if frame.f_globals.get("__name__", "").startswith("interlock.server"):
                self.by_server[name] = self.by_server.get(name, 0) + 1
            if name == "changes":
                self.changes_at.append(time.monotonic())

    def server(self, name: str) -> int:
        with self.lock:
            return self.by_server.get(name, 0)


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[str, Calls]]:
    """A server on an order app whose store counts its calls; its URL and the counts."""
    calls = Calls()

    def factory() -> Any:
        app = order_app(tmp_path / "orders.db")
        store = app.store
        for name in ("get_thread", "get_interrupt", "changes"):
            _count(store, name, calls)
        return create_app(app, auth=auth(), poll_interval=POLL)

    with serving(factory) as s:
        yield s.url, calls


def _count(store: Any, name: str, calls: Calls) -> None:
    method: Callable[..., Any] = getattr(store, name)

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.count(name, sys._getframe(1))
        return await method(*args, **kwargs)

    setattr(store, name, counting)


async def _start(client: httpx.AsyncClient, thread: str, *, wait: bool = True) -> httpx.Response:
    """New input for ``thread``, run and waited for (or run in the background)."""
    body = {"input": {"n": 1}, "wait": wait}
    return await client.post(f"/v1/threads/{thread}/runs", json=body, headers=bearer("ana"))


async def _events_counted(client: httpx.AsyncClient) -> dict[str, float]:
    r = await client.get("/metrics", headers=bearer("root"))
    assert r.status_code == 200, r.text
    return {
        s.labels["type"]: s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
        if s.name == "interlock_events_total"
    }


@pytest.mark.anyio
async def test_new_input_run_and_waited_for_reads_no_thread_record_first(
    counted: tuple[str, Calls],
) -> None:
    url, calls = counted
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        r = await _start(client, "t1")
        assert r.status_code == 200, r.text
        assert r.json()["thread_view"]["status"] == "interrupted"
        # The run itself refuses a thread that waits on decisions: no read before it.
        assert calls.server("get_thread") == 0
        # Run in the background, the refusal must come before the 202: read first.
        r = await _start(client, "t2", wait=False)
        assert r.status_code == 202
        assert calls.server("get_thread") == 1


@pytest.mark.anyio
async def test_new_input_waited_for_on_a_waiting_thread_is_refused_and_records_nothing(
    counted: tuple[str, Calls],
) -> None:
    url, _ = counted
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        start = {"input": {"n": 1}, "wait": True}
        first = await client.post("/v1/threads/t1/runs", json=start, headers=bearer("ana"))
        view = first.json()["thread_view"]
        again = {"input": {"n": 5}, "wait": True}
        refused = await client.post("/v1/threads/t1/runs", json=again, headers=bearer("ana"))
        assert refused.status_code == 409
        body = refused.json()
        assert body["error"] == "thread_interrupted"
        assert "decide them" in body["message"]
        after = (await client.get("/v1/threads/t1", headers=bearer("vic"))).json()
        assert after["checkpoint_id"] == view["checkpoint_id"]
        assert after["values"] == view["values"]
        assert [i["id"] for i in after["interrupts"]] == [i["id"] for i in view["interrupts"]]


@pytest.mark.anyio
async def test_the_follower_counts_events_without_reading_their_questions(
    counted: tuple[str, Calls],
) -> None:
    url, calls = counted
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        for n in range(3):
            r = await _start(client, f"t{n}")
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 10
        while (await _events_counted(client)).get("interrupt.created") != 3:
            assert time.monotonic() < deadline, await _events_counted(client)
            await anyio.sleep(0.05)
        # With no notifier nothing needs a whole event: no question was read for one.
        assert calls.server("get_interrupt") == 0


@pytest.mark.anyio
async def test_the_follower_reads_the_feed_at_most_once_per_poll_interval(
    counted: tuple[str, Calls],
) -> None:
    url, calls = counted
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        # Writes all along (a new question every few milliseconds), for eight intervals.
        began = time.monotonic()
        n = 0
        while time.monotonic() - began < 8 * POLL:
            r = await _start(client, f"t{n}")
            assert r.status_code == 200, r.text
            n += 1
        ended = time.monotonic()
    reads = [t for t in calls.changes_at if began <= t <= ended]
    # Reading again at once after each batch would make two reads or more per interval.
    assert len(reads) <= (ended - began) / POLL + 1, (len(reads), n)
    assert len(reads) >= 2


def test_a_listener_still_hears_every_event_whole(tmp_path: Path) -> None:
    heard: list[Any] = []

    class Recorder:
        async def __aenter__(self) -> Recorder:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def publish(self, event: Any) -> None:
            heard.append(event)

    def factory() -> Any:
        return create_app(
            order_app(tmp_path / "orders.db"), auth=auth(), notifier=Recorder(), poll_interval=0.02
        )

    with serving(factory) as s, httpx.Client(base_url=s.url, timeout=10) as client:
        r = client.post(
            "/v1/threads/t1/runs", json={"input": {"n": 1}, "wait": True}, headers=bearer("ana")
        )
        question = r.json()["thread_view"]["interrupts"][0]
        wait_for(lambda: [e for e in heard if e.type == "interrupt.created"])
    created = next(e for e in heard if e.type == "interrupt.created")
    assert created.interrupt_id == question["id"]
    assert created.summary and created.thread == "t1"
