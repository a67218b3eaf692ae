"""S5 on interlock's side only, for two or more source trees taking turns: did a change move it?

    python bench/s5_trees.py --src /tmp/before/src --src src            # 5 turns each, on disk
    python bench/s5_trees.py --src /tmp/before/src --src src --reps 3 --workdir /dev/shm/s5

`bench/compare.py` gives S5 as a ratio to LangGraph, and LangGraph's own figure moves by up to a
third between runs on a shared machine, so a ratio that fell between two runs does not say
whether interlock got slower. This runs interlock's S5 driver (the one `compare.py` runs:
build 5,000 threads waiting on an approval, then, in a fresh process, list and resume them
all) for each source tree given, the trees taking turns repetition by repetition on the same
medium, and prints each tree's figures and their medians. To measure an older commit, check
it out beside this one (``git worktree add /tmp/before <commit>``) and pass its ``src``.

``--workdir`` is where the SQLite files go (default ``bench/.work``, on disk; a folder under
``/dev/shm`` for a tmpfs). One JSON line per tree at the end.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import SIZES
from compare import HERE, SCRIPTS, side_env

# Start the side script compare.py runs (`_interlock_side.py`, one phase per fresh process) with
# ``src`` first on the path, after making sure that is where interlock comes from.
_LAUNCH = """
import runpy, sys
src, script, spec = sys.argv[1:]
sys.path.insert(0, src)
import interlock
if not interlock.__file__.startswith(src):
    raise SystemExit(f"imported interlock from {interlock.__file__}, not {src}")
sys.argv = [script, spec]
runpy.run_path(script, run_name="__main__")
"""


def _phase(src: Path, phase: str, work: str) -> dict[str, float]:
    spec = {"scenario": "S5", "phase": phase, "params": dict(SIZES["full"]["S5"]), "workdir": work}
    argv = [sys.executable, "-c", _LAUNCH, str(src), str(SCRIPTS["interlock"]), json.dumps(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, env=side_env(), cwd=HERE)
    if done.returncode != 0:
        raise SystemExit(f"S5 {phase} failed for {src}:\n{done.stderr[-3000:]}")
    metrics: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])["metrics"]
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        required=True,
        help="an interlock source tree (repeat for each tree)",
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=HERE / ".work")
    args = parser.parse_args()
    trees = [src.resolve() for src in args.src]
    args.workdir.mkdir(parents=True, exist_ok=True)
    runs: dict[Path, list[dict[str, float]]] = {src: [] for src in trees}
    for rep in range(args.reps):
        for src in trees:
            work = tempfile.mkdtemp(prefix="s5-", dir=args.workdir)
            try:
                figures = {**_phase(src, "build", work), **_phase(src, "serve", work)}
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if figures["s5_errors"]:
                raise SystemExit(f"S5 listed or executed the wrong threads for {src}")
            runs[src].append(figures)
            print(
                f"rep {rep + 1} {src}: build {figures['s5_build_s']:.2f} s, resume all "
                f"{figures['s5_resume_all_s']:.2f} s, list {figures['s5_list_s']:.3f} s, "
                f"peak RSS {figures['s5_peak_rss_mib']:.1f} MiB",
                file=sys.stderr,
                flush=True,
            )
    keys = ("s5_build_s", "s5_resume_all_s", "s5_list_s", "s5_peak_rss_mib")
    for src, figures in runs.items():
        medians = {k: round(statistics.median(f[k] for f in figures), 3) for k in keys}
        print(json.dumps({"scenario": "S5, interlock", "tree": str(src), "medians": medians}))


if __name__ == "__main__":
    main()
