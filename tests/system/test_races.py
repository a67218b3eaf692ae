"""Eight processes resume the same interrupt at once: one wins, the action runs once.

Workers are long-lived OS processes. For each round the test writes "go" to all eight at once;
each resumes that round's thread — half of them approving, half rejecting — and reports whether
it won or which typed error it got. The gated node records its effect in a separate SQLite
file, as an outside system would: it ran once when an approver won, never when a rejecter did.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from interlock import SqliteStore, Store

WORKERS = 8
ROUNDS = 200

GRAPH = textwrap.dedent(
    """
    import os, sqlite3
    from typing import Annotated, TypedDict
    from interlock import END, START, Graph, append, approve

    class S(TypedDict, total=False):
        log: Annotated[list[str], append]
        ok: bool

    def build(store, effects):
        def execute(s):
            with sqlite3.connect(effects, timeout=30) as db:
                db.execute("INSERT INTO effects VALUES (?, ?)", (s["log"][0], os.getpid()))
            db.close()
            return {"log": ["executed"]}

        g = Graph(S)
        g.add_node("approve", lambda s: {"ok": approve("go?")})
        g.add_node("execute", execute)
        g.add_edge(START, "approve")
        g.add_conditional_edges("approve", lambda s: "execute" if s["ok"] else END)
        return g.compile(store=store)
    """
)

WORKER = GRAPH + textwrap.dedent(
    """
    import json, sys
    import anyio
    from interlock import InterlockError

    async def main(kind, where, effects):
        if kind == "sqlite":
            from interlock import SqliteStore as Store
        else:
            from interlock.stores import PostgresStore as Store
        async with Store(where) as store:
            app = build(store, effects)
            print("ready", flush=True)
            for line in sys.stdin:
                thread, iid, answer = line.split()
                try:
                    await app.resume(thread, {iid: answer == "approve"})
                    outcome = f"won:{answer}"
                except InterlockError as exc:
                    outcome = type(exc).__name__
                print(json.dumps([thread, outcome]), flush=True)

    anyio.run(main, *sys.argv[1:])
    """
)


async def prepare(store: Store, effects: str) -> list[tuple[str, str]]:
    namespace: dict[str, Any] = {}
    exec(GRAPH, namespace)
    app = namespace["build"](store, effects)
    waiting = []
    for n in range(ROUNDS):
        thread = f"round-{n}"
        r = await app.run({"log": [thread]}, thread=thread)
        waiting.append((thread, r.interrupt().id))
    return waiting


def race(
    tmp_path: Path, kind: str, where: str, waiting: list[tuple[str, str]], effects: str
) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), kind, where, effects],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    outcomes: Counter[str] = Counter()
    winners: dict[str, str] = {}
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline() == "ready\n"
        for thread, iid in waiting:
            for n, w in enumerate(workers):  # a barrier: all get the round before any answers
                assert w.stdin is not None
                w.stdin.write(f"{thread} {iid} {'approve' if n % 2 else 'reject'}\n")
            for w in workers:
                assert w.stdin is not None
                w.stdin.flush()
            results = [json.loads(w.stdout.readline()) for w in workers if w.stdout]
            assert {t for t, _ in results} == {thread}
            won = [o for _, o in results if o.startswith("won")]
            assert len(won) == 1, f"{thread}: {results}"
            winners[thread] = won[0]
            outcomes.update(o.partition(":")[0] for _, o in results)
    finally:
        for w in workers:
            _, err = w.communicate(timeout=60)  # closes every pipe
            assert w.returncode == 0, err
    assert outcomes["won"] == ROUNDS
    assert set(outcomes) <= {"won", "ThreadBusy", "InterruptAlreadyResolved"}
    with sqlite3.connect(effects) as db:
        per_round = Counter(t for (t,) in db.execute("SELECT round FROM effects"))
    db.close()
    # Exactly one effect where an approver won, none where a rejecter did; both kinds won often.
    assert per_round == Counter({t: 1 for t, w in winners.items() if w == "won:approve"})
    assert 0 < len(per_round) < ROUNDS


def effects_file(tmp_path: Path) -> str:
    path = tmp_path / "effects.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE effects (round TEXT, pid INTEGER)")
    db.close()
    return str(path)


@pytest.mark.slow  # eight processes, many rounds: the main leg runs them
def test_sqlite_eight_processes_one_winner_per_round(tmp_path: Path) -> None:
    effects = effects_file(tmp_path)
    db = str(tmp_path / "race.db")

    async def setup() -> list[tuple[str, str]]:
        async with SqliteStore(db) as store:
            return await prepare(store, effects)

    race(tmp_path, "sqlite", db, anyio.run(setup), effects)


@pytest.mark.slow  # eight processes, many rounds: the main leg runs them
def test_postgres_eight_processes_one_winner_per_round(tmp_path: Path, dsn: str) -> None:
    from interlock.stores import PostgresStore

    effects = effects_file(tmp_path)

    async def setup() -> list[tuple[str, str]]:
        async with PostgresStore(dsn) as store:
            return await prepare(store, effects)

    race(tmp_path, "postgres", dsn, anyio.run(setup), effects)
