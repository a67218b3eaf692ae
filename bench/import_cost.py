"""What `import interlock` costs a fresh process: wall time, memory, modules, and where it goes.

    python bench/import_cost.py                       # this checkout's src/, median of 7 runs
    python bench/import_cost.py --runs 15
    python bench/import_cost.py --src /path/to/other/checkout/src   # another tree, same driver

Each run is a new interpreter that does nothing but ``import interlock``. It reports the wall
time of that import, the peak RSS of the process after it (the figure the target is set for)
and what the import added to the interpreter's own, and ``len(sys.modules)``. Interleaved with
those, three more processes:

* one that imports only interlock's dependencies (`DEPENDENCIES`: msgspec and sqlite3), the
  floor under ``import interlock``, and what interlock costs above it;
* one that imports what a run loads (`RUN_FLOOR`: msgspec, asyncio, anyio and the standard
  modules the core uses), the floor the earlier round measured against;
* one that imports interlock, compiles a one-node graph and runs it on a `MemoryStore`
  (`FIRST_RUN`): what a program pays before its first result, wherever the imports fall.

Then the same number of runs under ``python -X importtime`` give each module's median self
time, and the ten most expensive are printed with their cumulative time and the chain that
imported them; and one more process counts the classes the import creates, by kind
(`CENSUS`: dataclasses, msgspec Structs, Enums, NamedTuples, TypedDicts, Protocols...).

Bytecode is compiled once, before the first measured run, into a temporary cache
(``PYTHONPYCACHEPREFIX``), whatever ``PYTHONDONTWRITEBYTECODE`` says: an installed package has
its ``.pyc`` files, and compiling the sources on every import would measure the compiler.
Timings move with the machine's load; the module count and the list of modules do not, and
`tests/test_import_cost.py` holds the list of what must stay out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_MS = 60.0
TARGET_MB = 25.0

PROBE = """
import resource, sys, time
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
import interlock
ms = (time.perf_counter() - start) * 1000
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
modules = len(sys.modules)
import json
print(json.dumps({"ms": ms, "rss": after / 1024, "added": (after - before) / 1024,
                  "modules": modules, "file": interlock.__file__}))
"""
DEPENDENCIES = "msgspec, msgspec.json, msgspec.msgpack, sqlite3"
"""What ``import interlock`` cannot do without: the modules of its dependencies it binds."""
RUN_FLOOR = (
    "msgspec, msgspec.json, asyncio, anyio, anyio.abc, anyio.to_thread, anyio.lowlevel, sqlite3, "
    "hashlib, inspect, dataclasses, importlib.resources, json, queue, random, pathlib"
)
"""What a run cannot do without: interlock's dependencies and the standard modules its core uses."""
FIRST_RUN = """
from typing import TypedDict
class S(TypedDict):
    n: int
graph = interlock.Graph(S)
graph.add_node("one", lambda s: {"n": s["n"] + 1})
graph.add_edge(interlock.START, "one")
app = graph.compile(store=interlock.MemoryStore())
assert app.run_sync({"n": 1}, thread="t").values == {"n": 2}
"""
"""A program's first result: one node, compiled and run to its end in memory."""
# ru_maxrss is in KiB on Linux (bytes on macOS, where the MB figures read 1024 times too big).
CENSUS = """
import collections, json, sys, typing
import msgspec
import interlock
found = {
    id(v): v
    for name, module in list(sys.modules.items())
    if name.startswith("interlock")
    for v in vars(module).values()
    if isinstance(v, type) and str(getattr(v, "__module__", "")).startswith("interlock")
}
made = collections.Counter()
for cls in found.values():
    if "__dataclass_fields__" in cls.__dict__:
        kind = "dataclass"
    elif issubclass(cls, msgspec.Struct):
        kind = "msgspec Struct"
    elif "enum" in sys.modules and isinstance(cls, sys.modules["enum"].EnumMeta):
        kind = "Enum"
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
        kind = "NamedTuple"
    elif typing.is_typeddict(cls):
        kind = "TypedDict"
    elif getattr(cls, "_is_protocol", False):
        kind = "Protocol"
    elif issubclass(cls, BaseException):
        kind = "exception"
    else:
        kind = "other class"
    made[kind] += 1
print(json.dumps(made))
"""
"""Counts the classes of interlock's modules after ``import interlock``, by kind (a dataclass
compiles its methods from source at every import; a msgspec Struct is built in C)."""


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=120
    )
    if out.returncode != 0:
        raise SystemExit(f"the import failed:\n{out.stderr}")
    return out


