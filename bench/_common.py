"""What both sides of the benchmark share: sizes, test data, measuring helpers, the wire format.

This module imports neither interlock nor LangGraph: each side's scenario runs in its own
interpreter (interlock's dev venv, LangGraph's ``bench/.venv-langgraph``) and imports only this
and its own library. A side is started as ``python bench/_<side>_side.py '<spec json>'`` and
prints exactly one JSON line, ``{"side", "scenario", "phase", "metrics", "info"}``, on stdout.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

SCENARIOS: Final = ("S1", "S2", "S2pg", "S3", "S4", "S5")

SIZES: Final[Mapping[str, Mapping[str, Mapping[str, int]]]] = {
    "full": {
        "S1": {"nodes": 50, "threads": 100},
        "S2": {"threads": 300, "warmup": 3},
        "S2pg": {"threads": 300, "warmup": 3},
        "S3": {"turns": 300, "window": 20, "message_bytes": 1024, "page": 50},
        "S4": {"tasks": 50, "partial": 25},
        "S5": {"threads": 5000},
    },
    "quick": {
        "S1": {"nodes": 50, "threads": 10},
        "S2": {"threads": 30, "warmup": 3},
        "S2pg": {"threads": 30, "warmup": 3},
        "S3": {"turns": 60, "window": 20, "message_bytes": 1024, "page": 50},
        "S4": {"tasks": 50, "partial": 25},
        "S5": {"threads": 300},
    },
}
"""Per mode, per scenario: the sizes both sides get (identical on both sides)."""

LIST_LIMIT: Final = 1_000_000
"""``limit=`` of interlock's inbox query in S5 (it has no cursor to page with; see README)."""

_ALPHABET: Final = string.ascii_letters + string.digits + " "


def message_text(turn: int, role: str, size: int) -> str:
    """A deterministic, incompressible-looking ASCII message of exactly ``size`` bytes."""
    rng = random.Random(f"{role}:{turn}")
    return "".join(rng.choices(_ALPHABET, k=size))


def thread_id(i: int) -> str:
    """The thread id both sides use for the ``i``-th thread of a scenario."""
    return f"thread-{i:05d}"


def peak_rss_kib() -> int:
    """This process's peak resident set size (``VmHWM`` of /proc/self/status), in KiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("VmHWM not found in /proc/self/status")


def db_sizes(path: Path) -> tuple[int, int]:
    """Bytes of a SQLite file and of its ``-wal`` file (0 if there is none)."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by linear interpolation."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def read_spec() -> dict[str, Any]:
    """The spec a side was started with: ``{"scenario", "phase", "params", "workdir"}``."""
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} '<spec json>' (started by bench/compare.py)")
    spec: dict[str, Any] = json.loads(sys.argv[1])
    return spec


def emit(
    side: str,
    spec: Mapping[str, Any],
    metrics: Mapping[str, float],
    info: Mapping[str, Any] | None = None,
) -> None:
    """Print the one JSON line of measurements a side reports."""
    line = {
        "side": side,
        "scenario": spec["scenario"],
        "phase": spec.get("phase", "run"),
        "metrics": dict(metrics),
        "info": {"python": sys.version.split()[0], "pid": os.getpid(), **(info or {})},
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def refuse_foreign(module: str) -> None:
    """Exit if ``module`` is importable here: the two sides' dependencies must never mix."""
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        raise SystemExit(
            f"{module!r} is importable from {sys.executable}; each side of the benchmark must run "
            "in its own virtualenv (see bench/README.md)"
        )
