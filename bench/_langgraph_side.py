"""The LangGraph side of bench/compare.py: one scenario per process, one JSON line out.

Runs in ``bench/.venv-langgraph`` (langgraph 1.2.22 + langgraph-checkpoint-sqlite) and must
never import interlock. Each graph mirrors the one in ``_interlock_side.py`` node for node.

``params["api"]`` picks LangGraph's sync API (``invoke`` with ``InMemorySaver``/``SqliteSaver``)
or its async API (``ainvoke`` with ``InMemorySaver``/``AsyncSqliteSaver`` on aiosqlite);
compare.py passes the faster one per scenario (see bench/README.md). Every scenario is written
as a coroutine either way: in sync mode the coroutine just calls the blocking method, so no
event-loop machinery sits between the timer and LangGraph.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any, Literal, TypedDict

import aiosqlite
from _common import (
    db_sizes,
    emit,
    mean,
    message_text,
    peak_rss_kib,
    percentile,
    read_spec,
    refuse_foreign,
    thread_id,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, Send, interrupt

SIDE = "langgraph"
Api = Literal["sync", "async"]
INTERRUPT_CHANNEL = "__interrupt__"


# -- graphs ------------------------------------------------------------------------------------


class ChainState(TypedDict):
    n: int


def chain_graph(nodes: int) -> StateGraph[ChainState]:
    """S1: ``nodes`` nodes in a line, each ``n += 1``."""

    def inc(state: ChainState) -> dict[str, Any]:
        return {"n": state["n"] + 1}

    g = StateGraph(ChainState)
    prev = START
    for i in range(nodes):
        g.add_node(f"n{i}", inc)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g


class ApprovalState(TypedDict, total=False):
    tid: str
    log: Annotated[list[str], operator.add]
    approved: bool


def approval_graph(executed: Counter[str]) -> StateGraph[ApprovalState]:
    """S2, S5: agent → approve (interrupt) → execute; ``executed`` counts execute per thread."""

    def agent(state: ApprovalState) -> dict[str, Any]:
        return {"log": ["agent"]}

    def gate(state: ApprovalState) -> dict[str, Any]:
        # The same payload interlock's approve() stores.
        question = f"run the command for {state['tid']}?"
        ok = bool(interrupt({"type": "approval", "question": question, "details": None}))
        return {"approved": ok, "log": ["approved" if ok else "rejected"]}

    def execute(state: ApprovalState) -> dict[str, Any]:
        executed[state["tid"]] += 1
        return {"log": ["executed"]}

    def route(state: ApprovalState) -> str:
        return "execute" if state["approved"] else END

    g = StateGraph(ApprovalState)
    g.add_node("agent", agent)
    g.add_node("approve", gate)
    g.add_node("execute", execute)
    g.add_edge(START, "agent")
    g.add_edge("agent", "approve")
    g.add_conditional_edges("approve", route, ["execute", END])
    g.add_edge("execute", END)
    return g


class ChatState(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], operator.add]


def chat_graph(message_bytes: int) -> StateGraph[ChatState]:
    """S3: one ``assistant`` node that appends a reply to the user's message."""

    def assistant(state: ChatState) -> dict[str, Any]:
        turn = len(state["messages"]) // 2
        reply = {"role": "assistant", "content": message_text(turn, "assistant", message_bytes)}
        return {"messages": [reply]}

    g = StateGraph(ChatState)
    g.add_node("assistant", assistant)
    g.add_edge(START, "assistant")
    g.add_edge("assistant", END)
    return g


