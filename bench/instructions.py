"""The CPU path of S1, S2 and S5 in instructions, for both systems: a figure load cannot move.

    python bench/instructions.py                        # S1, S2, S5; ~6 minutes
    python bench/instructions.py --only S2 --api sync   # LangGraph's sync API only
    python bench/instructions.py --src /path/to/other/checkout/src   # interlock from another tree

`bench/compare.py` times each scenario; on a shared machine the same command gives S2 ratios
from under 5× to over 9× (docs/performance.md). This counts the instructions each side
executes per unit of work instead, under valgrind's callgrind, which does not depend on what
else the machine runs. Each side runs twice with different counts (SQLite files on a tmpfs);
the difference, divided by the extra units, is the cost of one unit without start-up, imports
and warm-up:

- S1: one node-step of a 50-node chain, checkpointing every step in memory (interlock's
  ``MemoryStore`` with ``durability="sync"``; LangGraph's ``InMemorySaver``).
- S2: one round trip of the approval graph (run to the interrupt, resume to the end), as
  compare.py's S2 runs it.
- S5: one resume of a thread waiting at the approval, 200 threads waiting in the file.
- S3: the first ``get_state`` of S3's chat in the App (graph) that has just run the turn, near
  turn 300 (1 KiB messages): both counts run the same 300 turns, and read after the last
  ``N`` of them (``--only S3``; not in the default set).
- S3fresh: the first ``get_state`` of a 300-turn chat by an App that has read nothing yet:
  the chat is written once, outside valgrind; then one store (LangGraph: one connection and
  saver) is opened on the file and the graph built, and each read compiles a new App on it
  and reads, as a fresh process does after opening its store, without the interpreter's imports
  (``--only S3fresh``; not in the default set).
- Aovh: one round trip of Aovh's ``ToolAgent`` (run to the approval, approve, run the tool,
  answer), and the same round trip of the plain graph with the same guarantees (the approved
  call run as an effect), as compare.py's Aovh runs them; printed with their ratio, the agents
  layer's overhead (``--only Aovh``; interlock only, not in the default set).

Instructions count CPU work in user space: not the kernel's part of a write or a flush, and
not the time a thread waits for another. A wall-clock ratio above the instruction ratio is
time the slower side spends waiting (LangGraph's async API hands every statement to a thread).

By default LangGraph is counted through both of its APIs (``--api both``): each interlock
figure is printed with its ratio to LangGraph's async API and to its sync API, and beside the
target the performance issue set for it (``TARGETS``: interlock's instructions per unit).

Needs valgrind (``apt install valgrind``). One JSON line: instructions per unit per side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_LANGGRAPH_PYTHON = HERE / ".venv-langgraph" / "bin" / "python"

# (smaller, larger) count per scenario, and the units one count stands for.
COUNTS = {
    "S1": (4, 12),
    "S2": (20, 60),
    "S5": (20, 60),
    "S3": (10, 30),
    "S3fresh": (5, 25),
    "Aovh": (10, 30),
    "Aovhplain": (10, 30),
}
UNITS_PER_COUNT = {"S1": 50, "S2": 1, "S5": 1, "S3": 1, "S3fresh": 1, "Aovh": 1, "Aovhplain": 1}
UNITS = {
    "S1": "node-step",
    "S2": "round trip",
    "S5": "resume",
    "S3": "first get_state after a turn (turn ~300)",
    "S3fresh": "first get_state of a fresh App (turn 300)",
    "Aovh": "agent round trip (ToolAgent)",
    "Aovhplain": "round trip of the plain graph with effects",
}
# The most interlock may spend per unit (None: no target).
TARGETS: dict[str, int | None] = {
    "S1": 150_000,
    "S2": 2_500_000,
    "S5": 1_300_000,
    "S3": None,
    "S3fresh": None,
    "Aovh": None,
    "Aovhplain": None,
}
PROPOSED_RATIOS: dict[str, float] = {"S1": 5.0, "S2": 3.0, "S5": 2.5}
"""The targets the performance page proposes instead of ``TARGETS``' absolute counts: interlock
at least this many times fewer instructions per unit than LangGraph through its sync API (the
cheaper of its two). An absolute count moves with every guarantee added to a unit; a ratio to
the peer doing the same unit does not."""
# The most the agents layer may add to the plain graph's round trip, as a fraction.
AOVH_TARGET = 0.15
AOVH_WARMUP = 3
APIS = ("async", "sync")
NODES = 50
S5_WAITING = 200
S3_TURNS = 300
S3_MESSAGE_BYTES = 1024


def s3_user(turn: int) -> dict[str, str]:
    from _common import message_text

    return {"role": "user", "content": message_text(turn, "user", S3_MESSAGE_BYTES)}


# -- the measured work (runs in the child, under valgrind) ------------------------------------


async def aovh_child(scenario: str, n: int, work: Path) -> None:
    """Aovh's round trips (the agent's, or the plain graph's with effects): warm-up, then n."""
    from _agents_interlock import (
        APPROVE,
        agent_answer,
        agent_input,
        assistant_agent,
        plain_answer,
        plain_graph,
        plain_input,
    )
    from _common import APPROVAL_REQUEST, approval_script
    from _interlock_side import round_trip

    from interlock.stores import SqliteStore

    entries: Counter[str] = Counter()
    store = SqliteStore(work / "interlock.db")
    if scenario == "Aovh":
        app = assistant_agent(approval_script(), entries).compile(store=store)
        make, answer = agent_input, agent_answer
    else:
        app = plain_graph(entries, effects=True).compile(store=store)
        make, answer = plain_input, plain_answer
    for i in range(n + AOVH_WARMUP):
        _, _, bad = await round_trip(app, f"t{i}", make(APPROVAL_REQUEST), entries, answer, APPROVE)
        assert not bad, f"round trip {i} went wrong"
    await store.close()