def importtime(stderr: str) -> list[tuple[str, int, int, int]]:
    """``(module, self µs, cumulative µs, depth)`` per line of ``-X importtime`` output."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((name.strip(), int(own), int(cumulative), depth))
    return rows


def importers(rows: list[tuple[str, int, int, int]]) -> dict[str, str]:
    """Which module's import brought each module in (the next line less indented)."""
    found: dict[str, str] = {}
    for i, (name, _, _, depth) in enumerate(rows):
        for later, _, _, d in rows[i + 1 :]:
            if d < depth:
                found[name] = later
                break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--src", type=Path, default=HERE.parent / "src")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="interlock-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(args.src.resolve()), PYTHONPYCACHEPREFIX=cache)
        run(env, "-c", "import interlock")  # compile once, as an installed package is
        probes: list[dict[str, float]] = []
        floors: list[dict[str, float]] = []
        run_floors: list[dict[str, float]] = []
        first_runs: list[dict[str, float]] = []
        for _ in range(args.runs):  # interleaved, so that all see the same load
            probes.append(json.loads(run(env, "-c", PROBE).stdout))
            for imports, into in ((DEPENDENCIES, floors), (RUN_FLOOR, run_floors)):
                floor = PROBE.replace("import interlock\n", f"import {imports}\n")
                into.append(
                    json.loads(run(env, "-c", floor.replace("interlock.__file__", "''")).stdout)
                )
            first = PROBE.replace("import interlock\n", f"import interlock\n{FIRST_RUN}")
            first_runs.append(json.loads(run(env, "-c", first).stdout))
        traces = [
            importtime(run(env, "-X", "importtime", "-c", "import interlock").stderr)
            for _ in range(args.runs)
        ]
        made: dict[str, int] = json.loads(run(env, "-c", CENSUS).stdout)

    def median(key: str, of: list[dict[str, float]] = probes) -> float:
        return statistics.median(p[key] for p in of)

    print(f"import interlock from {Path(probes[0]['file']).parent.parent}")
    print(f"  median of {args.runs} fresh processes, bytecode cached")
    print(f"  {'wall time':<22}{median('ms'):8.1f} ms     target <= {TARGET_MS:.0f} ms")
    print(f"  {'peak RSS':<22}{median('rss'):8.1f} MB     target <= {TARGET_MB:.0f} MB")
    print(f"  {'RSS added by import':<22}{median('added'):8.1f} MB")
    print(f"  {'modules loaded':<22}{median('modules'):8.0f}")
    for title, of in (
        (f"the floor: interlock's dependencies alone ({DEPENDENCIES}), same runs", floors),
        (
            "what a run loads: msgspec, asyncio, anyio and the standard modules, same runs",
            run_floors,
        ),
    ):
        print(f"\n{title}")
        print(f"  {'wall time':<22}{median('ms', of):8.1f} ms")
        print(f"  {'peak RSS':<22}{median('rss', of):8.1f} MB")
        print(f"  {'modules loaded':<22}{median('modules', of):8.0f}")
        above = median("ms") - median("ms", of), median("rss") - median("rss", of)
        print(f"  {'interlock above it':<22}{above[0]:8.1f} ms, {above[1]:.1f} MB")
    print("\nimport interlock, compile one node and run it on a MemoryStore, same runs")
    print(f"  {'wall time':<22}{median('ms', first_runs):8.1f} ms")
    print(f"  {'peak RSS':<22}{median('rss', first_runs):8.1f} MB")
    print(f"  {'modules loaded':<22}{median('modules', first_runs):8.0f}")
    print("\nclasses import interlock creates, by kind")
    for kind, count in sorted(made.items(), key=lambda item: -item[1]):
        print(f"  {kind:<22}{count:8d}")
    own: dict[str, list[int]] = {}
    total: dict[str, list[int]] = {}
    for rows in traces:
        for name, us, cumulative, _ in rows:
            own.setdefault(name, []).append(us)
            total.setdefault(name, []).append(cumulative)
    by = importers(traces[0])
    print("\nthe ten most expensive modules (median self time, -X importtime)")
    print(f"  {'self ms':>8} {'cumul. ms':>10}  module  <- imported by")
    ranked = sorted(own, key=lambda name: statistics.median(own[name]), reverse=True)
    for name in ranked[:10]:
        chain, at = [], name
        while at in by and len(chain) < 3:
            at = by[at]
            chain.append(at)
        print(
            f"  {statistics.median(own[name]) / 1000:8.1f} "
            f"{statistics.median(total[name]) / 1000:10.1f}  {name}"
            + (f"  <- {' <- '.join(chain)}" if chain else "")
        )


if __name__ == "__main__":
    main()
