"""A fleet of ``interlock worker`` processes over one PostgreSQL, and the outside ledger that
proves what they did. Shared by the multi-worker tests and ``bench/w1_workers.py``.

The app (``tests.workers._fleet:workers``, configured through environment variables so that
every worker process builds the same one): a run asks for approval of a refund, and once
approved makes it as a dangerous effect, which writes a line to the ledger (the outside
system), with 20 ms of simulated I/O between its start and end marks. The ledger is one file
per process, appended and fsynced line by line, so a killed worker leaves every line it wrote.

`Driver` plays the approvers: it follows the inbox, approves every question (recording when it
posted each decision), and answers reconcile questions from the ledger, as a person checking
the outside system would: the refund went through if the ledger has its end mark.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from interlock import (
    END,
    START,
    App,
    Graph,
    InterruptAlreadyResolved,
    InvalidResume,
    ThreadBusy,
    approve,
    effect,
)
from interlock.stores import PostgresStore
from interlock.workers import Workers

ROOT = Path(__file__).resolve().parent.parent.parent
DSN_VARIABLE = "INTERLOCK_FLEET_DSN"
LEDGER_VARIABLE = "INTERLOCK_FLEET_LEDGER"
IO_VARIABLE = "INTERLOCK_FLEET_IO"
"""Seconds of simulated I/O in each refund (default 0.02)."""


class Order(TypedDict, total=False):
    order: int
    tid: str
    approved: bool
    receipt: str


async def ask(state: Order) -> Order:
    return {"approved": approve(f"refund order {state['order']}?")}


async def refund(state: Order) -> Order:
    if not state.get("approved"):
        return {}
    receipt = await effect("refund", _refund_outside, state["tid"], state["order"])
    return {"receipt": receipt}


async def _refund_outside(thread: str, order: int) -> str:
    _ledger_write({"thread": thread, "mark": "start", "at": time.time()})
    await asyncio.sleep(float(os.environ.get(IO_VARIABLE, "0.02")))
    _ledger_write({"thread": thread, "mark": "end", "at": time.time()})
    return f"r-{order}"


def _ledger_write(entry: dict[str, Any]) -> None:
    path = Path(os.environ[LEDGER_VARIABLE]) / f"{os.getpid()}.jsonl"
    entry["pid"] = os.getpid()
    with path.open("a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def build(dsn: str, *, lease_ttl: float = 2.0) -> App[Order]:
    g = Graph(Order, name="refunds")
    g.add_node("ask", ask).add_node("refund", refund)
    g.add_edge(START, "ask").add_edge("ask", "refund").add_edge("refund", END)
    return g.compile(store=PostgresStore(dsn, max_size=4), lease_ttl=lease_ttl)


def fleet_workers(app: App[Any], *, concurrency: int = 10) -> Workers:
    return Workers(
        app,
        concurrency=concurrency,
        heartbeat=0.5,
        stalled_after=2.0,
        sweep_every=1,
        poll_interval=0.5,
        grace=1.0,
    )


def __getattr__(name: str) -> Any:
    # `interlock worker --app tests.workers._fleet:workers` builds it in the worker process.
    if name == "workers":
        dsn = os.environ[DSN_VARIABLE]
        concurrency = int(os.environ.get("INTERLOCK_FLEET_CONCURRENCY", "10"))
        return fleet_workers(build(dsn), concurrency=concurrency)
    raise AttributeError(name)


# -- the processes -------------------------------------------------------------------------------


def spawn_worker(
    dsn: str, ledger: Path, *, concurrency: int = 10, io: float = 0.02
) -> subprocess.Popen[bytes]:
    """One ``interlock worker`` process; its stderr goes to ``ledger/worker-<n>.log``."""
    env = {
        **os.environ,
        DSN_VARIABLE: dsn,
        LEDGER_VARIABLE: str(ledger),
        IO_VARIABLE: str(io),
        "INTERLOCK_FLEET_CONCURRENCY": str(concurrency),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
    }
    log = ledger / f"worker-{len(list(ledger.glob('worker-*.log')))}.log"
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "interlock", "worker", "--app", "tests.workers._fleet:workers"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


@contextlib.contextmanager
def fleet(
    dsn: str, ledger: Path, n: int, *, concurrency: int = 10, io: float = 0.02
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` worker processes; stopped with SIGTERM (killed if they linger) on exit."""
    procs = [spawn_worker(dsn, ledger, concurrency=concurrency, io=io) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def worker_logs(ledger: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(ledger.glob("worker-*.log")))


# -- the ledger -----------------------------------------------------------------------------------


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for path in sorted(ledger.glob("[0-9]*.jsonl")):
        for line in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by SIGKILL
                entries.append(json.loads(line))
    return entries


@dataclass
class LedgerReport:
    refunds: dict[str, int]
    """Completed refunds (end marks) per thread."""
    overlaps: list[str]
    """Threads whose refund was in flight in two processes at once."""


def check_ledger(ledger: Path, killed: dict[int, float] | None = None) -> LedgerReport:
    """What the ledger says; ``killed``: when each SIGKILLed process was killed, which ends
    the refunds it left in flight (any other refund left open stays open to the end)."""
    killed = killed or {}
    entries = read_ledger(ledger)
    refunds: dict[str, int] = {}
    spans: dict[str, list[tuple[float, float, int]]] = {}
    starts: dict[tuple[str, int], float] = {}
    for e in entries:
        key = (e["thread"], e["pid"])
        if e["mark"] == "start":
            starts[key] = e["at"]
        else:
            refunds[e["thread"]] = refunds.get(e["thread"], 0) + 1
            spans.setdefault(e["thread"], []).append((starts.pop(key, e["at"]), e["at"], e["pid"]))
    for (thread, pid), at in starts.items():  # started, never ended
        spans.setdefault(thread, []).append((at, killed.get(pid, float("inf")), pid))
    overlaps = []
    for thread, intervals in spans.items():
        intervals.sort()
        for (_, end_a, pid_a), (start_b, _, pid_b) in itertools.pairwise(intervals):
            if start_b < end_a and pid_a != pid_b:
                overlaps.append(thread)
                break
    return LedgerReport(refunds=refunds, overlaps=overlaps)


# -- the approvers --------------------------------------------------------------------------------


@dataclass
class Driver:
    """Approves every question of the fleet's app; answers reconcile questions from the ledger.

    It follows the store's change feed, as an approvals service would, rather than listing the
    inbox again and again: each new question is answered once.
    """

    app: App[Any]
    ledger: Path
    posted: dict[str, float] = field(default_factory=dict)
    """When the approval of each thread was posted."""
    reconciled: dict[str, Any] = field(default_factory=dict)
    cursor: str | None = None
    waiting: list[tuple[str, str]] = field(default_factory=list)
    """(thread, interrupt id) of questions whose thread was busy: asked again next step."""

    async def step(self) -> int:
        """Answer the questions raised since the last step; return how many were recorded."""
        changes = await self.app.store.changes(after=self.cursor, limit=5000)
        if changes:
            self.cursor = changes[-1].cursor
        todo = self.waiting + [
            (c.thread, c.interrupt_id)
            for c in changes
            if c.kind == "interrupt_created" and c.interrupt_id is not None
        ]
        self.waiting = []
        n = 0
        for thread, iid in todo:
            try:
                await self._answer(thread, iid)
                n += 1
            except ThreadBusy:
                self.waiting.append((thread, iid))
            except InterruptAlreadyResolved:
                pass
        return n

    async def _answer(self, thread: str, iid: str) -> None:
        self.posted.setdefault(thread, time.time())
        try:
            await self.app.decide(thread, {iid: True}, actor="driver")
        except InvalidResume:
            # Not an approval: a reconcile question. The refund went through if the ledger
            # has its end mark.
            done = thread in check_ledger(self.ledger).refunds
            answer: Any = {"result": "r-reconciled"} if done else "retry"
            self.reconciled[thread] = answer
            await self.app.decide(thread, {iid: answer}, actor="driver")
