"""What ``interlock_append`` costs the PostgreSQL server, per append and per round trip.

Starts a throwaway PostgreSQL 15 (as the tests do, with ``pg_stat_statements`` loaded), then
runs S2pg's round trips (one thread at a time) or S6pg's (64 tasks at once) against it once
per source tree given, the trees taken in turn repetition by repetition so that the machine's
slow spells land on all of them. Each run is a fresh process and a fresh database migrated by
that tree. Prints, per tree, the median and the range over the repetitions of:

* the server's CPU (every PostgreSQL process: its backends, the WAL writer, the
  checkpointer...) per round trip, from ``/proc`` (utime + stime, reaped children included);
* the time the server spent executing ``interlock_append`` per call (``pg_stat_statements``),
  overall and by the shape of the append (plain, raising interrupts, resolving them);
* round trips per second and the client's own CPU per round trip.

Usage::

    python bench/pg_append_cost.py src /path/to/other/checkout/src --reps 5
    python bench/pg_append_cost.py src --scenario S6pg --durable
    python bench/pg_append_cost.py src --patch experiment.sql   # applied after migrating
    python bench/pg_append_cost.py src --nested   # also the statements inside the function

``--durable`` keeps ``synchronous_commit`` as interlock sets it (two WAL flushes per round
trip); the default turns it off for every transaction, so that the figures are the server's
CPU and not the disk's flushes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
_TICK = os.sysconf("SC_CLK_TCK")


def server_cpu_s(data_dir: Path) -> float:
    """CPU seconds the server's processes have used: the postmaster's own and its reaped
    children's, and its live children's."""
    pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    total = _cpu_fields(pid, with_children=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # the process ended while we looked
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _cpu_fields(pid: int, *, with_children: bool) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11 : 15 if with_children else 13])


# -- the child: one run of one tree --------------------------------------------------------------


def child(spec: dict[str, Any]) -> None:
    sys.path.insert(0, spec["src"])
    import anyio
    import psycopg

    import interlock
    from interlock.stores._postgres_schema import migrate

    if not interlock.__file__ or not interlock.__file__.startswith(spec["src"]):
        raise SystemExit(f"imported interlock from {interlock.__file__}, not {spec['src']}")
    import _interlock_side as side
    from _common import pg_dsn

    dsn = pg_dsn(spec["dsn"], not spec["durable"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
        if spec["patch"]:
            conn.execute(Path(spec["patch"]).read_text())
    data_dir = Path(spec["data_dir"])
    params = dict(spec["params"])
    with psycopg.connect(spec["admin"], autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    server0 = server_cpu_s(data_dir)
    client0 = time.process_time()
    wall0 = time.perf_counter()
    run = side._s6 if spec["scenario"] == "S6pg" else side._s2
    metrics, _ = anyio.run(_run_on, run, params, dsn)
    wall = time.perf_counter() - wall0
    client = time.process_time() - client0
    time.sleep(0.2)  # let the backends exit and be reaped
    server = server_cpu_s(data_dir) - server0
    if spec["scenario"] == "S6pg":
        trips = params["threads"] * (params["rounds"] + params["warmup"])
    else:
        trips = params["threads"] + params["warmup"]
    with psycopg.connect(spec["admin"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT calls, total_exec_time FROM pg_stat_statements s JOIN pg_database d "
            "ON d.oid = s.dbid WHERE d.datname = %s AND toplevel "
            "AND query LIKE 'SELECT interlock_append(%%' ORDER BY mean_exec_time DESC",
            (spec["db"],),
        ).fetchall()
        nested = conn.execute(
            "SELECT calls, total_exec_time, query FROM pg_stat_statements s JOIN pg_database d "
            "ON d.oid = s.dbid WHERE d.datname = %s AND NOT toplevel "
            "ORDER BY total_exec_time DESC LIMIT 15",
            (spec["db"],),
        ).fetchall()
    calls = sum(int(r[0]) for r in rows)
    # psycopg sends an empty list as NULL, of unknown type, so each shape of append (plain,
    # raising interrupts, resolving them) is a statement of its own there.
    by_statement = [round(float(t) * 1e3 / int(n), 1) for n, t in rows if n]
    out = {
        "server_ms_per_rt": server * 1e3 / trips,
        "client_ms_per_rt": client * 1e3 / trips,
        "round_trips_per_s": trips / wall,
        "appends_per_rt": calls / trips,
        "append_us": sum(float(r[1]) for r in rows) * 1e3 / max(calls, 1),
        "violations": metrics.get("s2_violations", metrics.get("s6_violations", 0.0)),
    }
    inside = [
        [int(n), round(float(t), 1), round(float(t) * 1e3 / int(n), 1), " ".join(str(q).split())]
        for n, t, q in nested
        if n
    ]
    print(json.dumps({**out, "append_us_by_statement": by_statement, "nested": inside}))


async def _run_on(run: Any, params: dict[str, Any], dsn: str) -> tuple[dict[str, float], Any]:
    from interlock.stores import PostgresStore

    result: tuple[dict[str, float], Any] = await run(params, PostgresStore(dsn))
    return result


# -- the parent: a server, the trees in turn ---------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="*", help="interlock source folders (each holding interlock/)")
    ap.add_argument("--scenario", choices=("S2pg", "S6pg"), default="S2pg")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--round-trips", type=int, default=300, help="S2pg's threads")
    ap.add_argument("--rounds", type=int, default=5, help="S6pg's rounds per task")
    ap.add_argument("--durable", action="store_true", help="keep synchronous_commit on")
    ap.add_argument("--patch", help="SQL run after migrating, in every tree's database")
    ap.add_argument(
        "--nested",
        action="store_true",
        help="count the statements run inside functions too (pg_stat_statements.track = all, "
        "which adds its own cost to each) and print the costliest of the last repetition",
    )
    ap.add_argument(
        "--instructions",
        action="store_true",
        help="instead, count the client's instructions per S2pg round trip under callgrind "
        "(a run of --round-trips less one of a tenth as many, per tree and repetition)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    if not args.trees:
        ap.error("name at least one source folder")
    if args.scenario == "S6pg":
        params = {"threads": 64, "rounds": args.rounds, "warmup": 1}
    else:
        params = {"threads": args.round_trips, "warmup": 3}
    trees = [str(Path(t).resolve()) for t in args.trees]
    results: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    nested: dict[str, list[list[Any]]] = {}
    if args.instructions:
        _count_instructions(trees, args.reps, args.round_trips, args.durable)
        return
    with _server("all" if args.nested else "top") as (dsn, data_dir):
        for rep in range(args.reps):
            for tree in trees:
                db = f"cost_{rep}_{trees.index(tree)}"
                _admin(dsn, f"CREATE DATABASE {db}")
                spec = {
                    "src": tree,
                    "dsn": dsn.replace("dbname=postgres", f"dbname={db}"),
                    "admin": dsn,
                    "db": db,
                    "data_dir": str(data_dir),
                    "scenario": args.scenario,
                    "params": params,
                    "durable": args.durable,
                    "patch": args.patch and str(Path(args.patch).resolve()),
                }
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(spec)],
                    capture_output=True, text=True, env=env, cwd=BENCH, check=False,
                )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(f"the run of {tree} failed:\n{done.stderr}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                nested[tree] = row.pop("nested")
                results[tree].append(row)
                _admin(dsn, f"DROP DATABASE {db}")
                print(f"rep {rep + 1} {tree}: {json.dumps(row)}", flush=True)
    print(f"\n{args.scenario}, {params}, synchronous_commit "
          f"{'as interlock sets it' if args.durable else 'off'}, {args.reps} repetitions: "
          "median [min, max]")  # fmt: skip
    keys = ("server_ms_per_rt", "append_us", "round_trips_per_s", "client_ms_per_rt")
    for tree, rows in results.items():
        print(tree)
        for key in keys:
            values = [r[key] for r in rows]
            print(f"  {key:20} {statistics.median(values):9.3f}  "
                  f"[{min(values):.3f}, {max(values):.3f}]")  # fmt: skip
        if args.nested:
            print("  statements inside functions (last repetition): calls, total ms, mean µs")
            for calls, total, each, query in nested[tree]:
                print(f"  {calls:8} {total:9.1f} {each:9.1f}  {query[:90]}")


def _count_instructions(trees: list[str], reps: int, round_trips: int, durable: bool) -> None:
    """Print the client's instructions per S2pg round trip for each tree (callgrind ``Ir``,
    every thread of the client; the server is not counted)."""
    import re
    import tempfile

    small = max(round_trips // 10, 1)
    counts: dict[str, list[float]] = {t: [] for t in trees}
    with _server("top") as (dsn, data_dir):
        for rep in range(reps):
            for tree in trees:
                irs = []
                for n in (small, round_trips):
                    db = f"count_{rep}_{trees.index(tree)}_{n}"
                    _admin(dsn, f"CREATE DATABASE {db}")
                    spec = {
                        "src": tree, "dsn": dsn.replace("dbname=postgres", f"dbname={db}"),
                        "admin": dsn, "db": db, "data_dir": str(data_dir), "scenario": "S2pg",
                        "params": {"threads": n, "warmup": 3}, "durable": durable, "patch": None,
                    }  # fmt: skip
                    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                    with tempfile.TemporaryDirectory() as tmp:
                        out = Path(tmp) / "callgrind.out"
                        done = subprocess.run(
                            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                             sys.executable, __file__, "--child", json.dumps(spec)],
                            capture_output=True, text=True, env=env, cwd=BENCH, check=False,
                        )  # fmt: skip
                        if done.returncode != 0:
                            raise SystemExit(f"the run of {tree} failed:\n{done.stderr[-3000:]}")
                        found = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
                        if found is None:
                            raise SystemExit("no instruction total in callgrind's output")
                        irs.append(int(found.group(1)))
                    _admin(dsn, f"DROP DATABASE {db}")
                per = (irs[1] - irs[0]) / (round_trips - small)
                counts[tree].append(per)
                print(f"rep {rep + 1} {tree}: {per:,.0f} instructions per round trip", flush=True)
    print(f"\nS2pg client instructions per round trip ({small} and {round_trips} round trips, "
          f"{reps} repetitions): median [min, max]")  # fmt: skip
    for tree, values in counts.items():
        print(f"{tree}\n  {statistics.median(values):,.0f}  [{min(values):,.0f}, "
              f"{max(values):,.0f}]")  # fmt: skip


def _admin(dsn: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


class _server:
    """A throwaway server with pg_stat_statements, as tests/_pgserver.py starts one."""

    def __init__(self, track: str) -> None:
        self._track = track

    def __enter__(self) -> tuple[str, Path]:
        import tempfile

        sys.path.insert(0, str(ROOT / "tests"))
        import _pgserver as pg

        self._pg = pg
        self._bin = pg._find_bin_dir()
        self._root = Path(tempfile.mkdtemp(prefix="interlock-pg-cost-"))
        if os.geteuid() == 0:
            import shutil

            shutil.chown(self._root, user="postgres", group="postgres")
        self._data = self._root / "data"
        pre = pg._as_unprivileged()
        pg._run([*pre, str(self._bin / "initdb"), "-D", str(self._data), "-U", "postgres",
                 "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"])  # fmt: skip
        port = pg._free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c fsync=on "
            f"-c unix_socket_directories='{self._root}' -c max_connections=200 "
            "-c shared_preload_libraries=pg_stat_statements "
            f"-c pg_stat_statements.track={self._track}"
        )
        pg._run([*pre, str(self._bin / "pg_ctl"), "-D", str(self._data), "-l",
                 str(self._root / "server.log"), "-w", "-o", options, "start"])  # fmt: skip
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        pg._wait_until_ready(dsn)
        _admin(dsn, "CREATE EXTENSION pg_stat_statements")
        return dsn, self._data

    def __exit__(self, *exc: object) -> None:
        import shutil

        pre = self._pg._as_unprivileged()
        try:
            self._pg._run([*pre, str(self._bin / "pg_ctl"), "-D", str(self._data), "stop",
                           "-m", "fast"])  # fmt: skip
        finally:
            shutil.rmtree(self._root, ignore_errors=True)


if __name__ == "__main__":
    main()
