"""A process whose PostgreSQL appends share transactions (grouped appends) SIGKILLed at random.

The writer (this file run as a script) opens a `PostgresStore` on the test server and runs
``TASKS`` tasks at once, each growing a thread of its own: every append adds checkpoint n,
raises interrupt n and resolves interrupt n-1, all in one write. After an append returned, the
writer records it in an acknowledgement file. Some appends are meant to fail (a stale head, an
unknown interrupt), so that groups hold failing writes too. The test kills the writer at a
random moment (the server rolls back whatever transaction it left open), reads the database
and checks, then starts a new writer that goes on from the
threads' heads, ``INTERLOCK_PG_GROUP_CRASH_KILLS`` times (default 12):

* every acknowledged append is there, and at most one more per thread (the one in flight)
  than acknowledged or found by the check before;
* no thread is half-written: its checkpoints read back as one chain 1..n with each id once,
  the head is the last, interrupts 1..n-1 are resolved and n pending, and nothing else;
* the appends meant to fail never wrote anything, and never failed any other append;
* the writer really committed appends in groups (its largest group is reported).

A SIGKILL keeps the kernel's page cache, so the acknowledgement file needs no fsync; what this
proves is that the store never acknowledges an append before its group's transaction committed,
and that a group cut off midway leaves no append half-written.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from interlock.stores._postgres import PostgresStore

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("INTERLOCK_PG_GROUP_CRASH_KILLS", "12"))
TASKS = 32
"""Threads the writer grows at once."""
KILL_AFTER = (0.05, 0.5)
"""Seconds (uniform) after the writer acknowledged its first append that it is killed."""
HEAD_LIMIT = 10**9


def thread_of(task: int) -> str:
    return f"g{task:02d}"


def read_acks(path: Path) -> Counter[str]:
    """The highest acknowledged seq per thread (a torn last line is ignored)."""
    best: Counter[str] = Counter()
    if not path.exists():
        return best
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[0] != "ack":
            continue
        best[parts[1]] = max(best[parts[1]], int(parts[2]))
    return best


def gone(dsn: str) -> None:
    """Wait until the killed writer's sessions have ended on the server: a COMMIT it sent just
    before the kill may still be landing, and would land in the middle of the check."""
    deadline = time.monotonic() + 30
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            assert time.monotonic() < deadline, "the killed writer's sessions did not end"
            time.sleep(0.01)


def check(dsn: str, acks: Counter[str]) -> dict[str, int]:
    """Check every thread as the module says; return each thread's head seq."""

    async def read() -> dict[str, int]:
        heads: dict[str, int] = {}
        async with PostgresStore(dsn) as store:
            pending = await store.pending(limit=HEAD_LIMIT)
            for task in range(TASKS):
                thread = thread_of(task)
                chain = await store.checkpoint_range(thread, lo=1, hi=HEAD_LIMIT)
                n = len(chain)
                assert [c.seq for c in chain] == list(range(1, n + 1)), thread
                assert len({c.id for c in chain}) == n, f"{thread}: a checkpoint doubled"
                assert all(c.id == f"{thread}.{c.seq}" for c in chain), thread
                assert all(c.parent_id == f"{thread}.{c.seq - 1}" for c in chain[1:]), thread
                acked = acks[thread]
                assert acked <= n <= acked + 1, f"{thread}: acknowledged {acked}, holds {n}"
                head = await store.get_thread(thread)
                if n == 0:
                    assert head is None
                    continue
                assert head is not None and head.head_id == chain[-1].id, thread
                for seq in range(1, n + 1):
                    got = await store.get_interrupt(f"{thread}.i{seq}")
                    assert got is not None, f"{thread}: interrupt {seq} of a written append"
                    want = "pending" if seq == n else "resolved"
                    assert got.status == want, f"{thread}: interrupt {seq} is {got.status}"
                assert await store.get_interrupt(f"{thread}.i{n + 1}") is None
                heads[thread] = n
            assert sorted(i.id for i in pending) == sorted(f"{t}.i{n}" for t, n in heads.items())
        return heads

    return anyio.run(read)