class FanState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def fan_graph(tasks: int, entries: Counter[int]) -> StateGraph[FanState]:
    """S4: ``fan`` sends ``tasks`` workers that each ask for approval, then ``join``."""

    def fan(state: FanState) -> dict[str, Any]:
        return {"log": ["fan"]}

    def route(state: FanState) -> list[Send]:
        return [Send("worker", {"i": i}) for i in range(tasks)]

    def worker(state: Any) -> dict[str, Any]:  # receives the Send payload, not FanState
        i = int(state["i"])
        entries[i] += 1
        question = f"run item {i}?"
        ok = bool(interrupt({"type": "approval", "question": question, "details": {"item": i}}))
        return {"log": [f"w{i}:{ok}"]}

    def join(state: FanState) -> dict[str, Any]:
        return {"log": ["join"]}

    g = StateGraph(FanState)
    g.add_node("fan", fan)
    g.add_node("worker", worker)
    g.add_node("join", join)
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", route, ["worker"])
    g.add_edge("worker", "join")
    g.add_edge("join", END)
    return g


# -- running -----------------------------------------------------------------------------------


class Runner:
    """A compiled graph and the API (sync or async) every call goes through."""

    def __init__(self, app: CompiledStateGraph[Any, Any, Any, Any], api: Api) -> None:
        self.app = app
        self.api = api

    async def invoke(self, value: Any, config: RunnableConfig) -> dict[str, Any]:
        if self.api == "sync":
            out = self.app.invoke(value, config)
        else:
            out = await self.app.ainvoke(value, config)
        assert isinstance(out, dict)
        return out

    async def history_page(self, config: RunnableConfig, limit: int, before: Any) -> list[Any]:
        if self.api == "sync":
            return list(self.app.get_state_history(config, limit=limit, before=before))
        return [s async for s in self.app.aget_state_history(config, limit=limit, before=before)]

    async def get_state(self, config: RunnableConfig) -> Any:
        if self.api == "sync":
            return self.app.get_state(config)
        return await self.app.aget_state(config)


@asynccontextmanager
async def sqlite_saver(path: Path, api: Api) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """A SQLite checkpointer on ``path`` (WAL, set by the saver; ``synchronous=FULL``)."""
    if api == "sync":
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            conn.execute("PRAGMA synchronous = FULL")  # SQLite's default; stated, not assumed
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        async with aiosqlite.connect(path) as aconn:
            await aconn.execute("PRAGMA synchronous = FULL")
            yield AsyncSqliteSaver(aconn)


def config(thread: str, recursion_limit: int = 25) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}, "recursion_limit": recursion_limit}


def interrupts_of(out: dict[str, Any]) -> list[Interrupt]:
    return list(out.get(INTERRUPT_CHANNEL, ()))


# -- scenarios ---------------------------------------------------------------------------------