async def interlock_child(scenario: str, n: int, work: Path) -> None:
    from _interlock_side import approval_graph, chain_graph, chat_graph

    from interlock.stores import MemoryStore, SqliteStore

    if scenario in ("Aovh", "Aovhplain"):
        await aovh_child(scenario, n, work)
        return

    if scenario == "S3fresh":
        path = work / "interlock-chat.db"
        if n < 0:  # the build, outside valgrind
            store = SqliteStore(path)
            chat = chat_graph(S3_MESSAGE_BYTES).compile(store=store)
            for turn in range(S3_TURNS):
                await chat.run({"messages": [s3_user(turn)]}, thread="chat")
            await store.close()
            return
        store = SqliteStore(path)
        await store.open()
        graph = chat_graph(S3_MESSAGE_BYTES)
        for _ in range(n):
            snap = await graph.compile(store=store).get_state("chat")
            assert len(snap.values["messages"]) == 2 * S3_TURNS
        await store.close()
        return
    if scenario == "S3":
        store = SqliteStore(work / "interlock.db")
        chat = chat_graph(S3_MESSAGE_BYTES).compile(store=store)
        for turn in range(S3_TURNS):
            await chat.run({"messages": [s3_user(turn)]}, thread="chat")
            if turn >= S3_TURNS - n:
                snap = await chat.get_state("chat")
                assert len(snap.values["messages"]) == 2 * (turn + 1)
        await store.close()
        return

    if scenario == "S1":
        app = chain_graph(NODES).compile(
            store=MemoryStore(), durability="sync", recursion_limit=NODES + 10
        )
        for i in range(n + 1):
            r = await app.run({"n": 0}, thread=f"t{i}")
            assert r.values["n"] == NODES
        return
    executed: Counter[str] = Counter()
    store = SqliteStore(work / "interlock.db")
    app = approval_graph(executed).compile(store=store)
    if scenario == "S2":
        for i in range(n + 3):
            r = await app.run({"tid": f"t{i}"}, thread=f"t{i}")
            r = await app.resume(f"t{i}", {r.interrupt().id: True})
            assert r.status == "done"
    else:
        waiting = []
        for i in range(S5_WAITING):
            r = await app.run({"tid": f"t{i}"}, thread=f"t{i}")
            waiting.append((f"t{i}", r.interrupt().id))
        for thread, interrupt_id in waiting[:n]:
            r = await app.resume(thread, {interrupt_id: True})
            assert r.status == "done"
    await store.close()
    assert all(c == 1 for c in executed.values())


