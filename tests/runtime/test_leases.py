"""Single writer per thread: leases, renewal, ThreadBusy for a thread run elsewhere, FencedOut.

Leases run out on the stores' clock, which these tests move themselves (`FakeClock`) instead
of sleeping. The renewals are made on the runtime's own schedule (a timer, a task, the keeper
thread), in real time: a test that needs several of them waits for each one to happen.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    START,
    FencedOut,
    Graph,
    SqliteStore,
    StoreError,
    ThreadBusy,
    append,
    effect,
)
from interlock.runtime import _runctx
from interlock.runtime._keeper import KEEPER
from interlock.testing import FakeClock

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


async def test_a_thread_running_elsewhere_is_busy_and_nothing_changes(tmp_path: Path) -> None:
    started, release = anyio.Event(), anyio.Event()
    g = Graph(S)

    async def slow(s: S) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"log": ["slow"]}

    g.add_node("slow", slow)
    g.add_edge(START, "slow")
    async with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "a.db") as b:
        runner = g.compile(store=a, lease_ttl=5)
        other = g.compile(store=b, lease_ttl=5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: runner.run({}, thread="t"))
            await started.wait()
            head = await b.get_thread("t")
            with pytest.raises(ThreadBusy) as busy:
                await other.resume("t")
            assert busy.value.holder is not None and "being run by" in str(busy.value)
            with pytest.raises(ThreadBusy):
                await other.run({"log": ["new turn"]}, thread="t")
            assert await b.get_thread("t") == head
            release.set()
        # The run let the lease go when it stopped: the other executor may go on at once.
        done = await other.run({"log": ["next"]}, thread="t")
        assert done.values["log"] == ["slow", "next", "slow"]


class Renewals:
    """A real store that lets the test wait for the next renewal of a lease."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.renewed = threading.Event()  # set from whichever thread renewed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def renew_lease(self, thread: str, fence: Any) -> None:
        await self.inner.renew_lease(thread, fence)
        self.renewed.set()

    async def wait_renewed(self) -> None:
        """Wait for a renewal made after this call (one before it does not count)."""
        self.renewed.clear()
        assert await anyio.to_thread.run_sync(self.renewed.wait, 30), "no renewal came"


