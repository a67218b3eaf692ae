"""Workers killed with SIGKILL at random points: no decision lost, no dangerous effect twice.

Each thread runs ``plan`` → ``approve`` (a person's approval) → ``pay`` (a ``dangerous=True``
node) → ``notify`` (a node making one dangerous ``effect()`` call). ``pay`` and the ``notify``
call act on the outside world: they append a line to a ledger file (``O_APPEND``, fsync'd), then
linger a moment before returning, so a kill can land after the world changed and before the
store heard of it.

Workers are forked from a *zygote*: this file run as a script, with interlock imported once, so
that a new worker costs a fork rather than an interpreter start. A worker opens the store and
loops over the live threads doing what each needs next: start it, approve its approval, answer
its ``reconcile`` question the way a person would (by looking at the ledger: "retry" only when
the line is not there), or continue it. A thread held by a killed worker is free again once its
lease expires (``ThreadBusy`` meanwhile: try later). Every decision is written to an
acknowledgement file (fsync'd) after ``decide`` returned.

The test keeps two to four workers alive and SIGKILLs each at a random moment after it is ready,
until it has killed ``INTERLOCK_CRASH_KILLS`` workers (default 250) per backend. New threads are
added as old ones finish, so that the kills keep landing in live work. A last worker, never
killed, then drives every thread to its end. After it:

* no acknowledged decision is lost (it is recorded, resolved, with the same answer and nonce);
* no dangerous effect happened twice (each ledger line at most once), and every thread paid and
  notified exactly once;
* every checkpoint of every thread reads back (``get_state`` and the whole ``history``);
* a "retry" answer allowed one more call, not one per re-run of the task (the audit log never
  shows more retried calls on a thread than "retry" answers);
* every thread is done, with the state of a run that never crashed, and nothing is pending;
* the audit log's hash chains verify.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
import zlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, TypedDict

import anyio
import pytest

from interlock import (
    END,
    RETRY,
    START,
    App,
    CheckpointNotFound,
    Graph,
    Interrupt,
    InterruptAlreadyResolved,
    InvalidResume,
    NodeError,
    SqliteStore,
    Store,
    ThreadBusy,
    ThreadInterrupted,
    UnknownInterrupt,
    append,
    approve,
    effect,
    verify_audit,
)
from interlock.runtime._resume import recorded_decision

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("INTERLOCK_CRASH_KILLS", "250"))
"""Workers to SIGKILL per backend."""
LIVE_THREADS = 40
"""Threads not yet finished that the workers share; new ones are added as these finish."""
LEASE_TTL = 1.0
"""Seconds a killed worker's threads stay busy."""
KILL_AFTER = (0.02, 0.3)
"""A worker is killed this many seconds (uniform) after it said it was ready."""
LANES = 2
"""Threads a worker works on at once."""
RECOVERY_DEADLINE = 90.0
"""Seconds the last worker may take to finish every thread."""
FINAL_LOG = ["planned", "approved", "paid", "notified"]
RESULTS: dict[str, Any] = {"pay": {"log": ["paid"]}, "notify": "notified"}
"""What each dangerous call returns: a person who sees it happened answers with this."""
BUSY = (ThreadBusy, ThreadInterrupted, InterruptAlreadyResolved, UnknownInterrupt)
"""Errors that only mean another worker got there first (or still holds the thread)."""


class S(TypedDict, total=False):
    name: str
    log: Annotated[list[str], append]
    ok: bool


# -- the outside world: append-only files, each line fsync'd --------------------------------------


