"""A2's file size at several conversation lengths: where a one-length figure sits on the curve.

    python bench/a2_lengths.py                              # 50, 100, 200, 300, 400, 600, 800 turns
    python bench/a2_lengths.py --turns 200,800
    python bench/a2_lengths.py --src /path/to/other/checkout/src   # another tree, same driver
    python bench/a2_lengths.py --turns 200 --breakdown      # where the file's bytes go

`bench/compare.py` measures A2 (the agent chat with a tool call per turn) at 200 turns only.
How many bytes a thread keeps per raw message byte depends on where its last snapshot falls,
so one length can flatter or penalise a snapshot policy. This runs interlock's side of A2,
exactly as `compare.py` does, at each length given (interlock only: LangGraph stores the whole
state per checkpoint, which grows with the square of the length) and prints the
db+wal bytes ÷ raw message bytes ratio for each. ``--src`` measures the source tree of another
checkout with the same driver (for instance ``git worktree add /tmp/before <commit>``, then
``--src /tmp/before/src``), so that two snapshot policies are compared on the same turns.

``--breakdown`` adds, per length, where the file's bytes go (``breakdown`` in the JSON line,
a table on stderr): the bytes of an empty store, each table's and index's pages with their
unused bytes (SQLite's ``dbstat``), free pages, and the checkpoint bodies split into snapshots
and deltas.

One JSON line: the tree measured, ``{turns: ratio}`` and, with ``--breakdown``, the parts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", default="50,100,200,300,400,600,800")
    parser.add_argument("--src", type=Path, help="measure this interlock source tree instead")
    parser.add_argument("--breakdown", action="store_true", help="say where the bytes go")
    args = parser.parse_args()
    lengths = [int(t) for t in args.turns.split(",")]
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
    sys.path.insert(0, str(HERE))

    import _interlock_side as side  # the driver compare.py runs
    from _common import SIZES

    import interlock

    ratios: dict[int, float] = {}
    parts: dict[int, dict[str, Any]] = {}
    empty = asyncio.run(empty_store_bytes()) if args.breakdown else 0
    for turns in lengths:
        params = {**SIZES["full"]["A2"], "turns": turns}
        with tempfile.TemporaryDirectory(prefix="interlock-a2-") as work:
            metrics, info = asyncio.run(side.a2(params, Path(work)))
            if args.breakdown:
                parts[turns] = breakdown(Path(work) / "a2-interlock.db", info, empty)
        if metrics["a2_errors"]:
            raise SystemExit(f"A2 at {turns} turns gave {metrics['a2_errors']:g} wrong answers")
        ratios[turns] = round(metrics["a2_db_ratio"], 3)
        print(f"{turns:5d} turns: {ratios[turns]:.2f}× the raw message bytes", file=sys.stderr)
        if turns in parts:
            raw = parts[turns]["raw_message_bytes"]
            for name, value in parts[turns].items():
                if isinstance(value, int):
                    print(f"      {name:<52} {value:>10,d}  {value / raw:5.2f}×", file=sys.stderr)
    tree = str(Path(interlock.__file__).resolve().parent.parent)
    line: dict[str, Any] = {"scenario": "A2 by length", "tree": tree, "db_ratio": ratios}
    if parts:
        line["breakdown"] = parts
    print(json.dumps(line))


async def empty_store_bytes() -> int:
    """The size of a store's file with nothing in it: its schema."""
    from _common import db_bytes

    from interlock import SqliteStore

    with tempfile.TemporaryDirectory(prefix="interlock-a2-") as work:
        path = Path(work) / "empty.db"
        store = SqliteStore(path)
        await store.threads()  # opens the file and creates the schema
        await store.close()
        return db_bytes(path)


def breakdown(path: Path, info: dict[str, Any], empty: int) -> dict[str, Any]:
    """Where a closed A2 file's bytes go (read-only; the file is not changed)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[str, Any] = {
            "raw_message_bytes": info["raw_message_bytes"],
            "db_bytes": info["db_bytes"],
            "empty store": empty,
        }
        snap = con.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM checkpoints WHERE base_seq = seq"
        ).fetchone()
        delta = con.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM checkpoints WHERE base_seq != seq"
        ).fetchone()
        out[f"bodies: {delta[0]} deltas"] = delta[1]
        out[f"bodies: {snap[0]} snapshots"] = snap[1]
        out["free pages"] = (
            con.execute("PRAGMA freelist_count").fetchone()[0]
            * con.execute("PRAGMA page_size").fetchone()[0]
        )
        try:
            rows = con.execute(
                "SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name "
                "HAVING sum(payload) > 0 ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # an SQLite built without dbstat
            rows = []
        for name, pages, unused in rows:
            out[f"pages: {name}"] = pages
            out[f"  of which unused: {name}"] = unused
        return out
    finally:
        con.close()


if __name__ == "__main__":
    main()
