"""The interlock side of bench/compare.py: one scenario per process, one JSON line out.

Runs in interlock's own virtualenv and must never import LangGraph. Uses the async API inside a
single event loop (the ``*_sync`` twins start an event loop per call, which a server would not
do). Each graph mirrors the one in ``_langgraph_side.py`` node for node.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any, Literal, TypedDict

import anyio
from _common import (
    LIST_LIMIT,
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
    from interlock.stores import PostgresStore

    return await _s2(p, PostgresStore(p["dsn"]))


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


async def s3(p: dict[str, Any], work: Path) -> tuple[dict[str, float], dict[str, Any]]:
    turns, window, size, page = p["turns"], p["window"], p["message_bytes"], p["page"]
    graph = chat_graph(size)

    async def chat(path: Path, n: int) -> list[float]:
        store = SqliteStore(path)
        app = graph.compile(store=store)
        times = []
        for turn in range(n):
            user = {"role": "user", "content": message_text(turn, "user", size)}
            t0 = perf_counter()
            r = await app.run({"messages": [user]}, thread="chat")
            times.append(perf_counter() - t0)
        if len(r.values["messages"]) != 2 * n:
            raise AssertionError(f"{len(r.values['messages'])} messages after {n} turns")
        await store.close()
        return times

    await chat(work / "s3-interlock-warmup.db", 2)
    path = work / "s3-interlock.db"
    times = await chat(path, turns)
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
    }
    info = {
        "reducer": "interlock.append on list[dict]",
        "checkpoints_read": checkpoints,
        "raw_message_bytes": raw,
        "history": f"App.history(limit={page}, before=...) until empty",
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
    n = p["threads"]
    executed: Counter[str] = Counter()
    t0 = perf_counter()
    store = SqliteStore(work / "s5-interlock.db")
    app = approval_graph(executed).compile(store=store)
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