def test_kills_mid_group_lose_no_acknowledged_append(tmp_path: Path, dsn: str) -> None:
    acks_file, stats = tmp_path / "acks", tmp_path / "stats"
    rng = random.Random(os.environ.get("INTERLOCK_PG_GROUP_CRASH_SEED", "33"))
    killed = 0
    heads: dict[str, int] = {}
    while killed < KILLS:
        before = acks_file.stat().st_size if acks_file.exists() else 0
        writer = subprocess.Popen(
            [sys.executable, __file__, dsn, str(acks_file), str(stats)],
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 30
            while (acks_file.stat().st_size if acks_file.exists() else 0) == before:
                assert writer.poll() is None, writer.stderr.read().decode()  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the writer acknowledged nothing in 30 s"
                time.sleep(0.005)
            time.sleep(rng.uniform(*KILL_AFTER))
            assert writer.poll() is None, writer.stderr.read().decode()  # type: ignore[union-attr]
            writer.send_signal(signal.SIGKILL)
        finally:
            writer.wait()
            assert writer.stderr is not None
            errors = writer.stderr.read().decode()
            writer.stderr.close()
        assert writer.returncode == -signal.SIGKILL, errors
        killed += 1
        gone(dsn)
        # What the last check found is known too: a writer killed after its append committed
        # but before it acknowledged it leaves one more than acknowledged, and the next
        # writer goes on from there.
        known = read_acks(acks_file)
        for thread, n in heads.items():
            known[thread] = max(known[thread], n)
        heads = check(dsn, known)
    assert sum(heads.values()) > TASKS, "the writers made too little progress to prove much"
    largest = max(int(line) for line in stats.read_text().split())
    assert largest > 1, "no two appends ever shared a transaction"


# -- the writer ------------------------------------------------------------------------------------


async def _write(dsn: str, acks: Path, stats: Path) -> None:
    from interlock import ThreadBusy, UnknownInterrupt
    from interlock.stores import _postgres_ops as ops
    from interlock.testing._conformance._common import make_checkpoint, make_interrupt, resolve

    largest = 0
    stats_fd = os.open(stats, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    real = ops.append_group

    def counted(conn: ops.Conn, writes: list[Any], *, durable: bool) -> Any:
        nonlocal largest
        if len(writes) > largest:
            largest = len(writes)
            os.write(stats_fd, f"{largest}\n".encode())
        return real(conn, writes, durable=durable)

    ops.append_group = counted
    acks_fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    rng = random.Random()

    async def grow(store: PostgresStore, task: int) -> None:
        thread = thread_of(task)
        head = await store.get_thread(thread)
        n = 0 if head is None else head.head_seq
        while True:
            parent = f"{thread}.{n}" if n else None
            record = make_checkpoint(thread, n + 1, id=f"{thread}.{n + 1}", parent_id=parent)
            new = [make_interrupt(f"{thread}.i{n + 1}", record)]
            done = [resolve(f"{thread}.i{n}")] if n else []
            expected = f"{thread}.{n}" if n else None
            if n > 1 and rng.random() < 0.1:  # meant to fail: a stale head
                try:
                    await store.append_checkpoint(
                        record, expected_head=f"{thread}.{n - 1}", new_interrupts=new,
                        resolutions=done,
                    )  # fmt: skip
                except ThreadBusy:
                    pass
                else:
                    raise AssertionError(f"{thread}: an append on a stale head went through")
            if n and rng.random() < 0.1:  # meant to fail: an unknown interrupt
                try:
                    await store.append_checkpoint(
                        record, expected_head=expected, new_interrupts=new,
                        resolutions=[resolve(f"{thread}.nope")],
                    )  # fmt: skip
                except UnknownInterrupt:
                    pass
                else:
                    raise AssertionError(f"{thread}: an unknown interrupt was resolved")
            await store.append_checkpoint(
                record, expected_head=expected, new_interrupts=new, resolutions=done
            )
            n += 1
            os.write(acks_fd, f"ack {thread} {n}\n".encode())

    async with PostgresStore(dsn) as store, anyio.create_task_group() as tg:
        for task in range(TASKS):
            tg.start_soon(grow, store, task)


if __name__ == "__main__":
    anyio.run(_write, sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