async def langgraph_child(scenario: str, n: int, work: Path, api: str) -> None:
    from _langgraph_side import (
        Runner,
        approval_graph,
        chain_graph,
        chat_graph,
        config,
        interrupts_of,
        sqlite_saver,
    )
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    if scenario == "S3fresh":
        path = work / "langgraph-chat.db"
        if n < 0:  # the build, outside valgrind
            async with sqlite_saver(path, api) as saver:  # type: ignore[arg-type]
                chat = Runner(chat_graph(S3_MESSAGE_BYTES).compile(checkpointer=saver), api)  # type: ignore[arg-type]
                for turn in range(S3_TURNS):
                    await chat.invoke({"messages": [s3_user(turn)]}, config("chat"))
            return
        graph = chat_graph(S3_MESSAGE_BYTES)
        async with sqlite_saver(path, api) as saver:  # type: ignore[arg-type]
            for _ in range(n):
                chat = Runner(graph.compile(checkpointer=saver), api)  # type: ignore[arg-type]
                snap = await chat.get_state(config("chat"))
                assert len(snap.values["messages"]) == 2 * S3_TURNS
        return
    if scenario == "S3":
        async with sqlite_saver(work / "langgraph.db", api) as saver:  # type: ignore[arg-type]
            chat = Runner(chat_graph(S3_MESSAGE_BYTES).compile(checkpointer=saver), api)  # type: ignore[arg-type]
            for turn in range(S3_TURNS):
                await chat.invoke({"messages": [s3_user(turn)]}, config("chat"))
                if turn >= S3_TURNS - n:
                    snap = await chat.get_state(config("chat"))
                    assert len(snap.values["messages"]) == 2 * (turn + 1)
        return

    if scenario == "S1":
        run = Runner(chain_graph(NODES).compile(checkpointer=InMemorySaver()), api)  # type: ignore[arg-type]
        for i in range(n + 1):
            out = await run.invoke({"n": 0}, config(f"t{i}", NODES + 10))
            assert out["n"] == NODES
        return
    executed: Counter[str] = Counter()
    async with sqlite_saver(work / "langgraph.db", api) as saver:  # type: ignore[arg-type]
        run = Runner(approval_graph(executed).compile(checkpointer=saver), api)  # type: ignore[arg-type]
        if scenario == "S2":
            for i in range(n + 3):
                (pending,) = interrupts_of(await run.invoke({"tid": f"t{i}"}, config(f"t{i}")))
                out = await run.invoke(Command(resume={pending.id: True}), config(f"t{i}"))
                assert not interrupts_of(out)
        else:
            waiting = []
            for i in range(S5_WAITING):
                (pending,) = interrupts_of(await run.invoke({"tid": f"t{i}"}, config(f"t{i}")))
                waiting.append((f"t{i}", pending.id))
            for thread, interrupt_id in waiting[:n]:
                out = await run.invoke(Command(resume={interrupt_id: True}), config(thread))
                assert not interrupts_of(out)
    assert all(c == 1 for c in executed.values())


def child(side: str, scenario: str, n: int, api: str, root: Path) -> None:
    if scenario == "S3fresh":  # reads a chat the driver had written into ``root`` (n < 0)
        if side == "interlock":
            asyncio.run(interlock_child(scenario, n, root))
        else:
            asyncio.run(langgraph_child(scenario, n, root, api))
        return
    work = Path(tempfile.mkdtemp(dir=root))
    try:
        if side == "interlock":
            asyncio.run(interlock_child(scenario, n, work))
        else:
            asyncio.run(langgraph_child(scenario, n, work, api))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the driver ---------------------------------------------------------------------------------


def instructions(
    python: str, side: str, scenario: str, n: int, api: str, env: dict[str, str], root: Path
) -> int:
    """Instructions (``Ir``) one child run executes, all threads included."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            python,
            str(Path(__file__).resolve()),
            "--child",
            side,
            scenario,
            str(n),
            "--api",
            api,
            "--work",
            str(root),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{side} {scenario} n={n} failed:\n{done.stderr[-3000:]}")
        found = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit(f"no instruction total in callgrind's output for {side} {scenario}")
        return int(found.group(1))


def build(python: str, side: str, scenario: str, api: str, env: dict[str, str], root: Path) -> None:
    """Write what a scenario's counted runs read (S3fresh's chat), without valgrind."""
    for old in root.glob(f"{side}-chat.db*"):  # another API's chat
        old.unlink()
    cmd = [python, str(Path(__file__).resolve()), "--child", side, scenario, "-1"]
    cmd += ["--api", api, "--work", str(root)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"building {side} {scenario} failed:\n{done.stderr[-3000:]}")


def per_unit(
    python: str, side: str, scenario: str, api: str, env: dict[str, str], root: Path
) -> float:
    if scenario == "S3fresh":
        build(python, side, scenario, api, env, root)
    small, large = COUNTS[scenario]
    a = instructions(python, side, scenario, small, api, env, root)
    b = instructions(python, side, scenario, large, api, env, root)
    return (b - a) / ((large - small) * UNITS_PER_COUNT[scenario])


def report_line(scenario: str, il: float, lg: dict[str, float], target: int | None) -> str:
    """One scenario's figures: interlock's count, LangGraph's per API with the ratio, the target."""
    peers = ", ".join(f"LangGraph {api} {n:,.0f} ({n / il:.2f}×)" for api, n in lg.items())
    verdict = (
        "" if target is None else f"; target ≤ {target:,}: {'PASS' if il <= target else 'FAIL'}"
    )
    proposed = PROPOSED_RATIOS.get(scenario)
    if proposed is not None and "sync" in lg:
        passed = lg["sync"] / il >= proposed
        verdict += f"; proposed ≥ {proposed}× LangGraph sync: {'PASS' if passed else 'FAIL'}"
    return f"{scenario}: {UNITS[scenario]}: interlock {il:,.0f}; {peers}{verdict}"


