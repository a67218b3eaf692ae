"""Benchmark interlock against LangGraph, side by side, scenario by scenario.

Each side runs in its own interpreter so their dependencies never mix: interlock in this
virtualenv (``sys.executable``), LangGraph in ``bench/.venv-langgraph`` (``--langgraph-python``).
Every measurement is a fresh subprocess that prints one JSON line; the sides alternate
repetition by repetition (interlock, LangGraph, interlock, LangGraph, ...) so machine noise
lands on both. The table shows medians. See bench/README.md.

    python bench/compare.py                 # everything, 5 repetitions
    python bench/compare.py --quick         # 1 repetition, small sizes (well under a minute)
    python bench/compare.py --only S1,S3 --reps 3 --json results.json
    python bench/compare.py --only S2,S5 --disk tmpfs   # SQLite files on a tmpfs only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from _common import SCENARIOS, SIZES, s3_checkpoints
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
SIDES = ("interlock", "langgraph")
SCRIPTS = {"interlock": HERE / "_interlock_side.py", "langgraph": HERE / "_langgraph_side.py"}
DEFAULT_LANGGRAPH_PYTHON = HERE / ".venv-langgraph" / "bin" / "python"
SETUP_HINT = (
    "python3 -m venv bench/.venv-langgraph && "
    "bench/.venv-langgraph/bin/pip install langgraph==1.2.22 langgraph-checkpoint-sqlite "
    "langgraph-checkpoint-postgres 'psycopg[binary]' psycopg-pool langchain==1.5.2"
)

LANGGRAPH_API: Mapping[str, Literal["sync", "async"]] = {
    # The faster of LangGraph's two APIs per scenario on the reference machine (README).
    "S1": "sync",
    "S2": "async",
    "S2pg": "async",
    "S3": "async",
    "S4": "async",
    "S4mem": "sync",
    "S5": "async",  # resuming; listing uses S5list
    "S5list": "sync",
    "S6": "async",
    "S6pg": "async",
    "A1": "async",
    "A2": "sync",
    "A3": "async",
    "Aovh": "async",
}
S5_LISTINGS = ("get_tuple", "get_state", "scan")

Medium = Literal["memory", "disk", "tmpfs", "postgres"]
MEDIA_SCENARIOS = ("S2", "S3", "S5", "S6")
"""The SQLite scenarios ``--disk`` runs on a disk, on a tmpfs, or both."""
FIXED_MEDIUM: Mapping[str, Medium] = {"S1": "memory", "S2pg": "postgres", "S6pg": "postgres"}
PG_SCENARIOS = ("S2pg", "S6pg")
"""The scenarios on the throwaway PostgreSQL server (a fresh schema per side and repetition)."""
"""Where the other scenarios keep their state (all not named here: SQLite files on disk)."""
SHM = Path("/dev/shm")
"""The tmpfs ``--disk tmpfs|both`` puts a fresh work folder in."""

console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)
out = Console(width=None if sys.stdout.isatty() else 150)


# -- metrics and targets -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal: on the ratio (interlock better ×), or on interlock's own value."""

    kind: Literal["ratio_at_least", "interlock_at_most", "interlock_zero", "both_zero"]
    value: float = 0.0
    label: str = ""
    """How the table names it, when not as `kind` and `value` say (``interlock ≤ 2 + ε``)."""

    def describe(self) -> str:
        if self.label:
            return self.label
        match self.kind:
            case "ratio_at_least":
                return "interlock ≤ LangGraph" if self.value == 1 else f"≥ {self.value:g}×"
            case "interlock_at_most":
                return f"interlock ≤ {self.value:g}"
            case "interlock_zero":
                return "interlock = 0"
            case "both_zero":
                return "both = 0"
        raise AssertionError(self.kind)

    def check(self, il: float, lg: float, ratio: float | None) -> bool:
        match self.kind:
            case "ratio_at_least":
                return ratio is not None and ratio >= self.value
            case "interlock_at_most":
                return il <= self.value
            case "interlock_zero":
                return il == 0
            case "both_zero":
                return il == 0 and lg == 0
        raise AssertionError(self.kind)


@dataclass(frozen=True)
class Metric:
    scenario: str
    key: str
    label: str
    unit: str
    better: Literal["higher", "lower"]
    word: str = ""
    """What a ratio above 1 means for interlock: "faster", "smaller", ... ("" = no ratio)."""
    target: Target | None = None


S2PG_WAL_FLUSHES = 2.25
"""The ``2 + ε`` of S2pg's WAL flushes per round trip (ε: the WAL writer's own flushes)."""


def ratio_at_least(x: float) -> Target:
    return Target("ratio_at_least", x)