async def s1(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    nodes, threads, api = p["nodes"], p["threads"], p["api"]
    graph = chain_graph(nodes)
    metrics: dict[str, float] = {}
    savers: list[tuple[str, InMemorySaver | None]] = [("ckpt", InMemorySaver()), ("nockpt", None)]
    for name, saver in savers:
        run = Runner(graph.compile(checkpointer=saver), api)
        await run.invoke({"n": 0}, config("warmup", nodes + 10))
        start = perf_counter()
        for i in range(threads):
            out = await run.invoke({"n": 0}, config(thread_id(i), nodes + 10))
            if out["n"] != nodes:
                raise AssertionError(f"chain ended with n={out['n']}")
        metrics[f"s1_steps_per_s_{name}"] = nodes * threads / (perf_counter() - start)
    info = {
        "ckpt": "InMemorySaver, default durability ('async')",
        "nockpt": "compiled without a checkpointer",
    }
    return metrics, info


async def s2(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    async with sqlite_saver(work / "s2-langgraph.db", p["api"]) as saver:
        metrics = await _s2(p, saver)
    saver_name = "SqliteSaver" if p["api"] == "sync" else "AsyncSqliteSaver"
    info = {"api": f"{p['api']} ({saver_name}), default durability", "store": "synchronous=FULL"}
    return metrics, info


async def s2pg(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncPostgresSaver.from_conn_string(p["dsn"]) as saver:
        await saver.setup()
        metrics = await _s2({**p, "api": "async"}, saver)
    return metrics, {"api": "async (AsyncPostgresSaver), default durability"}


async def _s2(p: dict[str, Any], saver: BaseCheckpointSaver[Any]) -> dict[str, float]:
    threads, warmup, api = p["threads"], p["warmup"], p["api"]
    executed: Counter[str] = Counter()
    run = Runner(approval_graph(executed).compile(checkpointer=saver), api)
    for i in range(warmup):
        t = f"warmup-{i}"
        await run.invoke({"tid": t}, config(t))
        await run.invoke(Command(resume=True), config(t))
    run_s: list[float] = []
    resume_s: list[float] = []
    violations = 0
    for i in range(threads):
        t = thread_id(i)
        cfg = config(t)
        t0 = perf_counter()
        out = await run.invoke({"tid": t}, cfg)
        t1 = perf_counter()
        (pending,) = interrupts_of(out)
        if executed[t] != 0:
            violations += 1
        out = await run.invoke(Command(resume={pending.id: True}), cfg)
        t2 = perf_counter()
        if interrupts_of(out) or executed[t] != 1 or out["log"][-1] != "executed":
            violations += 1
        run_s.append(t1 - t0)
        resume_s.append(t2 - t1)
    violations += sum(1 for t, n in executed.items() if n != 1)
    total = sum(run_s) + sum(resume_s)
    return {
        "s2_round_trips_per_s": threads / total,
        "s2_resume_p50_ms": percentile(resume_s, 0.5) * 1e3,
        "s2_run_p50_ms": percentile(run_s, 0.5) * 1e3,
        "s2_violations": float(violations),
    }


async def s3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    turns, window, size, page, api = (
        p["turns"],
        p["window"],
        p["message_bytes"],
        p["page"],
        p["api"],
    )
    graph = chat_graph(size)

    async def chat(path: Path, n: int) -> list[float]:
        times = []
        async with sqlite_saver(path, api) as saver:
            run = Runner(graph.compile(checkpointer=saver), api)
            for turn in range(n):
                user = {"role": "user", "content": message_text(turn, "user", size)}
                t0 = perf_counter()
                out = await run.invoke({"messages": [user]}, config("chat"))
                times.append(perf_counter() - t0)
        if len(out["messages"]) != 2 * n:
            raise AssertionError(f"{len(out['messages'])} messages after {n} turns")
        return times

    await chat(work / "s3-langgraph-warmup.db", 2)
    path = work / "s3-langgraph.db"
    times = await chat(path, turns)
    main_bytes, wal_bytes = db_sizes(path)
    raw = 2 * turns * size

    async with sqlite_saver(path, api) as saver:
        run = Runner(graph.compile(checkpointer=saver), api)
        start = perf_counter()
        before = None
        checkpoints = 0
        while True:
            snapshots = await run.history_page(config("chat"), page, before)
            if not snapshots:
                break
            checkpoints += len(snapshots)
            before = snapshots[-1].config
        history_s = perf_counter() - start

    early, late = mean(times[:window]), mean(times[-window:])
    metrics = {
        "s3_db_ratio": main_bytes / raw,
        "s3_db_mib": main_bytes / 2**20,
        "s3_wal_kib": wal_bytes / 1024,
        "s3_growth": late / early,
        "s3_turn_ms_early": early * 1e3,
        "s3_turn_ms_late": late * 1e3,
        "s3_history_s": history_s,
    }
    info = {
        "reducer": "operator.add on list[dict] (not add_messages)",
        "checkpoints_read": checkpoints,
        "raw_message_bytes": raw,
        "history": f"get_state_history(limit={page}, before=...) until empty",
    }
    return metrics, info


async def s4(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    tasks, partial, api = p["tasks"], p["partial"], p["api"]
    entries: Counter[int] = Counter()
    graph = fan_graph(tasks, entries)
    metrics: dict[str, float] = {}
    async with sqlite_saver(work / "s4-langgraph.db", api) as saver:
        run = Runner(graph.compile(checkpointer=saver), api)
        await fan_round(run, "warmup", tasks, partial, entries)
        m = await fan_round(run, "measured", tasks, partial, entries)
        metrics.update({f"s4_{k}": v for k, v in m.items()})
    mem_api: Api = p.get("mem_api", api)
    run = Runner(graph.compile(checkpointer=InMemorySaver()), mem_api)
    await fan_round(run, "warmup", tasks, partial, entries)
    m = await fan_round(run, "measured", tasks, partial, entries)
    metrics.update({f"s4_mem_{k}": v for k, v in m.items()})
    info = {"stores": "SqliteSaver/AsyncSqliteSaver (s4_*), InMemorySaver (s4_mem_*)"}
    return metrics, info


async def fan_round(
    run: Runner, tag: str, tasks: int, partial: int, entries: Counter[int]
) -> dict[str, float]:
    def item(i: Interrupt) -> int:
        return int(i.value["details"]["item"])

    # One run to 50 interrupts, then one resume answering all of them.
    cfg = config(f"{tag}-all")
    t0 = perf_counter()
    out = await run.invoke({}, cfg)
    t1 = perf_counter()
    pending = interrupts_of(out)
    if len(pending) != tasks:
        raise AssertionError(f"expected {tasks} interrupts, got {len(pending)}")
    out = await run.invoke(Command(resume={i.id: True for i in pending}), cfg)
    t2 = perf_counter()
    if interrupts_of(out) or len(out["log"]) != tasks + 2:
        raise AssertionError("fan-out did not finish")

    # The same, answering ``partial`` first and the rest in a second call.
    cfg = config(f"{tag}-partial")
    pending = interrupts_of(await run.invoke({}, cfg))
    first, rest = pending[:partial], pending[partial:]
    waiting = {item(i) for i in rest}
    before = {i: entries[i] for i in waiting}
    t3 = perf_counter()
    out = await run.invoke(Command(resume={i.id: True for i in first}), cfg)
    t4 = perf_counter()
    reentries = sum(entries[i] - before[i] for i in waiting)
    pending = interrupts_of(out)
    if {item(i) for i in pending} != waiting:
        raise AssertionError("the partial resume did not leave exactly the unanswered ones")
    out = await run.invoke(Command(resume={i.id: True for i in pending}), cfg)
    t5 = perf_counter()
    if interrupts_of(out) or len(out["log"]) != tasks + 2:
        raise AssertionError("partial fan-out did not finish")
    return {
        "interrupt_ms": (t1 - t0) * 1e3,
        "resume_all_ms": (t2 - t1) * 1e3,
        "partial_pair_ms": (t4 - t3 + t5 - t4) * 1e3,
        "reentries": float(reentries),
    }


async def s5_build(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    executed: Counter[str] = Counter()
    api: Api = p["api"]
    ids = [thread_id(i) for i in range(p["threads"])]
    start = perf_counter()
    async with sqlite_saver(work / "s5-langgraph.db", api) as saver:
        run = Runner(approval_graph(executed).compile(checkpointer=saver), api)
        for t in ids:
            if not interrupts_of(await run.invoke({"tid": t}, config(t))):
                raise AssertionError(f"thread {t} did not stop at the approval")
    build_s = perf_counter() - start
    # LangGraph keeps no list of threads: the application must (here: a JSON file).
    (work / "s5-langgraph-threads.json").write_text(json.dumps(ids))
    return {"s5_build_s": build_s}, {}


Listed = list[tuple[str, Interrupt]]


async def list_by_get_state(run: Runner, saver: BaseCheckpointSaver[Any], work: Path) -> Listed:
    """Per thread id (from the application's registry): ``get_state().interrupts``."""
    found: Listed = []
    for t in json.loads((work / "s5-langgraph-threads.json").read_text()):
        found.extend((t, i) for i in (await run.get_state(config(t))).interrupts)
    return found


async def list_by_get_tuple(run: Runner, saver: BaseCheckpointSaver[Any], work: Path) -> Listed:
    """Per thread id: the latest checkpoint tuple's pending ``__interrupt__`` writes."""
    found: Listed = []
    for t in json.loads((work / "s5-langgraph-threads.json").read_text()):
        cfg = config(t)
        tup = saver.get_tuple(cfg) if run.api == "sync" else await saver.aget_tuple(cfg)
        found.extend((t, i) for i in _interrupts_of_tuple(tup))
    return found


async def list_by_scan(run: Runner, saver: BaseCheckpointSaver[Any], work: Path) -> Listed:
    """No thread registry: every checkpoint of the file, newest first, keeping each thread's
    latest and its pending ``__interrupt__`` writes."""
    found: Listed = []
    seen: set[str] = set()

    def take(tup: CheckpointTuple) -> None:
        t = tup.config["configurable"]["thread_id"]
        if t not in seen:
            seen.add(t)
            found.extend((t, i) for i in _interrupts_of_tuple(tup))

    if run.api == "sync":
        for tup in saver.list(None):
            take(tup)
    else:
        async for tup in saver.alist(None):
            take(tup)
    return found


def _interrupts_of_tuple(tup: CheckpointTuple | None) -> list[Interrupt]:
    if tup is None:
        return []
    out: list[Interrupt] = []
    for _task, channel, value in tup.pending_writes or ():
        if channel == INTERRUPT_CHANNEL:
            out.extend(value if isinstance(value, list | tuple) else [value])
    return out


LISTINGS: dict[str, Callable[[Runner, BaseCheckpointSaver[Any], Path], Any]] = {
    "get_state": list_by_get_state,
    "get_tuple": list_by_get_tuple,
    "scan": list_by_scan,
}


async def s5_serve(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    n, api, list_api, listing = p["threads"], p["api"], p["list_api"], p["listing"]
    path = work / "s5-langgraph.db"
    executed: Counter[str] = Counter()
    graph = approval_graph(executed)
    # Listing and resuming may each use the API that is faster for them (own connections).
    t0 = perf_counter()
    async with sqlite_saver(path, list_api) as saver:
        run = Runner(graph.compile(checkpointer=saver), list_api)
        inbox: Listed = await LISTINGS[listing](run, saver, work)
    t1 = perf_counter()
    async with sqlite_saver(path, api) as saver:
        run = Runner(graph.compile(checkpointer=saver), api)
        for t, pending in inbox:
            out = await run.invoke(Command(resume={pending.id: True}), config(t))
            if interrupts_of(out):
                raise AssertionError(f"thread {t} did not finish")
        t2 = perf_counter()
    threads = {t for t, _ in inbox}
    errors = abs(len(inbox) - n) + abs(len(threads) - n) + abs(sum(executed.values()) - n)
    errors += sum(1 for c in executed.values() if c != 1)
    metrics = {
        "s5_list_s": t1 - t0,
        "s5_resume_all_s": t2 - t1,
        "s5_peak_rss_mib": peak_rss_kib() / 1024,
        "s5_errors": float(errors),
    }
    info = {"listing": f"{listing} ({list_api}): {LISTINGS[listing].__doc__}", "api": api}
    return metrics, info


SCENARIOS = {
    ("S1", "run"): s1,
    ("S2", "run"): s2,
    ("S2pg", "run"): s2pg,
    ("S3", "run"): s3,
    ("S4", "run"): s4,
    ("S5", "build"): s5_build,
    ("S5", "serve"): s5_serve,
}


def main() -> None:
    refuse_foreign("interlock")
    spec = read_spec()
    fn = SCENARIOS[(spec["scenario"], spec.get("phase", "run"))]
    metrics, info = asyncio.run(fn(spec["params"], Path(spec["workdir"])))
    from importlib.metadata import version

    emit(SIDE, spec, metrics, {"langgraph": version("langgraph"), **info})


if __name__ == "__main__":
    main()
