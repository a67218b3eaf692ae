"""PostgreSQL restarted while threads run: they continue after reconnecting, and nothing is lost.

Twenty threads run on one App at once. Each takes several supersteps, stops for an approval,
and after it performs a side effect counted in the test process. The server is restarted twice
while every run is in flight. Half of the threads ("waiters") are then held inside a node, so
their next commit meets pool connections the restart broke. The other half ("spinners") commit
superstep after superstep until the restart is over, so their commits meet the server going
down and coming back. The first restart comes when the waiters wait in the middle of their
first run; the second when the approved waiters wait just before their side effect.

The store reconnects on its own, so a call that meets the restart usually just takes longer.
It may fail, but only with a typed error, and its thread must then carry on from what the store
holds: ``app.run`` again when not even its input was committed, ``app.resume(thread)`` when its
last checkpoint is ``ready``, and the same answer again when the decision itself was not
committed. At the end every thread is done with the exact state of a run that never failed, each
side effect ran once, no interrupt is left pending, and a fresh store reads the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from typing import Annotated, Any, TypedDict

import anyio
import anyio.to_thread
import pytest

from _pgserver import PgServer
from interlock import (
    END,
    START,
    App,
    CheckpointNotFound,
    Graph,
    InterruptAlreadyResolved,
    RunResult,
    StoreError,
    ThreadBusy,
    append,
    approve,
)
from interlock.stores import PostgresStore

pytestmark = pytest.mark.anyio

THREADS = 20
ATTEMPTS = 3
"""Calls per thread after a restart; the server is up again by then, so one should do."""
DEADLINE = 60.0
"""Seconds a phase may take before the test fails instead of hanging."""
SPIN_PACE = 0.005
"""Seconds between a spinner's supersteps, so that its checkpoint count stays modest."""
BEFORE_APPROVAL = ["prepare", "waited", "work"]
FINAL_LOG = [*BEFORE_APPROVAL, "approved", "executed"]


class S(TypedDict, total=False):
    name: str
    spin: bool
    log: Annotated[list[str], append]
    ok: bool


