"""Several OS processes writing one SQLite file at once."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
from _processes import released

import interlock.stores
from interlock.stores import SqliteStore

WORKERS = 4
OWN_APPENDS = 50
SHARED_APPENDS = 25

# Each worker appends to its own thread and, interleaved, to the shared thread. A shared append
# resolves the interrupt raised by the previous head and raises a new one; a worker that loses
# the race re-reads the head and tries again. It reports what it committed as one JSON line.
WORKER = """
import json, sys
import anyio
from interlock._errors import ThreadBusy
from interlock.stores import (
    CheckpointRecord, InterruptRecord, PendingFilter, Resolution, SqliteStore,
)

path, me = sys.argv[1], sys.argv[2]
own_count, shared_count = int(sys.argv[3]), int(sys.argv[4])


def record(thread, id, seq, parent):
    return CheckpointRecord(
        thread=thread, id=id, parent_id=parent, seq=seq, step=seq, base_seq=seq,
        created_at=float(seq), source="loop", status="interrupted", body=b"x" * 500,
    )


async def main():
    store = SqliteStore(path)
    own, shared, lost = [], [], 0
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(max(own_count, shared_count)):
        if n < own_count:
            parent = own[-1] if own else None
            mine = record(f"own-{me}", f"{me}.own.{n}", n + 1, parent)
            await store.append_checkpoint(mine, expected_head=parent)
            own.append(mine.id)
        if n >= shared_count:
            continue
        while True:
            head = await store.get_thread("shared")
            waiting = await store.pending(PendingFilter(thread="shared"))
            seq, parent = (0, None) if head is None else (head.head_seq, head.head_id)
            mine = record("shared", f"{me}.shared.{n}", seq + 1, parent)
            raised = InterruptRecord(
                id=f"{mine.id}.ask", thread="shared", checkpoint_id=mine.id, key=me,
                address="node:ask", kind="dynamic", status="pending", created_at=float(seq),
                deadline=None, body=b"?",
            )
            answers = [Resolution(id=i.id, status="resolved", resolved_at=1.0, resolution=b"y")
                       for i in waiting]
            try:
                await store.append_checkpoint(
                    mine, expected_head=parent, new_interrupts=[raised], resolutions=answers
                )
            except ThreadBusy:
                lost += 1
                continue
            shared.append([mine.id, mine.seq])
            break
    await store.close()
    print(json.dumps({"own": own, "shared": shared, "lost": lost}), flush=True)


anyio.run(main)
"""


def test_processes_share_one_file_without_lock_errors(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"  # created by the workers, racing
    src = Path(interlock.stores.__file__).parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    args = [str(path), "", str(OWN_APPENDS), str(SHARED_APPENDS)]
    workers = [
        subprocess.Popen(
            [
                # Warnings are errors (an unclosed connection shows on stderr). Not -X dev: its
                # slow-callback log would make the test flaky on a loaded machine.
                sys.executable,
                "-W",
                "error",
                "-c",
                WORKER,
                *args[:1],
                f"w{n}",
                *args[2:],
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for n in range(WORKERS)
    ]
    # A barrier: every worker has imported everything before any starts writing.
    reports = [json.loads(out) for out in released(workers)]

    anyio.run(check_file, path, reports)


async def check_file(path: Path, reports: list[dict[str, list[object]]]) -> None:
    async with SqliteStore(path) as store:
        for n, report in enumerate(reports):
            chain = await store.checkpoint_range(f"own-w{n}", lo=1, hi=10**6)
            assert [c.id for c in chain] == report["own"]
            assert [c.seq for c in chain] == list(range(1, OWN_APPENDS + 1))

        shared = await store.checkpoint_range("shared", lo=1, hi=10**6)
        total = WORKERS * SHARED_APPENDS
        assert [c.seq for c in shared] == list(range(1, total + 1))
        assert all(c.parent_id == p.id for p, c in itertools.pairwise(shared))
        committed = sorted(tuple(win) for r in reports for win in r["shared"])  # type: ignore[arg-type]
        assert committed == sorted((c.id, c.seq) for c in shared)

        # Every append answered the previous head's interrupt: only the last one waits.
        assert [i.id for i in await store.pending()] == [f"{shared[-1].id}.ask"]
        for c in shared[:-1]:
            answered = await store.get_interrupt(f"{c.id}.ask")
            assert answered is not None
            assert (answered.status, answered.resolution) == ("resolved", b"y")

        # The change feed lists every shared append's changes once, in commit order (the
        # workers' own appends make none).
        expected = [("interrupt_created", "shared", shared[0].id, f"{shared[0].id}.ask")]
        for previous, c in itertools.pairwise(shared):
            expected += [
                ("interrupt_resolved", "shared", c.id, f"{previous.id}.ask"),
                ("interrupt_created", "shared", c.id, f"{c.id}.ask"),
            ]
        feed = await store.changes(limit=10**6)
        assert [(c.kind, c.thread, c.checkpoint_id, c.interrupt_id) for c in feed] == expected