def s6_metrics_for(sizes: Mapping[str, Mapping[str, int]]) -> list[Metric]:
    """S6's rows: ``threads`` tasks at once doing approval round trips, on SQLite (the table's
    medium) and on PostgreSQL. The targets are the same on disk and on the tmpfs."""
    n = sizes["S6"]["threads"]
    rows = []
    for scenario, where, target in (("S6", "SQLite", 5), ("S6pg", "PostgreSQL", 3)):
        rows += [
            Metric(
                scenario,
                "s6_round_trips_per_s",
                f"{where}: round trips/s, {n} tasks at once",
                "/s",
                "higher",
                "higher",
                ratio_at_least(target),
            ),
            Metric(
                scenario, "s6_p99_ms", f"{where}: round-trip latency p99", "ms", "lower", "faster"
            ),
            Metric(
                scenario, "s6_p50_ms", f"{where}: round-trip latency p50", "ms", "lower", "faster"
            ),
            Metric(
                scenario,
                "s6_violations",
                f"{where}: execute ≠ once or before approval",
                "n",
                "lower",
                target=Target("both_zero"),
            ),
        ]
    return rows


def metrics_for(
    sizes: Mapping[str, Mapping[str, int]], medium: Literal["disk", "tmpfs"] = "disk"
) -> list[Metric]:
    """Every metric of the table for SQLite files on ``medium``: the tmpfs table has the scale
    issue's targets for S2 and S5 (no fsync to hide behind)."""
    tmpfs = medium == "tmpfs"
    s3 = sizes["S3"]
    marks = s3_checkpoints(s3["turns"])
    late = f"{s3['turns'] - s3['window'] + 1}–{s3['turns']}"
    early = f"1–{s3['window']}"
    n5 = sizes["S5"]["threads"]
    a2 = sizes["A2"]
    a2_late = f"{a2['turns'] - a2['window'] + 1}–{a2['turns']}"
    a2_early = f"1–{a2['window']}"
    g3 = sizes["A3"]["gated"]
    u3 = sizes["A3"]["tools"] - g3
    return [
        Metric("S1", "s1_steps_per_s_ckpt", "node-steps/s, checkpoint every step (memory)",
               "/s", "higher", "higher", ratio_at_least(10)),
        Metric("S1", "s1_steps_per_s_nockpt",
               "node-steps/s, no checkpoints (il: durability=exit)", "/s", "higher", "higher"),
        Metric("S2", "s2_round_trips_per_s", "round trips/s (run→interrupt, resume→end)",
               "/s", "higher", "higher", ratio_at_least(8 if tmpfs else 5)),
        Metric("S2", "s2_resume_p50_ms", "resume latency p50", "ms", "lower", "faster",
               Target("interlock_at_most", 1.0)),
        Metric("S2", "s2_run_p50_ms", "run-to-interrupt latency p50", "ms", "lower", "faster"),
        Metric("S2", "s2_violations", "execute ≠ once or before approval", "n", "lower",
               target=Target("both_zero")),
        Metric("S2pg", "s2_round_trips_per_s", "PostgreSQL: round trips/s", "/s", "higher",
               "higher", ratio_at_least(3)),
        Metric("S2pg", "s2_resume_p50_ms", "PostgreSQL: resume latency p50", "ms", "lower",
               "faster"),
        Metric("S2pg", "s2_violations", "PostgreSQL: execute ≠ once or before approval", "n",
               "lower", target=Target("both_zero")),
        # Durability costs a WAL flush per durable commit: interlock's two (the interrupt's
        # and the end's checkpoints) bound its round trip from below; ε is the WAL writer's
        # background flushes of the non-durable commits.
        Metric("S2pg", "s2_wal_flushes_per_rt", "PostgreSQL: WAL flushes per round trip "
               "(pg_stat_wal)", "/rt", "lower", "fewer",
               Target("interlock_at_most", S2PG_WAL_FLUSHES, label="interlock ≤ 2 + ε")),
        Metric("S2pg", "s2off_round_trips_per_s", "PostgreSQL, synchronous_commit=off: round "
               "trips/s", "/s", "higher", "higher", ratio_at_least(3)),
        Metric("S2pg", "s2off_resume_p50_ms", "PostgreSQL, synchronous_commit=off: resume "
               "latency p50", "ms", "lower", "faster"),
        Metric("S2pg", "s2off_wal_flushes_per_rt", "PostgreSQL, synchronous_commit=off: WAL "
               "flushes per round trip", "/rt", "lower", "fewer"),
        Metric("S2pg", "s2off_violations", "PostgreSQL, synchronous_commit=off: execute ≠ "
               "once or before approval", "n", "lower", target=Target("both_zero")),
        Metric("S3", "s3_db_ratio", "db bytes ÷ raw message bytes", "×", "lower", "smaller",
               Target("interlock_at_most", 3)),
        Metric("S3", "s3_db_mib", "main db file after close", "MiB", "lower", "smaller"),
        Metric("S3", "s3_wal_kib", "-wal file after close", "KiB", "lower"),
        Metric("S3", "s3_growth", f"mean turn time, turns {late} ÷ {early}", "×", "lower",
               "flatter", Target("interlock_at_most", 1.3)),
        Metric("S3", "s3_turn_ms_early", f"mean turn time, turns {early}", "ms", "lower",
               "faster"),
        Metric("S3", "s3_turn_ms_late", f"mean turn time, turns {late}", "ms", "lower", "faster"),
        Metric("S3", "s3_history_s", f"read whole history, pages of {s3['page']}", "s", "lower",
               "faster", ratio_at_least(5)),
        *(Metric("S3", f"s3_get_state_first_ms_t{t}",
                 f"get_state, first call in the App that ran turn {t}", "ms", "lower", "faster",
                 ratio_at_least(1)) for t in marks),
        *(Metric("S3", f"s3_get_state_fresh_ms_t{t}",
                 f"get_state, fresh process, first call: turn {t}", "ms", "lower", "faster",
                 ratio_at_least(1) if t == s3["turns"] else None) for t in marks),
        *(Metric("S3", f"s3_get_state_warm_ms_t{t}",
                 f"get_state, warm (median of next {s3['state_reads']}): turn {t}", "ms",
                 "lower", "faster", ratio_at_least(1) if t == s3["turns"] else None)
          for t in marks),
        Metric("S4", "s4_interrupt_ms", "SQLite: run to 50 interrupts", "ms", "lower", "faster",
               ratio_at_least(5)),
        Metric("S4", "s4_resume_all_ms", "SQLite: resume all 50 in one call", "ms", "lower",
               "faster", ratio_at_least(5)),
        Metric("S4", "s4_partial_pair_ms", "SQLite: resume 25, then 25", "ms", "lower",
               "faster"),
        Metric("S4", "s4_reentries", "unanswered siblings re-entered (partial)", "n", "lower",
               target=Target("interlock_zero")),
        Metric("S4", "s4_mem_interrupt_ms", "memory: run to 50 interrupts", "ms", "lower",
               "faster"),
        Metric("S4", "s4_mem_resume_all_ms", "memory: resume all 50 in one call", "ms", "lower",
               "faster"),
        Metric("S4", "s4_mem_partial_pair_ms", "memory: resume 25, then 25", "ms", "lower",
               "faster"),
        Metric("S5", "s5_build_s", f"build {n5:,} waiting threads (untargeted)", "s", "lower",
               "faster"),
        Metric("S5", "s5_list_s", f"fresh process: list {n5:,} pending", "s", "lower",
               "faster", ratio_at_least(10)),
        Metric("S5", "s5_list_floor_s",
               f"  floor: bare sqlite3 fetch of (id, thread) × {n5:,}", "s", "lower"),
        Metric("S5", "s5_resume_all_s", f"fresh process: resume all {n5:,}", "s", "lower",
               "faster", ratio_at_least(6 if tmpfs else 4)),
        Metric("S5", "s5_peak_rss_mib", "fresh process peak RSS (VmHWM)", "MiB", "lower",
               "less", Target("interlock_at_most", 50)),
        Metric("S5", "s5_peak_anon_mib", "  of it anonymous, peak (RssAnon, sampled)", "MiB",
               "lower", "less", Target("interlock_at_most", 50)),
        Metric("S5", "s5_errors", "listed/executed ≠ expected", "n", "lower",
               target=Target("both_zero")),
        *s6_metrics_for(sizes),
        Metric("A1", "a1_round_trips_per_s", "agent round trips/s (run→approval, approve→answer)",
               "/s", "higher", "higher", ratio_at_least(5)),
        Metric("A1", "a1_resume_p50_ms", "resume latency p50 (approve→tool→answer)", "ms",
               "lower", "faster", Target("interlock_at_most", 1.5)),
        Metric("A1", "a1_run_p50_ms", "run-to-approval latency p50", "ms", "lower", "faster"),
        Metric("A1", "a1_violations", "tool ran ≠ once, before approval, or wrong answer", "n",
               "lower", target=Target("both_zero")),
        Metric("A2", "a2_db_ratio", "db+wal bytes ÷ raw message bytes", "×", "lower", "smaller",
               Target("interlock_at_most", 3)),
        Metric("A2", "a2_db_mib", "db+wal after close", "MiB", "lower", "smaller"),
        Metric("A2", "a2_growth", f"mean turn time, turns {a2_late} ÷ {a2_early}", "×",
               "lower", "flatter", Target("interlock_at_most", 1.3)),
        Metric("A2", "a2_turn_ms_early", f"mean turn time, turns {a2_early}", "ms", "lower",
               "faster"),
        Metric("A2", "a2_turn_ms_late", f"mean turn time, turns {a2_late}", "ms", "lower",
               "faster"),
        Metric("A2", "a2_errors", "wrong answers, messages or tool calls", "n", "lower",
               target=Target("both_zero")),
        Metric("A3", "a3_run_ms", f"run to the {g3} approvals", "ms", "lower", "faster"),
        Metric("A3", "a3_resume_one_ms", "resume approving one (LC batched: + reject the rest)",
               "ms", "lower", "faster"),
        Metric("A3", "a3_ungated_before_decision",
               f"ungated bodies run before any decision (of {u3})", "n", "higher"),
        Metric("A3", "a3_ungated_entries", f"after approving one: ungated bodies entered (of {u3})",
               "n", "lower"),
        Metric("A3", "a3_approved_entries", "  … the approved body entered", "n", "lower"),
        Metric("A3", "a3_pending_entries", f"  … the other {g3 - 1} gated bodies entered", "n",
               "lower"),
        Metric("A3", "a3_pending_left", "  … approvals still pending", "n", "lower"),
        Metric("A3", "a3_violations", f"threads off {u3}×1 ungated, 1 approved, 0 others", "n",
               "lower", target=Target("interlock_zero")),
        Metric("A3", "a3pc_resume_one_ms", "LC per_call: resume approving one", "ms", "lower",
               "faster"),
        Metric("A3", "a3pc_pending_left", "LC per_call: approvals still pending after it", "n",
               "lower"),
        Metric("A3", "a3pc_violations", "LC per_call: threads off that pattern", "n", "lower"),
        Metric("Aovh", "aovh_plain_round_trips_per_s", "plain graph, same round trip: /s", "/s",
               "higher", "higher"),
        Metric("Aovh", "aovh_agent_round_trips_per_s", "agent, interleaved with it: /s", "/s",
               "higher", "higher"),
        Metric("Aovh", "aovh_overhead_pct", "agent's time over the bare plain graph's", "%",
               "lower"),
        Metric("Aovh", "aovh_effect_round_trips_per_s",
               "plain graph, same guarantees (effect + answer schema): /s", "/s", "higher"),
        Metric("Aovh", "aovh_overhead_vs_effect_pct", "agents layer: time over the same guarantees",
               "%", "lower", target=Target("interlock_at_most", 15)),
        Metric("Aovh", "aovh_agent_resume_p50_ms", "agent resume latency p50", "ms", "lower",
               "faster"),
        Metric("Aovh", "aovh_plain_resume_p50_ms", "plain graph resume latency p50", "ms",
               "lower", "faster"),
        Metric("Aovh", "aovh_violations", "tool ran ≠ once, before approval, or wrong answer",
               "n", "lower", target=Target("both_zero")),
    ]  # fmt: skip