@dataclass
class Phase:
    """One restart: where the waiters wait, how far the spinners got, and when it is over."""

    size: int
    """How many waiters and how many spinners there are."""
    waiting: set[str] = field(default_factory=set)
    spins: Counter[str] = field(default_factory=Counter)
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set once every waiter waits and every spinner has committed a spin."""
    over: anyio.Event = field(default_factory=anyio.Event)
    """Set once the server is back: waiters go on, spinners leave their loop."""

    def check(self) -> None:
        spinning = [n for n in self.spins.values() if n >= 2]
        if len(self.waiting) >= self.size and len(spinning) >= self.size:
            self.ready.set()

    async def wait(self, name: str) -> None:
        self.waiting.add(name)
        self.check()
        await self.over.wait()

    async def spin(self, name: str) -> None:
        self.spins[name] += 1
        self.check()
        if not self.over.is_set():
            await anyio.sleep(SPIN_PACE)


@dataclass
class Probe:
    """What the nodes report to the test, and the phases that hold them."""

    first: Phase
    second: Phase
    effects: Counter[str] = field(default_factory=Counter)


def build(probe: Probe) -> Graph[S]:
    g = Graph(S)

    async def wait(s: S) -> dict[str, Any]:
        if not s["spin"]:
            await probe.first.wait(s["name"])
        return {"log": ["waited"]}

    async def spin(s: S) -> dict[str, Any]:
        await probe.first.spin(s["name"])
        return {}

    async def spin_again(s: S) -> dict[str, Any]:
        await probe.second.spin(s["name"])
        return {}

    def gate(s: S) -> dict[str, Any]:
        ok = approve(f"ship {s['name']}?")
        return {"ok": ok, "log": ["approved" if ok else "rejected"]}

    async def execute(s: S) -> dict[str, Any]:
        if not s["spin"]:
            await probe.second.wait(s["name"])
        probe.effects[s["name"]] += 1  # the side effect that must happen once per thread
        return {"log": ["executed"]}

    g.add_node("prepare", lambda s: {"log": ["prepare"]}).add_node("spin", spin)
    g.add_node("wait", wait).add_node("work", lambda s: {"log": ["work"]})
    g.add_node("approve", gate).add_node("spin_again", spin_again).add_node("execute", execute)
    g.add_edge(START, "prepare")
    g.add_conditional_edges("prepare", lambda s: "spin" if s["spin"] else "wait")
    g.add_conditional_edges("spin", lambda s: "wait" if probe.first.over.is_set() else "spin")
    g.add_edge("wait", "work").add_edge("work", "approve")
    g.add_conditional_edges(
        "approve", lambda s: END if not s["ok"] else "spin_again" if s["spin"] else "execute"
    )
    g.add_conditional_edges(
        "spin_again", lambda s: "execute" if probe.second.over.is_set() else "spin_again"
    )
    return g


def compile_app(probe: Probe, store: PostgresStore) -> App[S]:
    # A spinner's call takes as many supersteps as the restart lasts.
    return build(probe).compile(store=store, recursion_limit=100_000)


Failures = list[tuple[str, Exception]]


async def attempt(
    failures: Failures, thread: str, call: Callable[[], Awaitable[RunResult[S]]]
) -> RunResult[S] | None:
    """Await one run or resume; a typed failure is recorded and leaves the thread to continue.

    `StoreError`: the server was unreachable. `ThreadBusy`: a commit reached the server but
    its reply was lost, and the store's retry found the thread already moved on by it.
    """
    try:
        return await call()
    except (StoreError, ThreadBusy) as exc:
        failures.append((thread, exc))
        return None


async def carry_on(app: App[S], thread: str, failures: Failures, answer: bool) -> None:
    """Continue a thread whose last call failed from what the store holds.

    Stops at the approval, or (with ``answer``) approves and runs the thread to its end.
    """
    for _ in range(ATTEMPTS):
        try:
            state = await app.get_state(thread)
        except CheckpointNotFound:
            state = None
        if state is not None and state.status == ("done" if answer else "interrupted"):
            return
        call: Callable[[], Awaitable[RunResult[S]]]
        if state is None:
            # Not even the input was committed: the run starts over.
            call = partial(app.run, start_input(thread), thread=thread)
        elif state.interrupts and answer:
            # The decision was not committed: answer again.
            call = partial(app.resume, thread, {state.interrupts[0].id: True})
        else:
            # The last checkpoint is `ready`: continue from it.
            assert state.status == "ready", (thread, state.status)
            call = partial(app.resume, thread)
        await attempt(failures, thread, call)
    pytest.fail(f"thread {thread!r} did not recover in {ATTEMPTS} calls: {failures}")


def start_input(thread: str) -> S:
    return {"name": thread, "spin": int(thread[1:]) % 2 == 1}


async def restart_during(
    server: PgServer,
    phase: Phase,
    threads: list[str],
    call: Callable[[str], Awaitable[RunResult[S]]],
    failures: Failures,
) -> dict[str, RunResult[S] | None]:
    """Make ``call`` for every thread at once; restart the server once the phase is ready."""
    results: dict[str, RunResult[S] | None] = {}

    async def one(thread: str) -> None:
        results[thread] = await attempt(failures, thread, lambda: call(thread))

    async with anyio.create_task_group() as tg:
        for thread in threads:
            tg.start_soon(one, thread)
        await phase.ready.wait()
        await anyio.to_thread.run_sync(server.restart)
        phase.over.set()
    return results


def expected(thread: str, log: list[str], **more: Any) -> dict[str, Any]:
    return {**start_input(thread), "log": log, **more}


async def test_threads_in_flight_survive_server_restarts(server: PgServer, dsn: str) -> None:
    threads = [f"t{n:02d}" for n in range(THREADS)]
    probe = Probe(Phase(THREADS // 2), Phase(THREADS // 2))
    failures: Failures = []
    async with PostgresStore(dsn) as store:
        app = compile_app(probe, store)

        # 1. Start every thread; restart while the waiters wait and the spinners commit.
        with anyio.fail_after(DEADLINE):
            first = await restart_during(
                server,
                probe.first,
                threads,
                lambda t: app.run(start_input(t), thread=t),
                failures,
            )
            async with anyio.create_task_group() as tg:
                for thread in threads:
                    if first[thread] is None:
                        tg.start_soon(carry_on, app, thread, failures, False)

        # Every thread waits on its approval, with the state of a run that never failed.
        assert all(r.status == "interrupted" for r in first.values() if r is not None)
        pending: dict[str, str] = {}
        for thread in threads:
            state = await app.get_state(thread)
            assert state.status == "interrupted", thread
            assert state.values == expected(thread, BEFORE_APPROVAL), thread
            (waiting,) = state.interrupts
            pending[thread] = waiting.id
        inbox = await app.inbox()
        assert sorted((i.thread, i.id) for i in inbox) == sorted(pending.items())
        assert probe.effects == Counter()

        # 2. Approve every thread; restart while the waiters wait just before their effect.
        with anyio.fail_after(DEADLINE):
            second = await restart_during(
                server,
                probe.second,
                threads,
                lambda t: app.resume(t, {pending[t]: True}),
                failures,
            )
            async with anyio.create_task_group() as tg:
                for thread in threads:
                    if second[thread] is None:
                        tg.start_soon(carry_on, app, thread, failures, True)

        assert all(r.status == "done" for r in second.values() if r is not None)
        assert probe.effects == Counter(threads)

    # 3. A fresh store reads every thread done, complete, with an unbroken history.
    async with PostgresStore(dsn) as fresh:
        reader = compile_app(probe, fresh)
        assert await reader.inbox() == []
        for thread in threads:
            state = await reader.get_state(thread)
            assert state.status == "done", thread
            assert state.values == expected(thread, FINAL_LOG, ok=True), thread
            decision = await fresh.get_interrupt(pending[thread])
            assert decision is not None and decision.status == "resolved", thread
            history, before = [], None
            while page := await reader.history(thread, limit=100, before=before):
                history.extend(page)
                before = page[-1].checkpoint_id
            assert history[0].checkpoint_id == state.checkpoint_id, thread
            assert history[-1].parent_id is None and history[-1].source == "input", thread
            for newer, older in pairwise(history):
                assert newer.parent_id == older.checkpoint_id, thread
            assert [h.status for h in history].count("interrupted") == 1, thread
    assert probe.effects == Counter(threads)
    # Only the store may fail, and only with its typed errors.
    assert all(isinstance(exc, StoreError | ThreadBusy) for _, exc in failures), failures


async def test_a_waiting_thread_resumes_from_a_new_store_after_a_restart(
    server: PgServer, dsn: str
) -> None:
    probe = Probe(Phase(1), Phase(1))
    probe.first.over.set()
    probe.second.over.set()
    async with PostgresStore(dsn) as first:
        app = compile_app(probe, first)
        run = await app.run(start_input("t0"), thread="t0")
        assert run.status == "interrupted"
        waiting = run.interrupt()
        await anyio.to_thread.run_sync(server.restart)

        # Another process, with a store of its own, answers after the restart.
        async with PostgresStore(dsn) as second:
            other = compile_app(probe, second)
            assert [i.id for i in await other.inbox()] == [waiting.id]
            done = await other.resume("t0", {waiting.id: True})
        assert done.status == "done"
        assert done.values == expected("t0", FINAL_LOG, ok=True)

        # The first store reconnects too; its App sees the answer and cannot give another.
        with pytest.raises(InterruptAlreadyResolved):
            await app.resume("t0", {waiting.id: True})
        assert (await app.get_state("t0")).values == done.values
        assert await app.inbox() == []
    assert probe.effects == Counter(t0=1)
