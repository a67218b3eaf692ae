"""The interlock side of bench/compare.py: one scenario per process, one JSON line out.

Runs in interlock's own virtualenv and must never import LangGraph. Uses the async API inside a
single event loop (the ``*_sync`` twins start an event loop per call, which a server would not
do). Each graph mirrors the one in ``_langgraph_side.py`` node for node; the agents of the A
scenarios are in ``_agents_interlock.py``.
"""

from __future__ import annotations

import gc
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any, Literal, TypedDict

import anyio
from _common import (
    APPROVAL_ANSWER,
    APPROVAL_REQUEST,
    GATED_TOOL,
    LIST_LIMIT,
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

from interlock import END, START, App, Graph, MemoryStore, Send, SqliteStore, Store, append, approve

SIDE = "interlock"


# -- graphs ------------------------------------------------------------------------------------


class ChainState(TypedDict):
    n: int


def chain_graph(nodes: int) -> Graph[ChainState]:
    """S1: ``nodes`` nodes in a line, each ``n += 1``."""

    def inc(s: ChainState) -> dict[str, Any]:
        return {"n": s["n"] + 1}

    g = Graph(ChainState)
    prev = START
    for i in range(nodes):
        g.add_node(f"n{i}", inc)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g


class ApprovalState(TypedDict, total=False):
    tid: str
    log: Annotated[list[str], append]
    approved: bool


def approval_graph(executed: Counter[str]) -> Graph[ApprovalState]:
    """S2, S5: agent → approve (interrupt) → execute; ``executed`` counts execute per thread."""

    def agent(s: ApprovalState) -> dict[str, Any]:
        return {"log": ["agent"]}

    def gate(s: ApprovalState) -> dict[str, Any]:
        ok = approve(f"run the command for {s['tid']}?")
        return {"approved": ok, "log": ["approved" if ok else "rejected"]}

    def execute(s: ApprovalState) -> dict[str, Any]:
        executed[s["tid"]] += 1
        return {"log": ["executed"]}

    def route(s: ApprovalState) -> str:
        return "execute" if s["approved"] else END

    g = Graph(ApprovalState)
    g.add_node("agent", agent).add_node("approve", gate).add_node("execute", execute)
    g.add_edge(START, "agent").add_edge("agent", "approve")
    g.add_conditional_edges("approve", route)
    g.add_edge("execute", END)
    return g


class ChatState(TypedDict, total=False):
    messages: Annotated[list[dict[str, str]], append]


def chat_graph(message_bytes: int) -> Graph[ChatState]:
    """S3: one ``assistant`` node that appends a reply to the user's message."""

    def assistant(s: ChatState) -> dict[str, Any]:
        turn = len(s["messages"]) // 2
        reply = {"role": "assistant", "content": message_text(turn, "assistant", message_bytes)}
        return {"messages": [reply]}

    g = Graph(ChatState)
    g.add_node("assistant", assistant)
    g.add_edge(START, "assistant").add_edge("assistant", END)
    return g


class FanState(TypedDict, total=False):
    log: Annotated[list[str], append]


def fan_graph(tasks: int, entries: Counter[int]) -> Graph[FanState]:
    """S4: ``fan`` sends ``tasks`` workers that each ask for approval, then ``join``."""

    def fan(s: FanState) -> dict[str, Any]:
        return {"log": ["fan"]}

    def route(s: FanState) -> list[Send]:
        return [Send("worker", {"i": i}) for i in range(tasks)]

    def worker(arg: dict[str, int]) -> dict[str, Any]:
        i = arg["i"]
        entries[i] += 1
        ok = approve(f"run item {i}?", details={"item": i})
        return {"log": [f"w{i}:{ok}"]}

    def join(s: FanState) -> dict[str, Any]:
        return {"log": ["join"]}

    g = Graph(FanState)
    g.add_node("fan", fan).add_node("worker", worker).add_node("join", join)
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", route)
    g.add_edge("worker", "join").add_edge("join", END)
    return g


# -- scenarios ---------------------------------------------------------------------------------


async def s1(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    nodes, threads = p["nodes"], p["threads"]
    graph = chain_graph(nodes)
    metrics: dict[str, float] = {}
    modes: list[tuple[str, Literal["sync", "exit"]]] = [("ckpt", "sync"), ("nockpt", "exit")]
    for name, durability in modes:
        app = graph.compile(store=MemoryStore(), durability=durability, recursion_limit=nodes + 10)
        await app.run({"n": 0}, thread="warmup")
        start = perf_counter()
        for i in range(threads):
            r = await app.run({"n": 0}, thread=thread_id(i))
            if r.values["n"] != nodes:
                raise AssertionError(f"chain ended with n={r.values['n']}")
        metrics[f"s1_steps_per_s_{name}"] = nodes * threads / (perf_counter() - start)
    info = {"ckpt": "MemoryStore, durability='sync'", "nockpt": "MemoryStore, durability='exit'"}
    return metrics, info


async def s2(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    return await _s2(p, SqliteStore(work / "s2-interlock.db"))  # synchronous=FULL, the default


async def s2pg(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """S2 on PostgreSQL, with the server's WAL flushes per round trip (``pg_stat_wal``); the
    ``off`` phase runs with ``synchronous_commit=off`` for every transaction, its metrics
    named ``s2off_*``."""
    from interlock.stores import PostgresStore

    lazy = p.get("synchronous_commit") == "off"
    dsn = pg_dsn(p["dsn"], lazy)
    before = wal_flushes(dsn)
    metrics, info = await _s2(p, PostgresStore(dsn))
    after = wal_flushes(dsn)
    metrics["s2_wal_flushes_per_rt"] = (after - before) / (p["threads"] + p["warmup"])
    if lazy:
        metrics = {k.replace("s2_", "s2off_", 1): v for k, v in metrics.items()}
        info["store"] += " synchronous_commit=off"
    return metrics, info


async def _s2(p: dict[str, Any], store: Any) -> tuple[dict[str, float], dict[str, Any]]:
    threads, warmup = p["threads"], p["warmup"]
    executed: Counter[str] = Counter()
    app = approval_graph(executed).compile(store=store)
    for i in range(warmup):
        t = f"warmup-{i}"
        r = await app.run({"tid": t}, thread=t)
        await app.resume(t, {r.interrupt().id: True})
    run_s: list[float] = []
    resume_s: list[float] = []
    violations = 0
    for i in range(threads):
        t = thread_id(i)
        t0 = perf_counter()
        r = await app.run({"tid": t}, thread=t)
        t1 = perf_counter()
        if r.status != "interrupted" or executed[t] != 0:
            violations += 1
        r = await app.resume(t, {r.interrupt().id: True})
        t2 = perf_counter()
        if r.status != "done" or executed[t] != 1 or r.values["log"][-1] != "executed":
            violations += 1
        run_s.append(t1 - t0)
        resume_s.append(t2 - t1)
    await store.close()
    violations += sum(1 for t, n in executed.items() if n != 1)
    total = sum(run_s) + sum(resume_s)
    metrics = {
        "s2_round_trips_per_s": threads / total,
        "s2_resume_p50_ms": percentile(resume_s, 0.5) * 1e3,
        "s2_run_p50_ms": percentile(run_s, 0.5) * 1e3,
        "s2_violations": float(violations),
    }
    store_name = type(store).__name__
    detail = " synchronous=FULL" if store_name == "SqliteStore" else ""
    return metrics, {"api": "async App.run/App.resume", "store": f"{store_name}{detail}"}


async def s6(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    return await _s6(p, SqliteStore(work / "s6-interlock.db"))  # synchronous=FULL, the default


async def s6pg(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from interlock.stores import PostgresStore

    return await _s6(p, PostgresStore(p["dsn"]))


async def _s6(p: dict[str, Any], store: Any) -> tuple[dict[str, float], dict[str, Any]]:
    """S6: ``threads`` tasks at once, each doing ``rounds`` approval round trips in a row."""
    tasks, rounds, warmup = p["threads"], p["rounds"], p["warmup"]
    executed: Counter[str] = Counter()
    app = approval_graph(executed).compile(store=store)
    round_s: list[float] = []
    violations = 0

    async def one(task: int, r: int, timed: bool) -> None:
        nonlocal violations
        t = s6_thread(task, r) if timed else f"warmup-{task}-{r}"
        t0 = perf_counter()
        out = await app.run({"tid": t}, thread=t)
        if out.status != "interrupted" or executed[t] != 0:
            violations += 1
        out = await app.resume(t, {out.interrupt().id: True})
        if timed:
            round_s.append(perf_counter() - t0)
        if out.status != "done" or executed[t] != 1 or out.values["log"][-1] != "executed":
            violations += 1

    async def task_of(task: int, n: int, timed: bool) -> None:
        for r in range(n):
            await one(task, r, timed)

    async def all_tasks(n: int, timed: bool) -> None:
        async with anyio.create_task_group() as tg:
            for task in range(tasks):
                tg.start_soon(task_of, task, n, timed)

    await all_tasks(warmup, False)
    start = perf_counter()
    await all_tasks(rounds, True)
    wall = perf_counter() - start
    await store.close()
    violations += sum(1 for n in executed.values() if n != 1)
    store_name = type(store).__name__
    detail = " synchronous=FULL" if store_name == "SqliteStore" else ""
    info = {
        "api": f"async App.run/App.resume, {tasks} tasks in one event loop",
        "store": f"{store_name}{detail}",
    }
    return s6_metrics(round_s, wall, violations), info


async def s3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    turns, window, size, page = p["turns"], p["window"], p["message_bytes"], p["page"]
    graph = chat_graph(size)

    async def chat(
        path: Path, n: int, copies: dict[int, Path], marks: tuple[int, ...] = ()
    ) -> tuple[list[float], dict[str, float]]:
        store = SqliteStore(path)
        app = graph.compile(store=store)
        times = []
        first: dict[str, float] = {}
        for turn in range(n):
            user = {"role": "user", "content": message_text(turn, "user", size)}
            t0 = perf_counter()
            r = await app.run({"messages": [user]}, thread="chat")
            times.append(perf_counter() - t0)
            if turn + 1 in marks:  # the first read in the App that has just run the turn
                t1 = perf_counter()
                snap = await app.get_state("chat")
                first[f"s3_get_state_first_ms_t{turn + 1}"] = (perf_counter() - t1) * 1e3
                check_chat(snap.values["messages"], turn + 1, size)
            if turn + 1 in copies:  # untimed: the chat as it is after this turn, for "state"
                snapshot_db(path, copies[turn + 1])
        if len(r.values["messages"]) != 2 * n:
            raise AssertionError(f"{len(r.values['messages'])} messages after {n} turns")
        await store.close()
        return times, first

    await chat(work / "s3-interlock-warmup.db", 2, {}, (1, 2))
    path = work / "s3-interlock.db"
    marks = s3_checkpoints(turns)
    copies = {at: s3_state_file(work, SIDE, at, turns) for at in marks[:-1]}
    times, first = await chat(path, turns, copies, marks)
    main_bytes, wal_bytes = db_sizes(path)
    raw = 2 * turns * size

    store = SqliteStore(path)
    app = graph.compile(store=store)
    start = perf_counter()
    before: str | None = None
    checkpoints = 0
    while True:
        snapshots = await app.history("chat", limit=page, before=before)
        if not snapshots:
            break
        checkpoints += len(snapshots)
        before = snapshots[-1].checkpoint_id
    history_s = perf_counter() - start
    await store.close()

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
        "reducer": "interlock.append on list[dict]",
        "checkpoints_read": checkpoints,
        "raw_message_bytes": raw,
        "history": f"App.history(limit={page}, before=...) until empty",
    }
    return metrics, info


async def s3_state(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    """A fresh process reads the chat's latest state at turn ``at``: the first call, then the
    median of ``state_reads`` more."""
    at, size, reads = p["at"], p["message_bytes"], p["state_reads"]
    t0 = perf_counter()
    store = SqliteStore(s3_state_file(work, SIDE, at, p["turns"]))
    await store.open()  # connect and check the schema now, not inside the first call
    app = chat_graph(size).compile(store=store)
    gc.collect()  # the imports' garbage is the process's, not the first call's (both sides)
    t1 = perf_counter()
    first = await app.get_state("chat")
    t2 = perf_counter()
    warm: list[float] = []
    for _ in range(reads):
        t3 = perf_counter()
        snap = await app.get_state("chat")
        warm.append(perf_counter() - t3)
    await store.close()
    for s in (first, snap):
        check_chat(s.values["messages"], at, size)
    metrics = {
        f"s3_get_state_fresh_ms_t{at}": (t2 - t1) * 1e3,
        f"s3_get_state_warm_ms_t{at}": percentile(warm, 0.5) * 1e3,
    }
    info = {
        "get_state": 'App.get_state("chat") after SqliteStore.open()',
        f"s3_open_ms_t{at}": (t1 - t0) * 1e3,
    }
    return metrics, info


async def s4(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    tasks, partial = p["tasks"], p["partial"]
    entries: Counter[int] = Counter()
    graph = fan_graph(tasks, entries)
    metrics: dict[str, float] = {}
    info: dict[str, Any] = {}
    stores: list[tuple[str, Store]] = [
        ("s4", SqliteStore(work / "s4-interlock.db")),
        ("s4_mem", MemoryStore()),
    ]
    for prefix, store in stores:
        app = graph.compile(store=store)
        await fan_round(app, "warmup", tasks, partial, entries)
        m = await fan_round(app, "measured", tasks, partial, entries)
        metrics.update({f"{prefix}_{k}": v for k, v in m.items()})
        await store.close()
    info["stores"] = "SqliteStore synchronous=FULL (s4_*), MemoryStore (s4_mem_*)"
    return metrics, info


async def fan_round(
    app: App[FanState], tag: str, tasks: int, partial: int, entries: Counter[int]
) -> dict[str, float]:
    def item(i: Any) -> int:
        return int(i.info["details"]["item"])

    # One run to 50 interrupts, then one resume answering all of them.
    thread = f"{tag}-all"
    t0 = perf_counter()
    r = await app.run({}, thread=thread)
    t1 = perf_counter()
    if r.status != "interrupted" or len(r.interrupts) != tasks:
        raise AssertionError(f"expected {tasks} interrupts, got {len(r.interrupts)}")
    r = await app.resume(thread, {i.id: True for i in r.interrupts})
    t2 = perf_counter()
    if r.status != "done" or len(r.values["log"]) != tasks + 2:
        raise AssertionError(f"fan-out did not finish: {r.status}")

    # The same, answering ``partial`` first and the rest in a second call.
    thread = f"{tag}-partial"
    r = await app.run({}, thread=thread)
    first, rest = r.interrupts[:partial], r.interrupts[partial:]
    waiting = {item(i) for i in rest}
    before = {i: entries[i] for i in waiting}
    t3 = perf_counter()
    r = await app.resume(thread, {i.id: True for i in first})
    t4 = perf_counter()
    reentries = sum(entries[i] - before[i] for i in waiting)
    if r.status != "interrupted" or {i.id for i in r.interrupts} != {i.id for i in rest}:
        raise AssertionError("the partial resume changed the ids of unanswered interrupts")
    r = await app.resume(thread, {i.id: True for i in r.interrupts})
    t5 = perf_counter()
    if r.status != "done" or len(r.values["log"]) != tasks + 2:
        raise AssertionError(f"partial fan-out did not finish: {r.status}")
    return {
        "interrupt_ms": (t1 - t0) * 1e3,
        "resume_all_ms": (t2 - t1) * 1e3,
        "partial_pair_ms": (t4 - t3 + t5 - t4) * 1e3,
        "reentries": float(reentries),
    }


async def s5_build(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    executed: Counter[str] = Counter()
    store = SqliteStore(work / "s5-interlock.db")
    app = approval_graph(executed).compile(store=store)
    start = perf_counter()
    for i in range(p["threads"]):
        t = thread_id(i)
        r = await app.run({"tid": t}, thread=t)
        if r.status != "interrupted":
            raise AssertionError(f"thread {t} did not stop at the approval")
    await store.close()
    return {"s5_build_s": perf_counter() - start}, {}


async def s5_serve(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    with AnonymousPeak() as anon:
        metrics, info = await _s5_serve(p, work)
    return {**metrics, "s5_peak_anon_mib": anon.peak_kib / 1024}, info


async def _s5_serve(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    n = p["threads"]
    executed: Counter[str] = Counter()
    graph = approval_graph(executed)  # built before the clock starts, as LangGraph's side does
    t0 = perf_counter()
    store = SqliteStore(work / "s5-interlock.db")
    app = graph.compile(store=store)
    # The inbox: one indexed query for every pending interrupt of the file, each decoded into
    # an Interrupt with its question (a LangGraph snapshot also decodes its interrupts).
    inbox = await app.inbox(limit=LIST_LIMIT)
    questions = [i.info for i in inbox]
    t1 = perf_counter()
    floor = listing_floor(work / "s5-interlock.db")
    t_resume = perf_counter()
    for rec in inbox:
        r = await app.resume(rec.thread, {rec.id: True})
        if r.status != "done":
            raise AssertionError(f"thread {rec.thread} did not finish")
    t2 = perf_counter()
    left = await store.pending(limit=1)
    await store.close()
    errors = abs(len(inbox) - n) + abs(sum(executed.values()) - n) + len(left)
    errors += sum(1 for c in executed.values() if c != 1) + abs(len(questions) - n)
    metrics = {
        "s5_list_s": t1 - t0,
        "s5_list_floor_s": floor,
        "s5_resume_all_s": t2 - t_resume,
        "s5_peak_rss_mib": peak_rss_kib() / 1024,
        "s5_errors": float(errors),
    }
    info = {"listing": f"App.inbox(limit={LIST_LIMIT})"}
    return metrics, info


def listing_floor(path: Path) -> float:
    """The least any listing can cost: Python's sqlite3 fetching (id, thread) per pending row.

    Measured right after the real listing read the same pages (warm caches), on a connection
    of its own, through the same partial index: a lower bound for any design that returns one
    Python object per pending interrupt, before a single question is decoded.
    """
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        start = perf_counter()
        rows = conn.execute(
            "SELECT id, thread FROM interrupts WHERE status = 'pending' ORDER BY created_at"
        ).fetchall()
        elapsed = perf_counter() - start
    finally:
        conn.close()
    if not rows:
        raise AssertionError("the floor query found no pending interrupt")
    return elapsed


# -- agent scenarios ---------------------------------------------------------------------------
#
# Only these import the agents (``_agents_interlock``, and with it ``interlock.agents``): the
# import adds ~2 MB to a process, and S5 measures the peak RSS of its own.


async def round_trip(
    app: App[Any],
    thread: str,
    value: dict[str, Any],
    entries: Counter[str],
    answer: Callable[[dict[str, Any]], Any],
    approve: Any,
) -> tuple[float, float, int]:
    """Run to the approval, answer it ``approve``; ``(run s, resume s, violations)``."""
    before = entries[GATED_TOOL]
    t0 = perf_counter()
    r = await app.run(value, thread=thread)
    t1 = perf_counter()
    bad = int(r.status != "interrupted" or entries[GATED_TOOL] != before)
    r = await app.resume(thread, {r.interrupt().id: approve})
    t2 = perf_counter()
    bad += int(
        r.status != "done"
        or entries[GATED_TOOL] != before + 1
        or answer(r.values) != APPROVAL_ANSWER
    )
    return t1 - t0, t2 - t1, bad


async def a1(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_interlock import APPROVE, agent_answer, agent_input, assistant_agent

    threads, warmup = p["threads"], p["warmup"]
    entries: Counter[str] = Counter()
    store = SqliteStore(work / "a1-interlock.db")
    app = assistant_agent(approval_script(), entries).compile(store=store)
    for i in range(warmup):
        value = agent_input(APPROVAL_REQUEST)
        await round_trip(app, f"warmup-{i}", value, entries, agent_answer, APPROVE)
    run_s: list[float] = []
    resume_s: list[float] = []
    violations = 0
    for i in range(threads):
        value = agent_input(APPROVAL_REQUEST)
        run, resume, bad = await round_trip(
            app, thread_id(i), value, entries, agent_answer, APPROVE
        )
        run_s.append(run)
        resume_s.append(resume)
        violations += bad
    await store.close()
    metrics = {
        "a1_round_trips_per_s": threads / (sum(run_s) + sum(resume_s)),
        "a1_resume_p50_ms": percentile(resume_s, 0.5) * 1e3,
        "a1_run_p50_ms": percentile(run_s, 0.5) * 1e3,
        "a1_violations": float(violations),
    }
    info = {
        "agent": "ToolAgent + ScriptedModel, ApprovalPolicy(execute: require_approval)",
        "store": "SqliteStore synchronous=FULL, durability='sync'",
    }
    return metrics, info


async def a2(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_interlock import agent_answer, agent_input, assistant_agent

    turns, window = p["turns"], p["window"]
    script = chat_script(turns, p)

    async def chat(path: Path, n: int) -> tuple[list[float], int]:
        entries: Counter[str] = Counter()
        store = SqliteStore(path)
        app = assistant_agent(script, entries, p["tool_bytes"]).compile(store=store)
        times = []
        errors = 0
        for turn in range(n):
            value = agent_input(chat_user(turn, p))
            t0 = perf_counter()
            r = await app.run(value, thread="chat")
            times.append(perf_counter() - t0)
            errors += int(r.status != "done" or agent_answer(r.values) != script[2 * turn + 1].text)
        errors += abs(len(r.values["messages"]) - 4 * n) + abs(sum(entries.values()) - n)
        await store.close()
        return times, errors

    await chat(work / "a2-interlock-warmup.db", 2)
    path = work / "a2-interlock.db"
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
    return metrics, {"raw_message_bytes": raw, "db_bytes": size}


async def a3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_interlock import APPROVE, agent_input, parallel_agent

    threads, tools, gated = p["threads"], p["tools"], p["gated"]
    free, held = parallel_tools(tools, gated)
    entries: Counter[str] = Counter()
    store = SqliteStore(work / "a3-interlock.db")
    app = parallel_agent(tools, gated, entries).compile(store=store)
    value = agent_input(PARALLEL_REQUEST)
    await parallel_round(app, "warmup", value, free, held, entries, APPROVE)
    rounds = [
        await parallel_round(app, thread_id(i), value, free, held, entries, APPROVE)
        for i in range(threads)
    ]
    await store.close()
    first = rounds[0]
    metrics = {
        "a3_run_ms": percentile([r["run_s"] for r in rounds], 0.5) * 1e3,
        "a3_resume_one_ms": percentile([r["resume_s"] for r in rounds], 0.5) * 1e3,
        "a3_ungated_before_decision": float(sum(first["before"][n] for n in free)),
        "a3_ungated_entries": float(sum(first["after"][n] for n in free)),
        "a3_approved_entries": float(first["after"][held[0]]),
        "a3_pending_entries": float(sum(first["after"][n] for n in held[1:])),
        "a3_pending_left": float(first["left"]),
        "a3_violations": float(sum(r["off"] for r in rounds)),
    }
    # interlock has one way to ask (an interrupt per gated call): the rows that compare it with
    # LangChain's interrupt_mode="per_call" show the same measurement.
    for key in ("a3_resume_one_ms", "a3_pending_left", "a3_violations"):
        metrics[key.replace("a3_", "a3pc_")] = metrics[key]
    info = {
        "a3_entries_after_one_approval": dict(sorted(first["after"].items())),
        "a3_entries_before_decision": dict(sorted(first["before"].items())),
        "a3_how": f"run to {gated} interrupts; resume {{id of {held[0]}: approve}}; "
        f"then approve the other {gated - 1}",
    }
    return metrics, info


async def parallel_round(
    app: App[Any],
    thread: str,
    value: dict[str, Any],
    free: list[str],
    held: list[str],
    entries: Counter[str],
    approve: Any,
) -> dict[str, Any]:
    """A3 on one thread: run to the approvals, approve one, then the rest."""
    entries.clear()
    t0 = perf_counter()
    r = await app.run(value, thread=thread)
    t1 = perf_counter()
    before = Counter(entries)
    if r.status != "interrupted" or sorted(i.info["tool"] for i in r.interrupts) != held:
        raise AssertionError(f"A3 expected approvals of {held}, got {r.interrupts}")
    chosen = next(i for i in r.interrupts if i.info["tool"] == held[0])
    t2 = perf_counter()
    r = await app.resume(thread, {chosen.id: approve})
    t3 = perf_counter()
    after = Counter(entries)
    left = len(r.interrupts) if r.status == "interrupted" else 0
    expected = Counter({n: 1 for n in [*free, held[0]]})
    off = int(after != expected)
    r = await app.resume(thread, {i.id: approve for i in r.interrupts})
    if r.status != "done" or entries != Counter({n: 1 for n in free + held}):
        raise AssertionError(f"A3 thread {thread} did not finish with every body once: {entries}")
    return {
        "run_s": t1 - t0,
        "resume_s": t3 - t2,
        "before": before,
        "after": after,
        "left": left,
        "off": off,
    }


async def aovh(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    from _agents_interlock import (
        APPROVE,
        agent_answer,
        agent_input,
        assistant_agent,
        plain_answer,
        plain_graph,
        plain_input,
    )

    threads, block, warmup = p["threads"], p["block"], p["warmup"]
    entries: Counter[str] = Counter()
    kinds = ("agent", "plain", "effect")
    stores = {kind: SqliteStore(work / f"aovh-interlock-{kind}.db") for kind in kinds}
    apps: dict[str, tuple[App[Any], Callable[[str], dict[str, Any]], Any]] = {
        "agent": (
            assistant_agent(approval_script(), entries).compile(store=stores["agent"]),
            agent_input,
            agent_answer,
        ),
        "plain": (plain_graph(entries).compile(store=stores["plain"]), plain_input, plain_answer),
        "effect": (
            plain_graph(entries, effects=True).compile(store=stores["effect"]),
            plain_input,
            plain_answer,
        ),
    }
    for app, make, answer in apps.values():
        for i in range(warmup):
            value = make(APPROVAL_REQUEST)
            await round_trip(app, f"warmup-{i}", value, entries, answer, APPROVE)
    spent = dict.fromkeys(kinds, 0.0)
    resume_s: dict[str, list[float]] = {kind: [] for kind in kinds}
    violations = 0
    # The kinds take turns block by block, in a rotating order, so slow spells land on all.
    for b in range(threads // block):
        for kind in kinds[b % 3 :] + kinds[: b % 3]:
            app, make, answer = apps[kind]
            for i in range(block):
                t = thread_id(b * block + i)
                value = make(APPROVAL_REQUEST)
                run, resume, bad = await round_trip(app, t, value, entries, answer, APPROVE)
                spent[kind] += run + resume
                resume_s[kind].append(resume)
                violations += bad
    for store in stores.values():
        await store.close()
    n = block * (threads // block)
    metrics = {
        "aovh_agent_round_trips_per_s": n / spent["agent"],
        "aovh_plain_round_trips_per_s": n / spent["plain"],
        "aovh_overhead_pct": (spent["agent"] / spent["plain"] - 1) * 100,
        "aovh_effect_round_trips_per_s": n / spent["effect"],
        "aovh_overhead_vs_effect_pct": (spent["agent"] / spent["effect"] - 1) * 100,
        "aovh_agent_resume_p50_ms": percentile(resume_s["agent"], 0.5) * 1e3,
        "aovh_plain_resume_p50_ms": percentile(resume_s["plain"], 0.5) * 1e3,
        "aovh_violations": float(violations),
    }
    info = {
        "plain": "Graph: model node + tools node with interrupt(), dict messages, append",
        "effect": "the same, the approved call run as effect() (recorded before and after)",
    }
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
    refuse_foreign("langgraph")
    spec = read_spec()
    fn = SCENARIOS[(spec["scenario"], spec.get("phase", "run"))]
    metrics, info = anyio.run(fn, spec["params"], Path(spec["workdir"]))
    emit(SIDE, spec, metrics, {"interlock": _version(), **info})


def _version() -> str:
    import interlock

    return interlock.__version__


if __name__ == "__main__":
    main()