def record(path: Path, text: str) -> None:
    """Append one line, with its checksum, and make it durable before returning.

    A SIGKILL can cut a write short where it crosses a page of the file, so each line starts
    on a fresh line and carries a checksum: `read_lines` drops a torn one (the write never
    completed, so it did not happen).
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"\n{text}\t{zlib.crc32(text.encode()):08x}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[str]:
    try:
        lines = path.read_bytes().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    whole = []
    for line in lines:
        text, tab, crc = line.rpartition("\t")
        if tab and crc == f"{zlib.crc32(text.encode()):08x}":
            whole.append(text)
    return whole


async def linger(most: float) -> None:
    await anyio.sleep(random.uniform(0, most))


def build(store: Store, folder: Path) -> App[S]:
    ledger = folder / "ledger"

    async def plan(s: S) -> dict[str, Any]:
        await linger(0.02)
        return {"log": ["planned"]}

    def ask(s: S) -> dict[str, Any]:
        ok = approve(f"pay for {s['name']}?")
        return {"ok": ok, "log": ["approved" if ok else "rejected"]}

    async def pay(s: S) -> dict[str, Any]:
        await linger(0.01)
        record(ledger, s["name"])
        await linger(0.02)  # it happened, and nobody has recorded it yet
        return dict(RESULTS["pay"])

    async def send(name: str) -> str:
        await linger(0.01)
        record(ledger, f"{name}:notify")
        await linger(0.02)
        return str(RESULTS["notify"])

    async def notify(s: S) -> dict[str, Any]:
        await linger(0.01)
        receipt: str = await effect("notify", send, s["name"])
        await linger(0.01)
        return {"log": [receipt]}

    g = Graph(S)
    g.add_node("plan", plan)
    g.add_node("approve", ask)
    g.add_node("pay", pay, dangerous=True)
    g.add_node("notify", notify)
    g.add_edge(START, "plan")
    g.add_edge("plan", "approve")
    g.add_conditional_edges("approve", lambda s: "pay" if s["ok"] else END)
    g.add_edge("pay", "notify")
    g.add_edge("notify", END)
    return g.compile(store=store, lease_ttl=LEASE_TTL)


def thread_name(n: int) -> str:
    return f"t{n:05d}"


@contextlib.asynccontextmanager
async def open_store(kind: str, where: str) -> AsyncIterator[Store]:
    if kind == "sqlite":
        async with SqliteStore(where) as store:
            yield store
    else:
        from interlock.stores import PostgresStore

        async with PostgresStore(where, min_size=1, max_size=LANES + 1) as store:
            yield store


# -- a worker (runs in a process forked from the zygote) ------------------------------------------


@dataclass
class Worker:
    app: App[S]
    folder: Path
    names: list[str]
    done: set[str] = field(default_factory=set)
    broken: set[str] = field(default_factory=set)
    later: dict[str, float] = field(default_factory=dict)
    """Threads found busy, and when to look at them again."""

    def say(self, what: str) -> None:
        os.write(1, f"{what} {os.getpid()}\n".encode())

    async def lane(self, deadline: float | None) -> None:
        while True:
            todo = [t for t in self.names if t not in self.done and t not in self.broken]
            if not todo:
                return
            if deadline is not None and time.monotonic() > deadline:
                self.fail(",".join(todo), "recovery ran out of time", "")
                return
            random.shuffle(todo)
            moved = False
            for thread in todo:
                if thread in self.done or thread in self.broken:
                    continue
                if self.later.get(thread, 0) > time.monotonic():
                    continue
                if await self.advance(thread):
                    moved = True
                else:
                    self.later[thread] = time.monotonic() + LEASE_TTL / 4
            if not moved:
                await anyio.sleep(0.02)

    async def advance(self, thread: str) -> bool:
        """Do what the thread needs next; False when there was nothing to do (yet)."""
        try:
            try:
                snap = await self.app.get_state(thread)
            except CheckpointNotFound:
                return await self.create(thread)
            if snap.status == "done":
                self.done.add(thread)
                return False
            for question in snap.interrupts:
                await self.answer(thread, question)
            try:
                result = await self.app.resume(thread)
            except InvalidResume:
                return False  # a new question came up since the read: answer it next time
            if result.status == "done":
                self.done.add(thread)
            return True
        except BUSY:
            return False
        except NodeError as exc:
            if isinstance(exc.__cause__, ThreadBusy):
                return False  # fenced out inside a node: the thread is someone else's now
            self.broken.add(thread)
            self.fail(thread, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            return False
        except Exception as exc:
            self.broken.add(thread)
            self.fail(thread, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            return False

    async def create(self, thread: str) -> bool:
        """Start a new thread; a file lock keeps two workers from starting the same one."""
        lock = os.open(self.folder / "locks" / thread, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            try:
                await self.app.get_state(thread)
                return False  # someone started it meanwhile: continue it next time round
            except CheckpointNotFound:
                pass
            await self.app.run({"name": thread}, thread=thread)
            return True
        finally:
            os.close(lock)

    async def answer(self, thread: str, question: Interrupt) -> None:
        """Answer as a person would; acknowledge once ``decide`` returned."""
        value: Any
        if question.kind == "reconcile":
            # Look at the outside world: retry only what demonstrably did not happen.
            effect_name = question.info["effect"]
            line = thread if effect_name == "pay" else f"{thread}:notify"
            happened = line in read_lines(self.folder / "ledger")
            value = {"result": RESULTS[effect_name]} if happened else RETRY
            how = "result" if happened else "retry"
        else:
            value, how = True, "approve"
        decisions = await self.app.decide(
            thread, {question.id: value}, actor="crash-harness", nonce=f"{question.id}:{how}"
        )
        for d in decisions:
            record(self.folder / "acks", json.dumps([d.thread, d.interrupt_id, d.answer, d.nonce]))

    def fail(self, thread: str, what: str, trace: str) -> None:
        record(self.folder / "errors", json.dumps([thread, os.getpid(), what, trace]))


async def work(kind: str, where: str, folder: Path, lo: int, hi: int, recover: bool) -> None:
    async with open_store(kind, where) as store:
        await store.get_thread(thread_name(lo))  # connected
        worker = Worker(build(store, folder), folder, [thread_name(n) for n in range(lo, hi)])
        worker.say("ready")
        deadline = time.monotonic() + RECOVERY_DEADLINE if recover else None
        async with anyio.create_task_group() as tg:
            for _ in range(LANES):
                tg.start_soon(worker.lane, deadline)
    worker.say("finished")


def zygote(kind: str, where: str, folder: str) -> None:
    """Fork a worker per ``spawn`` line; reap one per ``reap`` line (the test kills them)."""
    if kind == "postgres":
        importlib.import_module("interlock.stores._postgres")  # imported on first use otherwise
    anyio.run(anyio.sleep, 0)  # the event loop's own imports, once
    assert threading.active_count() == 1, "fork needs a single-threaded parent"
    gc.freeze()  # keep the collector from touching (and so copying) the zygote's pages

    def say(line: str) -> None:
        os.write(1, f"{line}\n".encode())

    while line := sys.stdin.readline():
        command, *args = line.split()
        if command == "spawn":
            lo, hi, recover = (int(a) for a in args)
            pid = os.fork()
            if pid == 0:  # the worker
                code = 0
                try:
                    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                    random.seed()
                    anyio.run(work, kind, where, Path(folder), lo, hi, bool(recover))
                except BaseException:
                    traceback.print_exc()
                    code = 3
                finally:
                    os._exit(code)
            say(f"spawned {pid}")
        elif command == "reap":
            pid = int(args[0])
            _, status = os.waitpid(pid, 0)
            say(f"reaped {pid} {os.waitstatus_to_exitcode(status)}")


# -- the test's side: spawn, kill, recover, check -------------------------------------------------


class Zygote:
    """The zygote process and the messages coming from it and from its workers."""

    def __init__(self, kind: str, where: str, folder: Path) -> None:
        self.stderr: IO[str] = open(folder / "zygote.err", "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, __file__, kind, where, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.messages: queue.Queue[tuple[str, int, int]] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ready: dict[int, float] = {}
        self.finished: set[int] = set()
        self.reaped: dict[int, int] = {}
        self.spawned: list[int] = []

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            what, pid, *rest = line.split()
            self.messages.put((what, int(pid), int(rest[0]) if rest else 0))
        self.messages.put(("eof", 0, 0))

    def pump(self, timeout: float) -> None:
        """Take in at most one message."""
        try:
            what, pid, code = self.messages.get(timeout=max(timeout, 0))
        except queue.Empty:
            return
        if what == "eof":
            raise AssertionError(f"the zygote stopped: {self.errors()}")
        if what == "ready":
            self.ready[pid] = time.monotonic()
        elif what == "finished":
            self.finished.add(pid)
        elif what == "spawned":
            self.spawned.append(pid)
        elif what == "reaped":
            self.reaped[pid] = code

    def _command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _until(self, done: Any, what: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while not done():
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}: {self.errors()}")
            self.pump(0.05)

    def spawn(self, lo: int, hi: int, *, recover: bool = False) -> int:
        before = len(self.spawned)
        self._command(f"spawn {lo} {hi} {int(recover)}")
        self._until(lambda: len(self.spawned) > before, "a spawned worker")
        return self.spawned[-1]

    def reap(self, pid: int) -> int:
        self._command(f"reap {pid}")
        self._until(lambda: pid in self.reaped, f"worker {pid} to be reaped")
        return self.reaped[pid]

    def wait_finished(self, pid: int, timeout: float) -> None:
        self._until(lambda: pid in self.finished, f"worker {pid} to finish", timeout)

    def errors(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()[-4000:]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self.stderr.close()


@dataclass
class Tally:
    kills: int = 0
    workers: int = 0
    threads: int = 0
    checkpoints: int = 0
    decisions: int = 0
    reconciles: Counter[str] = field(default_factory=Counter)
    """Reconcile questions answered, by node and answer."""
    problems: list[str] = field(default_factory=list)


class Window:
    """The threads the workers share: the oldest unfinished up to LIVE_THREADS unfinished."""

    def __init__(self, folder: Path) -> None:
        self.ledger = folder / "ledger"
        self.lo = 0
        self.hi = LIVE_THREADS

    def slide(self) -> tuple[int, int]:
        notified = {line.split(":")[0] for line in read_lines(self.ledger) if ":" in line}
        while self.lo < self.hi and thread_name(self.lo) in notified:
            self.lo += 1
        live = sum(thread_name(n) not in notified for n in range(self.lo, self.hi))
        self.hi += max(0, LIVE_THREADS - live)
        return self.lo, self.hi


def crash_and_recover(kind: str, where: str, folder: Path, tally: Tally) -> int:
    """Kill workers until KILLS of them died; then finish everything. Return the thread count."""
    (folder / "locks").mkdir()
    zygote = Zygote(kind, where, folder)
    window = Window(folder)
    alive: dict[int, float | None] = {}  # pid -> when to kill it (None: not ready yet)
    born: dict[int, float] = {}

    def kill(pid: int) -> None:
        os.kill(pid, signal.SIGKILL)  # unreaped until we say so: the pid is still our worker
        code = zygote.reap(pid)
        del alive[pid]
        if code == -signal.SIGKILL:
            tally.kills += 1
        elif code != 0 or pid not in zygote.finished:
            tally.problems.append(f"worker {pid} exited with {code}: {zygote.errors()}")

    try:
        want = 3
        while tally.kills < KILLS:
            if random.random() < 0.1:
                want = random.randint(2, 4)
            while len(alive) < want:
                pid = zygote.spawn(*window.slide())
                alive[pid], born[pid] = None, time.monotonic()
                tally.workers += 1
            now = time.monotonic()
            for pid, at in list(alive.items()):
                if at is None and pid in zygote.ready:
                    alive[pid] = at = zygote.ready[pid] + random.uniform(*KILL_AFTER)
                if at is None and now - born[pid] > 30:
                    raise AssertionError(f"worker {pid} never got ready: {zygote.errors()}")
                if (at is not None and at <= now) or pid in zygote.finished:
                    kill(pid)
            deadlines = [at for at in alive.values() if at is not None]
            zygote.pump(min(deadlines, default=now + 0.05) - now)
        for pid in list(alive):
            kill(pid)
        # The last worker is never killed: it drives every thread to its end.
        _, hi = window.slide()
        last = zygote.spawn(0, hi, recover=True)
        tally.workers += 1
        zygote.wait_finished(last, RECOVERY_DEADLINE + 30)
        code = zygote.reap(last)
        if code != 0:
            tally.problems.append(f"the recovery worker exited with {code}: {zygote.errors()}")
        return hi
    finally:
        for pid in list(alive):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        zygote.close()


async def check(store: Store, folder: Path, threads: int, tally: Tally) -> None:
    app = build(store, folder)
    problems = tally.problems
    errors: dict[tuple[str, str], list[str]] = {}
    for entry in read_lines(folder / "errors"):
        thread, _, what, trace = json.loads(entry)
        errors.setdefault((thread, what), []).append(trace)
    for (thread, what), traces in errors.items():
        where = "\n".join(traces[0].splitlines()[-6:])
        problems.append(f"{thread}: a worker failed ({len(traces)}x): {what}\n{where}")
    # Dangerous effects: each at most once; every thread paid and notified exactly once.
    ledger = Counter(read_lines(folder / "ledger"))
    names = [thread_name(n) for n in range(threads)]
    for line, n in sorted(ledger.items()):
        if n > 1:
            problems.append(f"ledger line {line!r} appears {n} times: a duplicated effect")
    stray = set(ledger) - set(names) - {f"{t}:notify" for t in names}
    if stray:
        problems.append(f"ledger lines of unknown threads: {sorted(stray)}")
    for thread in names:
        if ledger[thread] != 1 or ledger[f"{thread}:notify"] != 1:
            problems.append(
                f"{thread}: paid {ledger[thread]}x, notified {ledger[f'{thread}:notify']}x"
            )
    # Checkpoints: every one reads back; every thread is done with the state of a clean run.
    for thread in names:
        try:
            snap = await app.get_state(thread)
            if snap.status != "done" or snap.interrupts:
                problems.append(f"{thread}: {snap.status}, pending {snap.interrupts}")
            if snap.values.get("log") != FINAL_LOG or snap.values.get("ok") is not True:
                problems.append(f"{thread}: final state {snap.values}")
            before = None
            while page := await app.history(thread, limit=7, before=before):
                tally.checkpoints += len(page)
                before = page[-1].checkpoint_id
        except Exception as exc:
            problems.append(f"{thread}: unreadable: {type(exc).__name__}: {exc}")
    if pending := await app.inbox():
        problems.append(f"interrupts still pending: {pending}")
    # Decisions: every acknowledged one is recorded as it was acknowledged.
    for entry in read_lines(folder / "acks"):
        thread, iid, answer, nonce = json.loads(entry)
        tally.decisions += 1
        stored = await store.get_interrupt(iid)
        decision = None if stored is None else recorded_decision(app.plan.codec, stored)
        if stored is None or stored.status != "resolved" or decision is None:
            problems.append(f"{thread}: acknowledged decision on {iid} is lost: {stored}")
        elif (decision.thread, decision.answer, decision.nonce) != (thread, answer, nonce):
            problems.append(f"{thread}: decision on {iid} recorded as {decision}, not {answer}")
    # The audit log: how the reconcile questions were answered; and a "retry" answer allows
    # one more call, not one per re-run of the task.
    reconciles: dict[str, str] = {}  # interrupt id -> the node that asked
    retried: Counter[str] = Counter()
    allowed: Counter[str] = Counter()
    after: tuple[str, int] | None = None
    while rows := await store.audit_log(after=after, limit=1000):
        for row in rows:
            data = json.loads(row.data)
            if row.kind == "interrupt" and data["kind"] == "reconcile":
                reconciles[data["interrupt"]] = data["address"].rsplit(":", 1)[-1]
            elif row.kind == "effect_retried":
                retried[row.thread] += 1
            elif row.kind == "decision" and data["interrupt"] in reconciles:
                how = "retry" if data.get("answer") == RETRY else "result"
                tally.reconciles[f"{reconciles[data['interrupt']]} {how}"] += 1
                allowed[row.thread] += how == "retry"
        after = (rows[-1].thread, rows[-1].seq)
    for thread in sorted(retried):
        if retried[thread] > allowed[thread]:
            problems.append(
                f"{thread}: {retried[thread]} retried calls on {allowed[thread]} retry answers"
            )
    report = await verify_audit(store)
    if not report.ok:
        problems.append(f"audit chain broken: {report.problems}")


def soak(kind: str, where: str, folder: Path) -> None:
    started = time.monotonic()
    tally = Tally()
    tally.threads = crash_and_recover(kind, where, folder, tally)

    async def verify() -> None:
        async with open_store(kind, where) as store:
            await check(store, folder, tally.threads, tally)

    anyio.run(verify)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(tally.reconciles.items())) or "none"
    print(
        f"\n{kind}: {tally.kills} kills of {tally.workers} workers, {tally.threads} threads, "
        f"{tally.checkpoints} checkpoints, {tally.decisions} decisions acknowledged, "
        f"{tally.reconciles.total()} reconciles answered ({kinds}), "
        f"{len(tally.problems)} problems, {time.monotonic() - started:.1f}s"
    )
    assert tally.kills >= KILLS
    assert not tally.problems, "\n".join(tally.problems[:20])


def test_sqlite_workers_killed_at_random_lose_nothing(tmp_path: Path) -> None:
    soak("sqlite", str(tmp_path / "crash.db"), tmp_path)


def test_postgres_workers_killed_at_random_lose_nothing(tmp_path: Path, dsn: str) -> None:
    soak("postgres", dsn, tmp_path)


if __name__ == "__main__":
    zygote(*sys.argv[1:])
