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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

SCENARIOS: Final = (
    "S1", "S2", "S2pg", "S3", "S4", "S5", "S6", "S6pg", "A1", "A2", "A3", "Aovh",
)  # fmt: skip

AGENT_MESSAGE_SIZES: Final = {
    "user_bytes": 256,
    "query_bytes": 64,
    "tool_bytes": 1024,
    "answer_bytes": 512,
}
"""A2's message sizes: a user question, the lookup's query argument, its result, the answer."""

S6_SIZES: Final[Mapping[str, Mapping[str, Mapping[str, int]]]] = {
    "full": {
        "S6": {"threads": 64, "rounds": 10, "warmup": 1},
        "S6pg": {"threads": 64, "rounds": 10, "warmup": 1},
    },
    "quick": {
        "S6": {"threads": 64, "rounds": 2, "warmup": 1},
        "S6pg": {"threads": 64, "rounds": 2, "warmup": 1},
    },
}
"""S6, many threads at once: ``threads`` tasks in one process, each doing ``rounds`` approval
round trips (run → interrupt, resume → end) on a thread of its own per round, all at once."""

SIZES: Final[Mapping[str, Mapping[str, Mapping[str, int]]]] = {
    "full": {
        "S1": {"nodes": 50, "threads": 100},
        "S2": {"threads": 300, "warmup": 3},
        "S2pg": {"threads": 300, "warmup": 3},
        "S3": {"turns": 300, "window": 20, "message_bytes": 1024, "page": 50, "state_reads": 20},
        "S4": {"tasks": 50, "partial": 25},
        "S5": {"threads": 5000},
        **S6_SIZES["full"],
        "A1": {"threads": 200, "warmup": 3},
        "A2": {"turns": 200, "window": 20, **AGENT_MESSAGE_SIZES},
        "A3": {"threads": 20, "tools": 10, "gated": 3},
        "Aovh": {"threads": 200, "block": 20, "warmup": 3},
    },
    "quick": {
        "S1": {"nodes": 50, "threads": 10},
        "S2": {"threads": 30, "warmup": 3},
        "S2pg": {"threads": 30, "warmup": 3},
        "S3": {"turns": 60, "window": 20, "message_bytes": 1024, "page": 50, "state_reads": 20},
        "S4": {"tasks": 50, "partial": 25},
        "S5": {"threads": 300},
        **S6_SIZES["quick"],
        "A1": {"threads": 20, "warmup": 3},
        "A2": {"turns": 40, "window": 10, **AGENT_MESSAGE_SIZES},
        "A3": {"threads": 3, "tools": 10, "gated": 3},
        "Aovh": {"threads": 40, "block": 10, "warmup": 3},
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


def s3_checkpoints(turns: int) -> tuple[int, ...]:
    """The turns after which S3 reads the chat's latest state: ``turns//6, turns//2, turns``
    (50, 150, 300 at full size; 10, 30, 60 with ``--quick``)."""
    return tuple(sorted({t for t in (turns // 6, turns // 2, turns) if t > 0}))


def s3_state_file(work: Path, side: str, at: int, turns: int) -> Path:
    """The SQLite file S3's fresh-process ``state`` phase reads at turn ``at``: the chat's own
    file at the last turn, before that the copy the build took right after turn ``at``."""
    return work / (f"s3-{side}.db" if at == turns else f"s3-{side}-t{at}.db")


def chat_messages(turns: int, size: int) -> list[dict[str, str]]:
    """S3's messages after ``turns`` turns: user, assistant, user, ... (identical on both sides)."""
    return [
        {"role": role, "content": message_text(turn, role, size)}
        for turn in range(turns)
        for role in ("user", "assistant")
    ]


def check_chat(messages: Sequence[Mapping[str, str]], turns: int, size: int) -> None:
    """Raise unless ``messages`` is S3's whole chat after ``turns`` turns, message by message."""
    if [dict(m) for m in messages] != chat_messages(turns, size):
        raise AssertionError(f"the state at turn {turns} is not the chat's {2 * turns} messages")


def snapshot_db(src: Path, dst: Path) -> None:
    """Copy the SQLite database ``src`` (committed state, WAL included) to a new file ``dst``
    with SQLite's online backup, while the library's own connection to ``src`` stays open."""
    import sqlite3

    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def peak_rss_kib() -> int:
    """This process's peak resident set size (``VmHWM`` of /proc/self/status), in KiB."""
    return _status_kib("VmHWM:")


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


class AnonymousPeak:
    """The peak of this process's anonymous resident memory (``RssAnon``), sampled.

    ``VmHWM`` counts every resident page, the pages of a memory-mapped file included: those
    are the kernel's page cache, shared with every other reader of the file and dropped under
    pressure. ``RssAnon`` is what the process itself allocated (its heap, the interpreter's
    objects, SQLite's own page cache). The kernel keeps no peak of it, so a daemon thread reads
    it every ``interval`` seconds while the block runs, and once more at its end.

        with AnonymousPeak() as anon:
            work()
        anon.peak_kib
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.peak_kib = 0
        self._stop: Any = None

    def _sample(self) -> None:
        self.peak_kib = max(self.peak_kib, _status_kib("RssAnon:"))

    def __enter__(self) -> AnonymousPeak:
        import threading

        self._sample()
        stop = self._stop = threading.Event()

        def run() -> None:
            while not stop.wait(self.interval):
                self._sample()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def pg_dsn(dsn: str, lazy: bool) -> str:
    """``dsn``, with ``synchronous_commit=off`` for every session when ``lazy``."""
    if not lazy:
        return dsn
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    options = conninfo_to_dict(dsn).get("options") or ""
    return make_conninfo(dsn, options=f"{options} -csynchronous_commit=off".strip())


def wal_flushes(dsn: str) -> int:
    """The server's WAL flushes so far (``pg_stat_wal.wal_sync``), once every other session
    has ended (a session reports its counts when it ends, or at most every second)."""
    import time

    import psycopg

    deadline = time.monotonic() + 10
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.01)
        row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return 0 if row is None else int(row[0])


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


def s6_metrics(rounds_s: Sequence[float], wall_s: float, violations: int) -> dict[str, float]:
    """S6's figures: round trips per second of wall time over all tasks, round-trip latency
    (run plus resume of one thread) p50 and p99, and the correctness violations."""
    return {
        "s6_round_trips_per_s": len(rounds_s) / wall_s,
        "s6_p50_ms": percentile(rounds_s, 0.5) * 1e3,
        "s6_p99_ms": percentile(rounds_s, 0.99) * 1e3,
        "s6_violations": float(violations),
    }


def s6_thread(task: int, round_: int) -> str:
    """The thread of task ``task``'s ``round_``-th round trip in S6."""
    return f"t{task:03d}-r{round_:04d}"


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


# -- agent scenarios (A1, A2, A3, Aovh) ------------------------------------------------------------
#
# Both sides' scripted models play the same script, built here as plain data: reply ``n`` of a
# conversation is ``script[n]``, where ``n`` counts the assistant messages already in it (so a
# resumed conversation continues where it stopped, as interlock's ScriptedModel does).

GATED_TOOL: Final = "execute"
"""The tool every A1/A2/Aovh agent may call only with a person's approval."""
ALLOWED_TOOL: Final = "lookup"
"""The tool every A1/A2/Aovh agent may call freely."""
APPROVAL_ARGUMENTS: Final = {"command": "rm -rf build/"}
APPROVAL_REQUEST: Final = "Please delete the build directory."
"""A1, Aovh: the user's message."""
APPROVAL_ANSWER: Final = "Done: build/ is gone."
"""A1, Aovh: the model's answer once the tool ran."""
PARALLEL_REQUEST: Final = "Work on all ten items."
"""A3: the user's message."""


@dataclass(frozen=True)
class ScriptCall:
    """One tool call of a scripted reply."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ScriptReply:
    """One reply of the scripted model: an answer, or tool calls (made in parallel)."""

    text: str = ""
    calls: tuple[ScriptCall, ...] = ()


def approval_script() -> list[ScriptReply]:
    """A1, Aovh: call the gated tool, then answer."""
    return [
        ScriptReply(calls=(ScriptCall("call_0_0", GATED_TOOL, dict(APPROVAL_ARGUMENTS)),)),
        ScriptReply(text=APPROVAL_ANSWER),
    ]


def chat_script(turns: int, sizes: Mapping[str, int]) -> list[ScriptReply]:
    """A2: per turn, one call of the allowed tool, then an answer."""
    replies: list[ScriptReply] = []
    for turn in range(turns):
        arguments = {"query": message_text(turn, "query", sizes["query_bytes"]), "turn": turn}
        call = ScriptCall(f"call_{2 * turn}_0", ALLOWED_TOOL, arguments)
        replies.append(ScriptReply(calls=(call,)))
        replies.append(ScriptReply(text=message_text(turn, "assistant", sizes["answer_bytes"])))
    return replies


def chat_user(turn: int, sizes: Mapping[str, int]) -> str:
    """A2: the user's message of ``turn``."""
    return message_text(turn, "user", sizes["user_bytes"])


def lookup_result(turn: int, size: int) -> str:
    """A2: what the allowed tool returns for the call of ``turn``."""
    return message_text(turn, "tool", size)


def parallel_tools(tools: int, gated: int) -> tuple[list[str], list[str]]:
    """A3: the names of the ungated tools and of the gated ones (the last ``gated``)."""
    names = [f"tool_{i}" for i in range(tools)]
    return names[: tools - gated], names[tools - gated :]


def parallel_script(tools: int) -> list[ScriptReply]:
    """A3: one reply calling every tool at once, then an answer."""
    calls = tuple(ScriptCall(f"call_0_{i}", f"tool_{i}", {"item": i}) for i in range(tools))
    return [ScriptReply(calls=calls), ScriptReply(text="All done.")]


def arguments_json(arguments: Mapping[str, Any]) -> str:
    """A tool call's arguments as compact JSON (what a model sends on the wire)."""
    return json.dumps(arguments, separators=(",", ":"), sort_keys=True)


def raw_message_bytes(turns: int, sizes: Mapping[str, int]) -> int:
    """A2's raw bytes: the UTF-8 of every message's content plus every tool call's arguments
    (compact JSON), over the whole conversation — identical on both sides by construction."""
    total = 0
    for turn in range(turns):
        total += len(chat_user(turn, sizes).encode())
        total += len(lookup_result(turn, sizes["tool_bytes"]).encode())
    for reply in chat_script(turns, sizes):
        total += len(reply.text.encode())
        total += sum(len(arguments_json(c.arguments).encode()) for c in reply.calls)
    return total


def db_bytes(path: Path) -> int:
    """A SQLite file's bytes plus its ``-wal``'s (both sides measure after closing)."""
    main, wal = db_sizes(path)
    return main + wal