@pytest.mark.parametrize("renewer", ["timer", "task group"])
async def test_a_long_task_keeps_its_lease_alive(
    tmp_path: Path, renewer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if renewer == "task group":  # what runs under an event loop other than asyncio
        monkeypatch.setattr(_runctx, "_asyncio_loop", lambda: None)
    g = Graph(S)
    release = anyio.Event()

    async def slow(s: S) -> dict[str, Any]:
        await release.wait()
        return {"log": ["slow"]}

    g.add_node("slow", slow)
    g.add_edge(START, "slow")
    clock = FakeClock()
    path = tmp_path / "a.db"
    async with SqliteStore(path, clock=clock) as a, SqliteStore(path, clock=clock) as b:
        renewals = Renewals(a)
        runner = g.compile(store=renewals, lease_ttl=0.3)  # type: ignore[arg-type]
        other = g.compile(store=b, lease_ttl=0.3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: runner.run({}, thread="t"))
            # Four lease lifetimes pass on the stores' clock, a step shorter than the lease
            # at a time; the runner renews it every ttl/3 (of real time), so it still holds it.
            for _ in range(4):
                clock.advance(0.2)
                await renewals.wait_renewed()
                with pytest.raises(ThreadBusy):
                    await other.resume("t")
            release.set()
        assert (await other.get_state("t")).values["log"] == ["slow"]


def _take_over(path: Path, graph: Graph[S], clock: FakeClock) -> None:
    """Another executor, in its own thread and event loop, continues the thread."""

    async def main() -> None:
        async with SqliteStore(path, clock=clock) as store:
            await graph.compile(store=store, lease_ttl=5).resume("t")

    anyio.run(main)


async def test_a_stalled_executor_is_fenced_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole executor stalls (a paused VM, SIGSTOP): its lease keeper thread cannot renew
    # either. (A stalled event loop alone keeps its lease: see
    # test_a_node_that_blocks_the_loop_past_the_lease_keeps_it.)
    monkeypatch.setattr(KEEPER, "_renew", lambda watch: None)
    path = tmp_path / "a.db"
    clock = FakeClock()
    world: Counter[str] = Counter()
    g = Graph(S)
    stalled = threading.Event()

    async def work(s: S) -> dict[str, Any]:
        if not stalled.is_set():
            stalled.set()
            # This executor stalls past its lease (the stores' clock runs on while it does
            # nothing: it blocks its loop, so no renewal runs either); meanwhile another one
            # takes the thread over and finishes it.
            clock.advance(31)
            other = threading.Thread(target=_take_over, args=(path, g, clock))
            other.start()
            other.join()
            who = "stale"
        else:
            who = "successor"
        await effect("pay", lambda: world.update([who]))
        return {"log": [who]}

    g.add_node("work", work)
    g.add_edge(START, "work")
    async with SqliteStore(path, clock=clock) as store:
        app = g.compile(store=store, lease_ttl=30)
        with pytest.raises(FencedOut) as fenced:
            await app.run({}, thread="t")
        assert (fenced.value.token, fenced.value.current) == (1, 2)
        state = await app.get_state("t")
    # The stale executor's effect was refused before the call, and its step never committed.
    assert world == Counter({"successor": 1})
    assert state.values["log"] == ["successor"] and state.status == "done"


RUNNER = """
import sys, anyio
from typing import Annotated, TypedDict
from interlock import START, Graph, SqliteStore, append

class S(TypedDict, total=False):
    log: Annotated[list[str], append]

async def slow(s):
    print("running", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)  # until the test says go on
    return {"log": ["slow"]}

async def main(path):
    g = Graph(S)
    g.add_node("slow", slow)
    g.add_edge(START, "slow")
    async with SqliteStore(path) as store:
        await g.compile(store=store).run({}, thread="t")
    print("finished", flush=True)

anyio.run(main, sys.argv[1])
"""


def test_a_thread_run_by_another_process_is_busy(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    path = tmp_path / "a.db"
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    g = Graph(S)
    g.add_node("slow", lambda s: {"log": ["mine"]})
    g.add_edge(START, "slow")

    async def try_to_resume() -> ThreadBusy:
        async with SqliteStore(path) as store:
            with pytest.raises(ThreadBusy) as busy:
                await g.compile(store=store).resume("t")
            return busy.value

    async def final_state() -> Any:
        async with SqliteStore(path) as store:
            return await g.compile(store=store).get_state("t")

    try:
        assert child.stdout.readline() == "running\n"
        busy = anyio.run(try_to_resume)
        assert busy.holder == f"{os.uname().nodename}:{child.pid}"
        child.stdin.write("go on\n")
        child.stdin.flush()
        assert child.stdout.readline() == "finished\n"
        state = anyio.run(final_state)
        assert state.status == "done" and state.values["log"] == ["slow"]
    finally:
        child.communicate(timeout=30)
    assert child.returncode == 0


class DiskFull:
    """A real store whose writes fail while ``full`` is set, as on a full disk."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.full = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append_checkpoint(self, record: Any, **kw: Any) -> int | None:
        if self.full:
            raise StoreError("database or disk is full")
        return await self.inner.append_checkpoint(record, **kw)

    async def renew_lease(self, thread: str, fence: Any) -> None:
        if self.full:
            raise StoreError("database or disk is full")
        await self.inner.renew_lease(thread, fence)


async def test_a_run_whose_lease_release_failed_can_take_its_lease_back(tmp_path: Path) -> None:
    entered, release = anyio.Event(), anyio.Event()
    calls: Counter[str] = Counter()
    g = Graph(S)

    async def work(s: S) -> dict[str, Any]:
        calls["work"] += 1
        if calls["work"] == 1:
            disk.full = True  # from here on nothing can be written: not the failure either
            raise ValueError("the node failed")
        entered.set()
        await release.wait()
        return {"log": ["work"]}

    g.add_node("work", work).add_edge(START, "work")
    async with SqliteStore(tmp_path / "a.db") as a, SqliteStore(tmp_path / "a.db") as b:
        disk = DiskFull(a)
        app = g.compile(store=disk, lease_ttl=30)  # type: ignore[arg-type]
        with pytest.raises(StoreError, match="disk is full"):
            await app.run({}, thread="t")
        disk.full = False
        # The lease is still held (its release failed): others are kept out until it expires,
        with pytest.raises(ThreadBusy):
            await g.compile(store=b, lease_ttl=30).resume("t")
        # but the App that holds it takes it back at once, and still only one of its calls runs.
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: app.resume("t"))
            await entered.wait()
            with pytest.raises(ThreadBusy):
                await app.resume("t")
            release.set()
        assert calls["work"] == 2
        state = await app.get_state("t")
        assert state.status == "done" and state.values["log"] == ["work"]
        # The lease was let go at the end: the other executor may go on at once.
        assert (await g.compile(store=b).run({"log": ["x"]}, thread="t")).status == "done"


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
@pytest.mark.parametrize("kind", ["sync node", "async node that blocks"])
async def test_a_node_that_blocks_the_loop_past_the_lease_keeps_it(
    tmp_path: Path, kind: str
) -> None:
    # Real time, on purpose: what is tested is the keeper thread, which renews a lease when
    # the call's own renewals are half a ttl overdue by the monotonic clock. Only a loop that
    # really stays blocked for several lease lifetimes shows that it does; a store clock moved
    # by the test would let the lease run out without the keeper ever being due.
    ttl = 0.4
    path = tmp_path / "a.db"
    entered, release = threading.Event(), threading.Event()
    calls: Counter[str] = Counter()

    def body() -> dict[str, Any]:
        calls["slow"] += 1
        if calls["slow"] == 1:
            entered.set()
            release.wait(timeout=60)  # blocks the event loop: no renewal can run on it
        return {"log": ["slow"]}

    async def blocking(s: S) -> dict[str, Any]:
        return body()

    g = Graph(S)
    g.add_node("slow", (lambda s: body()) if kind == "sync node" else blocking)
    g.add_edge(START, "slow")
    outcomes: list[str] = []

    def contend() -> None:
        """Another executor tries to take the thread over for several lease lifetimes."""

        async def main() -> None:
            async with SqliteStore(path) as store:
                other = g.compile(store=store, lease_ttl=ttl)
                until = time.monotonic() + 4 * ttl
                while time.monotonic() < until:
                    try:
                        await other.resume("t")
                        outcomes.append("took over")
                    except ThreadBusy:
                        outcomes.append("busy")
                    await anyio.sleep(ttl / 4)  # paces the attempts; nothing waits on it

        entered.wait(timeout=60)
        try:
            anyio.run(main)
        finally:
            release.set()

    contender = threading.Thread(target=contend)
    contender.start()
    try:
        async with SqliteStore(path) as store:
            done = await g.compile(store=store, lease_ttl=ttl).run({}, thread="t")
    finally:
        release.set()
        contender.join()
    assert len(outcomes) >= 8 and set(outcomes) == {"busy"}
    assert calls["slow"] == 1  # the node body ran exactly once
    assert done.status == "done" and done.values["log"] == ["slow"]
