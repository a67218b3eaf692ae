"""Two OS processes decide one question at once: one decision is recorded, the other is told it.

Both workers answer every waiting question of one SQLite file, one approving and one rejecting;
the loser is told who decided what (`InterruptAlreadyResolved` carrying the winner's
`Decision`). tests/runtime/test_decide_races.py runs the same race between two Apps in one
process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, TypedDict

import anyio

from interlock import START, Graph, SqliteStore, append, approve

ROUNDS = 30


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    ok: bool


def graph() -> Graph[S]:
    g = Graph(S)
    g.add_node("approve", lambda s: {"ok": approve("refund ¥5000?")})
    g.add_edge(START, "approve")
    return g


WORKER = textwrap.dedent(
    """
    import json, sys
    from typing import Annotated, TypedDict
    import anyio
    from interlock import START, Graph, InterruptAlreadyResolved, SqliteStore, append, approve

    class S(TypedDict, total=False):
        log: Annotated[list[str], append]
        ok: bool

    async def main(path, who):
        async with SqliteStore(path) as store:
            g = Graph(S)
            g.add_node("approve", lambda s: {"ok": approve("refund ¥5000?")})
            g.add_edge(START, "approve")
            app = g.compile(store=store)
            print("ready", flush=True)
            for line in sys.stdin:
                thread, iid, answer = line.split()
                try:
                    (d,) = await app.decide(thread, {iid: answer == "yes"}, actor=who, nonce=who)
                    out = ["won", d.actor, d.answer]
                except InterruptAlreadyResolved as exc:
                    d = exc.resolved_value
                    out = ["told", d.actor, d.answer]
                except Exception as exc:
                    out = [type(exc).__name__, None, None]
                print(json.dumps(out), flush=True)

    anyio.run(main, *sys.argv[1:])
    """
)


def test_two_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")

    async def setup() -> list[tuple[str, str]]:
        async with SqliteStore(db) as store:
            app = graph().compile(store=store)
            return [
                (f"r{n}", (await app.run({}, thread=f"r{n}")).interrupt().id) for n in range(ROUNDS)
            ]

    waiting = anyio.run(setup)
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), db, who],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("p0", "p1")
    ]
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline() == "ready\n"
        for thread, iid in waiting:
            for w, answer in zip(workers, ("yes", "no"), strict=True):
                assert w.stdin is not None
                w.stdin.write(f"{thread} {iid} {answer}\n")
            for w in workers:
                assert w.stdin is not None
                w.stdin.flush()
            results = [json.loads(w.stdout.readline()) for w in workers if w.stdout]
            won = [r for r in results if r[0] == "won"]
            told = [r for r in results if r[0] == "told"]
            assert len(won) == 1 and len(told) == 1, (thread, results)
            assert told[0][1:] == won[0][1:]  # the loser is told who decided what
    finally:
        for w in workers:
            _, err = w.communicate(timeout=60)
            assert w.returncode == 0, err