def aovh_figures(env: dict[str, str], root: Path) -> dict[str, Any]:
    """The agent's and the plain graph's round trip, and the agents layer's share."""
    agent = per_unit(sys.executable, "interlock", "Aovh", "async", env, root)
    plain = per_unit(sys.executable, "interlock", "Aovhplain", "async", env, root)
    over = agent / plain - 1
    return {
        "unit": UNITS["Aovh"],
        "agent": round(agent),
        "plain_with_effects": round(plain),
        "overhead": round(over, 3),
        "target": AOVH_TARGET,
        "pass": over <= AOVH_TARGET,
    }


def aovh_line(f: dict[str, Any]) -> str:
    """Aovh's figures: both round trips and the agents layer's overhead against its target."""
    verdict = "PASS" if f["pass"] else "FAIL"
    return (
        f"Aovh: round trip: ToolAgent {f['agent']:,}; plain graph with effects "
        f"{f['plain_with_effects']:,}; overhead {f['overhead']:.1%}; "
        f"target ≤ {f['target']:.0%}: {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", default="S1,S2,S5", help="comma-separated: S1, S2, S5, S3, S3fresh, Aovh"
    )
    parser.add_argument(
        "--api",
        default="both",
        choices=("both", *APIS),
        help="LangGraph's API (default both: a ratio to each)",
    )
    parser.add_argument("--langgraph-python", default=str(DEFAULT_LANGGRAPH_PYTHON))
    parser.add_argument("--src", type=Path, help="measure this interlock source tree instead")
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--child", nargs=3, metavar=("SIDE", "SCENARIO", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.child:
        side, scenario, n = args.child
        child(side, scenario, int(n), args.api, args.work)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt install valgrind")
    if not Path(args.langgraph_python).exists():
        raise SystemExit(
            f"no LangGraph interpreter at {args.langgraph_python}: see bench/README.md"
        )
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(args.src.resolve()), env.get("PYTHONPATH", "")])
    scenarios = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in COUNTS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose from {sorted(COUNTS)}")
    from compare import tmpfs_root  # the driver's interpreter has compare.py's imports

    root = tmpfs_root()  # says what to do when there is no tmpfs; never falls back to a disk
    apis = APIS if args.api == "both" else (args.api,)
    result: dict[str, Any] = {"langgraph_api": list(apis)}
    try:
        for scenario in scenarios:
            if scenario in ("Aovh", "Aovhplain"):
                if scenario == "Aovhplain" and "Aovh" in scenarios:
                    continue  # counted with Aovh
                result["Aovh"] = aovh_figures(env, root)
                print(aovh_line(result["Aovh"]))
                continue
            il = per_unit(sys.executable, "interlock", scenario, "async", env, root)
            lg = {
                api: per_unit(args.langgraph_python, "langgraph", scenario, api, env, root)
                for api in apis
            }
            target = TARGETS[scenario]
            result[scenario] = {
                "unit": UNITS[scenario],
                "interlock": round(il),
                "langgraph": {api: round(n) for api, n in lg.items()},
                "ratio": {api: round(n / il, 2) for api, n in lg.items()},
                "target": target,
                "pass": None if target is None else il <= target,
                "proposed_ratio": PROPOSED_RATIOS.get(scenario),
            }
            print(report_line(scenario, il, lg, target))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
