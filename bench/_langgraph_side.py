"""The LangGraph side of bench/compare.py: one scenario per process, one JSON line out.

Runs in ``bench/.venv-langgraph`` (langgraph 1.2.22 + langgraph-checkpoint-sqlite; langchain
1.5.2 for the agent scenarios, whose agents are in ``_agents_langgraph.py``) and must never import
interlock. Each graph mirrors the one in ``_interlock_side.py`` node for node.

``params["api"]`` picks LangGraph's sync API (``invoke`` with ``InMemorySaver``/``SqliteSaver``)
or its async API (``ainvoke`` with ``InMemorySaver``/``AsyncSqliteSaver`` on aiosqlite);
compare.py passes the faster one per scenario (see bench/README.md). Every scenario is written
as a coroutine either way: in sync mode the coroutine just calls the blocking method, so no
event-loop machinery sits between the timer and LangGraph.
"""

from __future__ import annotations

import asyncio
import gc
import json
import operator
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any, Literal, TypedDict

import aiosqlite
from _common import (
    APPROVAL_ANSWER,
    APPROVAL_REQUEST,
    GATED_TOOL,
    PARALLEL_REQUEST,
    AnonymousPeak,
    approval_script,
    chat_script,
    chat_user,
    check_chat,
    db_bytes,
    db_sizes,
    emit,
    mean,
    message_text,
    parallel_tools,
    peak_rss_kib,
    percentile,
    pg_dsn,
    raw_message_bytes,
    read_spec,
    refuse_foreign,
    s3_checkpoints,
    s3_state_file,
    s6_metrics,
    s6_thread,
    snapshot_db,
    thread_id,
    wal_flushes,
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
    """S2 on PostgreSQL, with the server's WAL flushes per round trip (``pg_stat_wal``); the
    ``off`` phase runs with ``synchronous_commit=off`` for every transaction, its metrics
    named ``s2off_*``."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    lazy = p.get("synchronous_commit") == "off"
    dsn = pg_dsn(p["dsn"], lazy)
    before = wal_flushes(dsn)
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        metrics = await _s2({**p, "api": "async"}, saver)
    after = wal_flushes(dsn)
    metrics["s2_wal_flushes_per_rt"] = (after - before) / (p["threads"] + p["warmup"])
    info = {"api": "async (AsyncPostgresSaver), default durability"}
    if lazy:
        metrics = {k.replace("s2_", "s2off_", 1): v for k, v in metrics.items()}
        info["store"] = "synchronous_commit=off"
    return metrics, info


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


async def s6(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    async with sqlite_saver(work / "s6-langgraph.db", "async") as saver:
        metrics = await _s6(p, saver)
    info = {
        "api": f"async (AsyncSqliteSaver), default durability, {p['threads']} tasks",
        "store": "synchronous=FULL, one aiosqlite connection",
    }
    return metrics, info


S6_POOL = 10
"""Connections of LangGraph's pool in S6pg (AsyncPostgresSaver shares one otherwise)."""


async def s6pg(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    async with AsyncPostgresSaver.from_conn_string(p["dsn"]) as saver:
        await saver.setup()
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(
        p["dsn"], min_size=S6_POOL, max_size=S6_POOL, kwargs=kwargs, open=False
    ) as pool:
        metrics = await _s6(p, AsyncPostgresSaver(pool))  # type: ignore[arg-type]
    info = {"api": f"async (AsyncPostgresSaver on a pool of {S6_POOL}), default durability"}
    return metrics, info


async def _s6(p: dict[str, Any], saver: BaseCheckpointSaver[Any]) -> dict[str, float]:
    """S6: ``threads`` tasks at once, each doing ``rounds`` approval round trips in a row."""
    tasks, rounds, warmup = p["threads"], p["rounds"], p["warmup"]
    executed: Counter[str] = Counter()
    run = Runner(approval_graph(executed).compile(checkpointer=saver), "async")
    round_s: list[float] = []
    violations = 0

    async def one(task: int, r: int, timed: bool) -> None:
        nonlocal violations
        t = s6_thread(task, r) if timed else f"warmup-{task}-{r}"
        cfg = config(t)
        t0 = perf_counter()
        out = await run.invoke({"tid": t}, cfg)
        pending = interrupts_of(out)
        if len(pending) != 1 or executed[t] != 0:
            violations += 1
            return
        out = await run.invoke(Command(resume={pending[0].id: True}), cfg)
        if timed:
            round_s.append(perf_counter() - t0)
        if interrupts_of(out) or executed[t] != 1 or out["log"][-1] != "executed":
            violations += 1

    async def task_of(task: int, n: int, timed: bool) -> None:
        for r in range(n):
            await one(task, r, timed)

    async def all_tasks(n: int, timed: bool) -> None:
        await asyncio.gather(*(task_of(task, n, timed) for task in range(tasks)))

    await all_tasks(warmup, False)
    start = perf_counter()
    await all_tasks(rounds, True)
    wall = perf_counter() - start
    violations += sum(1 for n in executed.values() if n != 1)
    return s6_metrics(round_s, wall, violations)


async def s3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    turns, window, size, page, api = (
        p["turns"],
        p["window"],
        p["message_bytes"],
        p["page"],
        p["api"],
    )
    graph = chat_graph(size)

    async def chat(
        path: Path, n: int, copies: dict[int, Path], marks: tuple[int, ...] = ()
    ) -> tuple[list[float], dict[str, float]]:
        times = []
        first: dict[str, float] = {}
        async with sqlite_saver(path, api) as saver:
            run = Runner(graph.compile(checkpointer=saver), api)
            for turn in range(n):
                user = {"role": "user", "content": message_text(turn, "user", size)}
                t0 = perf_counter()
                out = await run.invoke({"messages": [user]}, config("chat"))
                times.append(perf_counter() - t0)
                if turn + 1 in marks:  # the first read in the graph that has just run the turn
                    t1 = perf_counter()
                    snap = await run.get_state(config("chat"))
                    first[f"s3_get_state_first_ms_t{turn + 1}"] = (perf_counter() - t1) * 1e3
                    check_chat(snap.values["messages"], turn + 1, size)
                if turn + 1 in copies:  # untimed: the chat as it is after this turn, for "state"
                    snapshot_db(path, copies[turn + 1])
        if len(out["messages"]) != 2 * n:
            raise AssertionError(f"{len(out['messages'])} messages after {n} turns")
        return times, first

    await chat(work / "s3-langgraph-warmup.db", 2, {}, (1, 2))
    path = work / "s3-langgraph.db"
    marks = s3_checkpoints(turns)
    copies = {at: s3_state_file(work, SIDE, at, turns) for at in marks[:-1]}
    times, first = await chat(path, turns, copies, marks)
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
        **first,
    }
    info = {
        "reducer": "operator.add on list[dict] (not add_messages)",
        "checkpoints_read": checkpoints,
        "raw_message_bytes": raw,
        "history": f"get_state_history(limit={page}, before=...) until empty",
    }
    return metrics, info


async def s3_state(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """A fresh process reads the chat's latest state at turn ``at``: the first call, then the
    median of ``state_reads`` more."""
    at, size, reads, api = p["at"], p["message_bytes"], p["state_reads"], p["api"]
    t0 = perf_counter()
    async with sqlite_saver(s3_state_file(work, SIDE, at, p["turns"]), api) as saver:
        # Connect and create/check the tables now, not inside the first call.
        if isinstance(saver, AsyncSqliteSaver):
            await saver.setup()
        else:
            assert isinstance(saver, SqliteSaver)
            saver.setup()
        run = Runner(chat_graph(size).compile(checkpointer=saver), api)
        gc.collect()  # the imports' garbage is the process's, not the first call's (both sides)
        t1 = perf_counter()
        first = await run.get_state(config("chat"))
        t2 = perf_counter()
        warm: list[float] = []
        for _ in range(reads):
            t3 = perf_counter()
            snap = await run.get_state(config("chat"))
            warm.append(perf_counter() - t3)
    for s in (first, snap):
        check_chat(s.values["messages"], at, size)
    metrics = {
        f"s3_get_state_fresh_ms_t{at}": (t2 - t1) * 1e3,
        f"s3_get_state_warm_ms_t{at}": percentile(warm, 0.5) * 1e3,
    }
    method = "get_state" if api == "sync" else "aget_state"
    info = {
        "get_state": f"{method}(config) after {_saver_name(api)}.setup()",
        f"s3_open_ms_t{at}": (t1 - t0) * 1e3,
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
    with AnonymousPeak() as anon:
        metrics, info = await _s5_serve(p, work)
    return {**metrics, "s5_peak_anon_mib": anon.peak_kib / 1024}, info


async def _s5_serve(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
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


# -- agent scenarios ---------------------------------------------------------------------------
#
# Only these import the agents (``_agents_langgraph``, and with it ``langchain.agents``): the
# import adds ~5 MB to a process, and S5 measures the peak RSS of its own.


def agent_input(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def round_trip(
    run: Runner,
    thread: str,
    value: dict[str, Any],
    entries: Counter[str],
    approval: Callable[[Interrupt], Any],
    answer: Callable[[dict[str, Any]], Any],
) -> tuple[float, float, int]:
    """Run to the approval, approve it; ``(run s, resume s, violations)``."""
    cfg = config(thread)
    before = entries[GATED_TOOL]
    t0 = perf_counter()
    out = await run.invoke(value, cfg)
    t1 = perf_counter()
    (pending,) = interrupts_of(out)
    bad = int(entries[GATED_TOOL] != before)
    out = await run.invoke(Command(resume={pending.id: approval(pending)}), cfg)
    t2 = perf_counter()
    bad += int(
        bool(interrupts_of(out))
        or entries[GATED_TOOL] != before + 1
        or answer(out) != APPROVAL_ANSWER
    )
    return t1 - t0, t2 - t1, bad


async def a1(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_langgraph import agent_answer, agent_approval, assistant_agent

    threads, warmup, api = p["threads"], p["warmup"], p["api"]
    entries: Counter[str] = Counter()
    async with sqlite_saver(work / "a1-langgraph.db", api) as saver:
        run = Runner(assistant_agent(approval_script(), entries, saver), api)
        for i in range(warmup):
            value = agent_input(APPROVAL_REQUEST)
            await round_trip(run, f"warmup-{i}", value, entries, agent_approval, agent_answer)
        run_s: list[float] = []
        resume_s: list[float] = []
        violations = 0
        for i in range(threads):
            value = agent_input(APPROVAL_REQUEST)
            r, s, bad = await round_trip(
                run, thread_id(i), value, entries, agent_approval, agent_answer
            )
            run_s.append(r)
            resume_s.append(s)
            violations += bad
    metrics = {
        "a1_round_trips_per_s": threads / (sum(run_s) + sum(resume_s)),
        "a1_resume_p50_ms": percentile(resume_s, 0.5) * 1e3,
        "a1_run_p50_ms": percentile(run_s, 0.5) * 1e3,
        "a1_violations": float(violations),
    }
    info = {
        "agent": "create_agent + HumanInTheLoopMiddleware({execute: True}), batched",
        "api": f"{api} ({_saver_name(api)}), default durability",
    }
    return metrics, info


def _saver_name(api: Api) -> str:
    return "SqliteSaver" if api == "sync" else "AsyncSqliteSaver"


async def a2(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_langgraph import agent_answer, assistant_agent

    turns, window, api = p["turns"], p["window"], p["api"]
    script = chat_script(turns, p)

    async def chat(path: Path, n: int) -> tuple[list[float], int]:
        entries: Counter[str] = Counter()
        times = []
        errors = 0
        async with sqlite_saver(path, api) as saver:
            run = Runner(assistant_agent(script, entries, saver, p["tool_bytes"]), api)
            for turn in range(n):
                value = agent_input(chat_user(turn, p))
                t0 = perf_counter()
                out = await run.invoke(value, config("chat"))
                times.append(perf_counter() - t0)
                errors += int(
                    bool(interrupts_of(out)) or agent_answer(out) != script[2 * turn + 1].text
                )
        errors += abs(len(out["messages"]) - 4 * n) + abs(sum(entries.values()) - n)
        return times, errors

    await chat(work / "a2-langgraph-warmup.db", 2)
    path = work / "a2-langgraph.db"
    times, errors = await chat(path, turns)
    size = db_bytes(path)
    raw = raw_message_bytes(turns, p)
    early, late = mean(times[:window]), mean(times[-window:])
    metrics = {
        "a2_db_ratio": size / raw,
        "a2_db_mib": size / 2**20,
        "a2_growth": late / early,
        "a2_turn_ms_early": early * 1e3,
        "a2_turn_ms_late": late * 1e3,
        "a2_errors": float(errors),
    }
    return metrics, {"raw_message_bytes": raw, "db_bytes": size, "api": api}


async def a3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_langgraph import HitlMode, approve_one, parallel_agent

    threads, tools, gated, api = p["threads"], p["tools"], p["gated"], p["api"]
    free, held = parallel_tools(tools, gated)
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {}
    modes: list[tuple[str, HitlMode]] = [("a3", "batched"), ("a3pc", "per_call")]
    for prefix, mode in modes:
        entries: Counter[str] = Counter()
        async with sqlite_saver(work / f"a3-langgraph-{mode}.db", api) as saver:
            run = Runner(parallel_agent(tools, gated, entries, saver, mode), api)
            answers = partial(approve_one, mode, held)
            await parallel_round(run, "warmup", free, held, entries, answers)
            rounds = [
                await parallel_round(run, thread_id(i), free, held, entries, answers)
                for i in range(threads)
            ]
        first = rounds[0]
        metrics |= {
            f"{prefix}_run_ms": percentile([r["run_s"] for r in rounds], 0.5) * 1e3,
            f"{prefix}_resume_one_ms": percentile([r["resume_s"] for r in rounds], 0.5) * 1e3,
            f"{prefix}_ungated_before_decision": float(sum(first["before"][n] for n in free)),
            f"{prefix}_ungated_entries": float(sum(first["after"][n] for n in free)),
            f"{prefix}_approved_entries": float(first["after"][held[0]]),
            f"{prefix}_pending_entries": float(sum(first["after"][n] for n in held[1:])),
            f"{prefix}_pending_left": float(first["left"]),
            f"{prefix}_violations": float(sum(r["off"] for r in rounds)),
        }
        info[f"{prefix}_entries_after_one_approval"] = dict(sorted(first["after"].items()))
        info[f"{prefix}_entries_before_decision"] = dict(sorted(first["before"].items()))
    info["a3_how"] = (
        f"batched: one interrupt for {gated} calls; resume {{id: {{decisions: [approve "
        f"{held[0]}, reject the other {gated - 1}]}}}} (it takes all decisions at once)"
    )
    info["a3pc_how"] = (
        f"per_call: {gated} interrupts; resume {{id of {held[0]}: approve}}; then approve the "
        f"other {gated - 1}"
    )
    return metrics, info


async def parallel_round(
    run: Runner,
    thread: str,
    free: list[str],
    held: list[str],
    entries: Counter[str],
    answers: Callable[..., tuple[dict[str, Any], bool]],
) -> dict[str, Any]:
    """A3 on one thread: run to the approvals, approve one (``answers`` says how: see
    `approve_one`), then approve whatever is still pending."""
    cfg = config(thread)
    entries.clear()
    t0 = perf_counter()
    out = await run.invoke({"messages": [{"role": "user", "content": PARALLEL_REQUEST}]}, cfg)
    t1 = perf_counter()
    before = Counter(entries)
    answer, rejects = answers(interrupts_of(out))
    t2 = perf_counter()
    out = await run.invoke(Command(resume=answer), cfg)
    t3 = perf_counter()
    after = Counter(entries)
    left = interrupts_of(out)
    expected = Counter({n: 1 for n in [*free, held[0]]})
    off = int(after != expected)
    if left:
        rest, _ = answers(left, every=True)
        out = await run.invoke(Command(resume=rest), cfg)
    ran = [*free, held[0]] if rejects else free + held
    if interrupts_of(out) or entries != Counter({n: 1 for n in ran}):
        raise AssertionError(f"A3 thread {thread} did not finish as expected: {entries}")
    return {
        "run_s": t1 - t0,
        "resume_s": t3 - t2,
        "before": before,
        "after": after,
        "left": len(left),
        "off": off,
    }


async def aovh(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_langgraph import (
        agent_answer,
        agent_approval,
        assistant_agent,
        plain_answer,
        plain_approval,
        plain_graph,
    )

    threads, block, warmup, api = p["threads"], p["block"], p["warmup"], p["api"]
    entries: Counter[str] = Counter()
    async with (
        sqlite_saver(work / "aovh-langgraph-agent.db", api) as agent_saver,
        sqlite_saver(work / "aovh-langgraph-plain.db", api) as plain_saver,
    ):
        kinds = {
            "agent": (
                Runner(assistant_agent(approval_script(), entries, agent_saver), api),
                agent_approval,
                agent_answer,
            ),
            "plain": (
                Runner(plain_graph(entries).compile(checkpointer=plain_saver), api),
                plain_approval,
                plain_answer,
            ),
        }
        for run, approval, answer in kinds.values():
            for i in range(warmup):
                value = agent_input(APPROVAL_REQUEST)
                await round_trip(run, f"warmup-{i}", value, entries, approval, answer)
        spent = dict.fromkeys(kinds, 0.0)
        resume_s: dict[str, list[float]] = {kind: [] for kind in kinds}
        violations = 0
        # Blocks alternate (agent, plain), (plain, agent), ... so slow spells land on both.
        for b in range(threads // block):
            for kind in ("agent", "plain") if b % 2 == 0 else ("plain", "agent"):
                run, approval, answer = kinds[kind]
                for i in range(block):
                    t = thread_id(b * block + i)
                    value = agent_input(APPROVAL_REQUEST)
                    r, s, bad = await round_trip(run, t, value, entries, approval, answer)
                    spent[kind] += r + s
                    resume_s[kind].append(s)
                    violations += bad
    n = block * (threads // block)
    metrics = {
        "aovh_agent_round_trips_per_s": n / spent["agent"],
        "aovh_plain_round_trips_per_s": n / spent["plain"],
        "aovh_overhead_pct": (spent["agent"] / spent["plain"] - 1) * 100,
        "aovh_agent_resume_p50_ms": percentile(resume_s["agent"], 0.5) * 1e3,
        "aovh_plain_resume_p50_ms": percentile(resume_s["plain"], 0.5) * 1e3,
        "aovh_violations": float(violations),
    }
    info = {"plain": "StateGraph: model node + tools node with interrupt(), dict messages"}
    return metrics, info


SCENARIOS = {
    ("S1", "run"): s1,
    ("S2", "run"): s2,
    ("S2pg", "run"): s2pg,
    ("S2pg", "off"): s2pg,
    ("S3", "run"): s3,
    ("S3", "state"): s3_state,
    ("S4", "run"): s4,
    ("S5", "build"): s5_build,
    ("S5", "serve"): s5_serve,
    ("S6", "run"): s6,
    ("S6pg", "run"): s6pg,
    ("A1", "run"): a1,
    ("A2", "run"): a2,
    ("A3", "run"): a3,
    ("Aovh", "run"): aovh,
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
