"""A2's file size at several conversation lengths: where a one-length figure sits on the curve.

    python bench/a2_lengths.py                              # 50, 100, 200, 300, 400, 600, 800 turns
    python bench/a2_lengths.py --turns 200,800
    python bench/a2_lengths.py --src /path/to/other/checkout/src   # another tree, same driver

`bench/compare.py` measures A2 (the agent chat with a tool call per turn) at 200 turns only.
How many bytes a thread keeps per raw message byte depends on where its last snapshot falls,
so one length can flatter or penalise a snapshot policy. This runs interlock's side of A2,
exactly as `compare.py` does, at each length given (interlock only: LangGraph stores the whole
state per checkpoint, which grows with the square of the length) and prints the
db+wal bytes ÷ raw message bytes ratio for each. ``--src`` measures the source tree of another
checkout with the same driver (for instance ``git worktree add /tmp/before <commit>``, then
``--src /tmp/before/src``), so that two snapshot policies are compared on the same turns.

One JSON line: the tree measured and ``{turns: ratio}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", default="50,100,200,300,400,600,800")
    parser.add_argument("--src", type=Path, help="measure this interlock source tree instead")
    args = parser.parse_args()
    lengths = [int(t) for t in args.turns.split(",")]
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
    sys.path.insert(0, str(HERE))

    import _interlock_side as side  # the driver compare.py runs
    from _common import SIZES

    import interlock

    ratios: dict[int, float] = {}
    for turns in lengths:
        params = {**SIZES["full"]["A2"], "turns": turns}
        with tempfile.TemporaryDirectory(prefix="interlock-a2-") as work:
            metrics, _ = asyncio.run(side.a2(params, Path(work)))
        if metrics["a2_errors"]:
            raise SystemExit(f"A2 at {turns} turns gave {metrics['a2_errors']:g} wrong answers")
        ratios[turns] = round(metrics["a2_db_ratio"], 3)
        print(f"{turns:5d} turns: {ratios[turns]:.2f}× the raw message bytes", file=sys.stderr)
    tree = str(Path(interlock.__file__).resolve().parent.parent)
    print(json.dumps({"scenario": "A2 by length", "tree": tree, "db_ratio": ratios}))


if __name__ == "__main__":
    main()