def fmt(value: float, unit: str) -> str:
    if value != value:  # NaN
        return "—"
    match unit:
        case "/s":
            return f"{value:,.0f}/s"
        case "ms":
            return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"
        case "s":
            return f"{value:.4f} s" if value < 1 else f"{value:,.2f} s"
        case "×":
            return f"{value:.2f}×"
        case "MiB" | "KiB":
            return f"{value:,.1f} {unit}"
        case "%":
            return f"{value:+.1f}%"
        case "/rt":
            return f"{value:.2f}"
        case _:
            return f"{value:g}"


# -- running the sides ---------------------------------------------------------------------------


class SideFailed(Exception):
    pass


@dataclass
class Outcome:
    """Every repetition's metrics for one scenario and side, plus what went wrong."""

    reps: list[dict[str, float]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def side_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        {
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANGSMITH_TRACING": "false",
            "LANGCHAIN_TRACING_V2": "false",
        }
    )
    return env


def run_side(
    python: str, side: str, scenario: str, phase: str, params: Mapping[str, Any], work: Path
) -> dict[str, Any]:
    spec = {"scenario": scenario, "phase": phase, "params": dict(params), "workdir": str(work)}
    started = time.perf_counter()
    proc = subprocess.run(
        [python, str(SCRIPTS[side]), json.dumps(spec)],
        capture_output=True,
        text=True,
        env=side_env(),
        cwd=HERE,
        timeout=3600,
        check=False,
    )
    elapsed = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise SideFailed(f"{side} {scenario}/{phase} exited {proc.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["elapsed_s"] = elapsed
    return result


def side_params(
    side: str, scenario: str, sizes: Mapping[str, Mapping[str, int]], args: argparse.Namespace
) -> dict[str, Any]:
    params: dict[str, Any] = dict(sizes[scenario])
    if side == "langgraph":
        api = args.langgraph_api
        params["api"] = LANGGRAPH_API[scenario] if api == "auto" else api
        if scenario == "S4":
            params["mem_api"] = LANGGRAPH_API["S4mem"] if api == "auto" else api
        if scenario == "S5":
            params["list_api"] = LANGGRAPH_API["S5list"] if api == "auto" else api
            params["listing"] = args.s5_listing
    return params


def media_of(scenario: str, args: argparse.Namespace) -> list[Medium]:
    """Where ``scenario`` runs: S2, S3, S5, S6 on each medium of ``--disk``; the others once."""
    if scenario in MEDIA_SCENARIOS:
        return list(args.media)
    return [FIXED_MEDIUM.get(scenario, "disk")]


def phases_of(
    scenario: str, sizes: Mapping[str, Mapping[str, int]]
) -> list[tuple[str, dict[str, Any]]]:
    """The subprocesses of one repetition of one side, in order, with their extra params."""
    if scenario == "S5":
        return [("build", {}), ("serve", {})]
    if scenario == "S3":
        # After the chat is built: one fresh process per checkpoint reads its latest state.
        marks = s3_checkpoints(sizes["S3"]["turns"])
        return [("run", {}), *(("state", {"at": t}) for t in marks)]
    if scenario == "S2pg":
        # Again with the server at synchronous_commit=off for both sides: no WAL flush to
        # wait for, so what is left is each side's own work per round trip.
        return [("run", {}), ("off", {"synchronous_commit": "off"})]
    return [("run", {})]


def run_scenario(
    scenario: str,
    medium: Medium,
    rep: int,
    pythons: Mapping[str, str],
    sizes: Mapping[str, Mapping[str, int]],
    args: argparse.Namespace,
    root: Path,
    outcomes: dict[tuple[str, Medium], dict[str, Outcome]],
    raw: list[dict[str, Any]],
) -> None:
    work = root / f"{scenario}-rep{rep}"
    work.mkdir(parents=True, exist_ok=True)
    name = f"{scenario}/{medium}" if scenario in MEDIA_SCENARIOS else scenario
    try:
        for side in SIDES:
            outcome = outcomes[(scenario, medium)][side]
            params = side_params(side, scenario, sizes, args)
            metrics: dict[str, float] = {}
            schema = contextlib.ExitStack()
            try:
                for phase, extra in phases_of(scenario, sizes):
                    if scenario in PG_SCENARIOS:
                        # Each side and phase gets a fresh schema of the throwaway server.
                        assert _PG is not None
                        params["dsn"] = schema.enter_context(_PG.schema_dsn())
                    spec = {**params, **extra}
                    result = run_side(pythons[side], side, scenario, phase, spec, work)
                    raw.append({"rep": rep, "medium": medium, "params": spec, **result})
                    metrics.update(result["metrics"])
                    outcome.info.update(result["info"])
                    console.print(
                        f"  rep {rep + 1} {name} {side:<9} {phase:<5} "
                        f"{result['elapsed_s']:6.1f} s  {_brief(result['metrics'])}",
                        highlight=False,
                    )
            except (SideFailed, subprocess.TimeoutExpired) as exc:
                outcome.errors.append(str(exc))
                console.print(f"  [red]rep {rep + 1} {name} {side} failed[/red]: {exc}")
                continue
            finally:
                schema.close()
            outcome.reps.append(metrics)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _brief(metrics: Mapping[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in list(metrics.items())[:3])


# -- reporting -------------------------------------------------------------------------------------


def median_of(outcome: Outcome, key: str) -> float:
    values = [m[key] for m in outcome.reps if key in m]
    return statistics.median(values) if values else float("nan")


TableName = Literal["disk", "tmpfs"]
TABLE_MEDIA: Mapping[TableName, tuple[Medium, ...]] = {
    "disk": ("memory", "disk", "postgres"),
    "tmpfs": ("memory", "tmpfs"),
}
"""The runs each table shows: S1 (memory, run once) is in both."""


def table_view(
    outcomes: Mapping[tuple[str, Medium], Mapping[str, Outcome]], table: TableName
) -> dict[str, tuple[Medium, Mapping[str, Outcome]]]:
    """Per scenario, the medium and outcomes one table shows: the disk table everything that
    did not run on the tmpfs, the tmpfs table the tmpfs runs plus S1 (memory, run once)."""
    shown = TABLE_MEDIA[table]
    return {s: (medium, sides) for (s, medium), sides in outcomes.items() if medium in shown}


def summarize(
    metrics: Sequence[Metric],
    view: Mapping[str, tuple[Medium, Mapping[str, Outcome]]],
    table: TableName,
) -> list[dict[str, Any]]:
    rows = []
    for m in metrics:
        if m.scenario not in view:
            continue
        medium, sides = view[m.scenario]
        il = median_of(sides["interlock"], m.key)
        lg = median_of(sides["langgraph"], m.key)
        ratio: float | None = None
        if m.word and il == il and lg == lg and il > 0 and lg > 0:
            ratio = il / lg if m.better == "higher" else lg / il
        status = None
        if m.target is not None:
            measured = il == il and (lg == lg or m.target.kind in ("interlock_at_most",))
            status = "PASS" if measured and m.target.check(il, lg, ratio) else "FAIL"
            if not measured:
                status = "N/A"
        rows.append(
            {
                "table": table,
                "medium": medium,
                "scenario": m.scenario,
                "metric": m.key,
                "label": m.label,
                "unit": m.unit,
                "better": m.better,
                "interlock_median": il,
                "langgraph_median": lg,
                "ratio": ratio,
                "ratio_meaning": f"interlock {m.word} (×)" if m.word else None,
                "target": m.target.describe() if m.target else None,
                "status": status,
                "reps": {side: [r.get(m.key) for r in sides[side].reps] for side in SIDES},
            }
        )
    return rows


def render(rows: Sequence[dict[str, Any]], metrics: Sequence[Metric], title: str) -> Table:
    by_key = {(m.scenario, m.key): m for m in metrics}  # S2 and S2pg share metric keys
    table = Table(
        title=title,
        caption="ratio: how many times better interlock is, in the direction named "
        "(< 1× means LangGraph is better)",
        show_lines=False,
    )
    for name, justify in (
        ("", "left"),
        ("metric", "left"),
        ("interlock", "right"),
        ("LangGraph", "right"),
        ("ratio", "right"),
        ("target", "left"),
        ("", "center"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    previous = None
    for row in rows:
        m = by_key[(row["scenario"], row["metric"])]
        if previous is not None and row["scenario"] != previous:
            table.add_section()
        scenario = row["scenario"] if row["scenario"] != previous else ""
        previous = row["scenario"]
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}× {m.word}"
        status = row["status"] or ""
        style = {"PASS": "green", "FAIL": "bold red", "N/A": "yellow"}.get(status, "")
        table.add_row(
            scenario,
            m.label,
            fmt(row["interlock_median"], m.unit),
            fmt(row["langgraph_median"], m.unit),
            ratio,
            row["target"] or "",
            f"[{style}]{status}[/{style}]" if style else status,
        )
    return table


def agent_notes(
    outcomes: Mapping[str, Mapping[str, Outcome]], sizes: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """Lines printed under the table for the agent scenarios: A3's body counts tool by tool,
    how each side was driven, and the overhead against A1's own figure."""
    lines: list[str] = []
    if "A3" in outcomes:
        names = [f"tool_{i}" for i in range(sizes["A3"]["tools"])]
        lines.append(
            f"A3 tool bodies entered, {names[0]}…{names[-1]} (first measured thread): "
            "after the run | after the one approval"
        )
        sides = [("interlock", "interlock", "a3"), ("LangChain batched", "langgraph", "a3"),
                 ("LangChain per_call", "langgraph", "a3pc")]  # fmt: skip
        for label, side, prefix in sides:
            info = outcomes["A3"][side].info
            if f"{prefix}_entries_after_one_approval" not in info:
                continue
            run, after = (
                " ".join(str(info[f"{prefix}_entries_{when}"].get(n, 0)) for n in names)
                for when in ("before_decision", "after_one_approval")
            )
            lines.append(f"  {label:<19} {run} | {after}")
        for label, side, key in (("interlock", "interlock", "a3_how"),
                                 ("LangChain", "langgraph", "a3_how"),
                                 ("LangChain", "langgraph", "a3pc_how")):  # fmt: skip
            if key in outcomes["A3"][side].info:
                lines.append(f"  how, {label}: {outcomes['A3'][side].info[key]}")
    if "A1" in outcomes and "Aovh" in outcomes:
        a1 = median_of(outcomes["A1"]["interlock"], "a1_round_trips_per_s")
        plain = median_of(outcomes["Aovh"]["interlock"], "aovh_plain_round_trips_per_s")
        if a1 == a1 and plain == plain:
            lines.append(
                f"Aovh against A1's own figure: interlock agent {a1:,.0f}/s (A1) vs plain graph "
                f"{plain:,.0f}/s (Aovh): {(plain / a1 - 1) * 100:+.1f}% time per round trip "
                "(separate processes; the Aovh row interleaves both in one)"
            )
    return lines


def machine() -> dict[str, Any]:
    def first(path: str, prefix: str) -> str:
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.startswith(prefix):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    disk = "?"
    try:
        df = subprocess.run(
            ["df", "-hT", str(HERE)], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        if len(df) > 1:
            dev, fstype, size = df[1].split()[:3]
            disk = f"{dev} {fstype} {size}"
    except OSError:
        pass
    mem_kib = first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "nproc": os.cpu_count(),
        "cpu": first("/proc/cpuinfo", "model name"),
        "ram_gib": round(int(mem_kib) / 2**20, 1) if mem_kib.isdigit() else "?",
        "disk": disk,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def fs_type(path: Path) -> str | None:
    """The type of the file system ``path`` is on (``/proc/mounts``), or None if unknown."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return None
    target = os.path.realpath(path)
    best, kind = "", None
    for point, fstype in mounts:
        point = point.replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def tmpfs_root() -> Path:
    """A fresh work folder on the tmpfs at /dev/shm; SystemExit saying what to do if there is
    none (never a silent fall back to the disk)."""
    hint = (
        "mount one (e.g. `sudo mount -t tmpfs -o size=4g tmpfs /dev/shm`), or run with --disk disk"
    )
    if not SHM.is_dir():
        raise SystemExit(
            f"--disk tmpfs/both puts the SQLite files under {SHM}, which is missing: {hint}"
        )
    kind = fs_type(SHM)
    if kind != "tmpfs":
        on = f"on {kind}" if kind else "on a file system /proc/mounts does not name"
        raise SystemExit(f"--disk tmpfs/both needs {SHM} to be a tmpfs, but it is {on}: {hint}")
    try:
        return Path(tempfile.mkdtemp(prefix="interlock-bench-", dir=SHM))
    except OSError as exc:
        raise SystemExit(f"cannot create a work folder under {SHM} ({exc}): {hint}") from exc


# -- main ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--reps", type=int, default=None, help="repetitions per side (default 5)")
    p.add_argument("--quick", action="store_true", help="1 repetition, reduced sizes")
    p.add_argument("--only", default=",".join(SCENARIOS), help="scenarios, e.g. S1,S3")
    p.add_argument("--json", type=Path, default=None, help="save raw results to this file")
    p.add_argument(
        "--langgraph-python",
        default=os.environ.get("LANGGRAPH_PYTHON", str(DEFAULT_LANGGRAPH_PYTHON)),
        help="interpreter of the LangGraph virtualenv (default bench/.venv-langgraph)",
    )
    p.add_argument(
        "--langgraph-api",
        choices=("auto", "sync", "async"),
        default="auto",
        help="LangGraph API to use; auto = the faster one per scenario (see README)",
    )
    p.add_argument(
        "--s5-listing",
        choices=S5_LISTINGS,
        default="get_tuple",
        help="how the LangGraph side finds pending interrupts in S5 (see README)",
    )
    p.add_argument(
        "--disk",
        choices=("disk", "tmpfs", "both"),
        default="both",
        help="where S2, S3, S5, S6 put their SQLite files: the work folder on disk, a fresh folder "
        "on the tmpfs /dev/shm, or both (one table each; default)",
    )
    p.add_argument("--workdir", type=Path, default=HERE / ".work", help="where db files go")
    p.add_argument("--keep", action="store_true", help="keep the db files of each run")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 5
    if args.reps < 1:
        p.error("--reps must be at least 1")
    args.media = {"disk": ("disk",), "tmpfs": ("tmpfs",), "both": ("disk", "tmpfs")}[args.disk]
    by_name = {name.upper(): name for name in SCENARIOS}
    args.scenarios = [
        by_name.get(s.strip().upper(), s.strip()) for s in args.only.split(",") if s.strip()
    ]
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}")
    return args


_PG: Any = None
"""The throwaway PostgreSQL server of S2pg and S6pg (tests/_pgserver.py), while a run lasts."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.ExitStack() as stack:
        if any(s in args.scenarios for s in PG_SCENARIOS):
            global _PG
            sys.path.insert(0, str(HERE.parent / "tests"))
            from _pgserver import pg_server

            _PG = stack.enter_context(pg_server())
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    # Absolute, because the sides start in bench/; not resolved, or a venv's python symlink
    # would lead out of the venv.
    lg_python = os.path.abspath(args.langgraph_python)
    if not Path(lg_python).exists():
        console.print(
            f"[red]LangGraph interpreter {lg_python} not found.[/red] Create it with:\n  "
            f"{SETUP_HINT}\nor pass --langgraph-python."
        )
        return 2
    pythons = {"interlock": sys.executable, "langgraph": lg_python}
    sizes = SIZES["quick" if args.quick else "full"]
    info = machine()
    console.print(
        f"machine: {info['nproc']} × {info['cpu']}, {info['ram_gib']} GiB RAM, disk {info['disk']}"
    )
    console.print(
        f"mode: {'quick' if args.quick else 'full'}, reps {args.reps}, scenarios "
        f"{','.join(args.scenarios)}, SQLite of {','.join(MEDIA_SCENARIOS)} on "
        f"{' and '.join(args.media)}; interlock {sys.executable}, LangGraph {lg_python}"
    )

    runs = [(s, medium) for s in args.scenarios for medium in media_of(s, args)]
    outcomes = {run: {side: Outcome() for side in SIDES} for run in runs}
    raw: list[dict[str, Any]] = []
    roots: dict[str, Path] = {}
    if any(medium == "tmpfs" for _, medium in runs):
        roots["tmpfs"] = tmpfs_root()  # fails before anything ran if there is no tmpfs
    args.workdir.mkdir(parents=True, exist_ok=True)
    disk_fs = fs_type(args.workdir) or "?"
    if disk_fs == "tmpfs" and any(medium == "disk" for _, medium in runs):
        console.print(
            f"[yellow]warning:[/yellow] --workdir {args.workdir} is on a tmpfs: the disk "
            "table will not measure a disk"
        )
    started = time.perf_counter()
    try:
        roots["disk"] = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))
        for scenario in args.scenarios:
            for rep in range(args.reps):
                # The media take turns repetition by repetition, as the sides do.
                for medium in media_of(scenario, args):
                    root = roots["tmpfs" if medium == "tmpfs" else "disk"]
                    run_scenario(scenario, medium, rep, pythons, sizes, args, root, outcomes, raw)
    finally:
        if not args.keep:
            for root in roots.values():
                shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"database files kept in {', '.join(map(str, roots.values()))}")
    elapsed = time.perf_counter() - started

    tables: list[tuple[TableName, str]] = []
    disk_view = table_view(outcomes, "disk")
    has_tmpfs = "tmpfs" in args.media and any(m == "tmpfs" for _, m in runs)
    if not has_tmpfs or any(medium != "memory" for medium, _ in disk_view.values()):
        tables.append(("disk", f"SQLite files on disk ({disk_fs})"))
    if has_tmpfs:
        s1 = " + S1 in memory, run once" if "S1" in args.scenarios else ""
        on_tmpfs = ",".join(s for s, medium in runs if medium == "tmpfs")
        tables.append(("tmpfs", f"SQLite files on a tmpfs ({on_tmpfs}{s1})"))
    rows: list[dict[str, Any]] = []
    out.print()
    out.print(
        f"machine: {info['nproc']} CPU × {info['cpu']}, {info['ram_gib']} GiB RAM, "
        f"disk {info['disk']}, kernel {info['kernel']}, Python {info['python']}",
        highlight=False,
    )
    versions = _versions(outcomes)
    out.print(f"versions: {versions}; wall time {elapsed:,.0f} s", highlight=False)
    for table, what in tables:
        metrics = metrics_for(sizes, table)
        table_rows = summarize(metrics, table_view(outcomes, table), table)
        rows.extend(table_rows)
        title = f"interlock vs LangGraph — {what} — medians of {args.reps} repetition(s)"
        out.print(render(table_rows, metrics, title))
    agents = {s: sides for (s, _), sides in outcomes.items() if s not in MEDIA_SCENARIOS}
    for line in agent_notes(agents, sizes):
        out.print(line, highlight=False, markup=False)
    failed = [
        f"{s}{'/' + medium if s in MEDIA_SCENARIOS else ''}/{side}: {err.splitlines()[0]}"
        for (s, medium), sides in outcomes.items()
        for side, o in sides.items()
        for err in o.errors
    ]
    for line in failed:
        out.print(f"[red]error[/red] {line}")
    if args.json is not None:
        info_by_run: dict[str, dict[str, Any]] = {}
        for (s, medium), sides in outcomes.items():
            info_by_run.setdefault(s, {})[medium] = {side: o.info for side, o in sides.items()}
        document = {
            "machine": info,
            "mode": "quick" if args.quick else "full",
            "reps": args.reps,
            "media": {s: media_of(s, args) for s in args.scenarios},
            "workdir_fs": disk_fs,
            "sizes": {s: sizes[s] for s in args.scenarios},
            "langgraph_params": {
                s: side_params("langgraph", s, sizes, args) for s in args.scenarios
            },
            "wall_time_s": elapsed,
            "summary": rows,
            "info": info_by_run,
            "errors": failed,
            "raw": raw,
        }
        args.json.write_text(json.dumps(_no_nan(document), indent=2) + "\n")
        out.print(f"raw results saved to {args.json}")
    return 1 if failed else 0


def _versions(outcomes: Mapping[Any, Mapping[str, Outcome]]) -> str:
    found: dict[str, str] = {}
    for sides in outcomes.values():
        for o in sides.values():
            for name in ("interlock", "langgraph"):
                if name in o.info:
                    found[name] = str(o.info[name])
    return ", ".join(f"{k} {v}" for k, v in sorted(found.items())) or "?"


def _no_nan(value: Any) -> Any:
    """``value`` with NaN (a metric that was not measured) as null, so the file is valid JSON."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
