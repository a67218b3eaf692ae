"""The approval server the H benchmarks run: the H1 graph on a durable SQLite file.

Started as its own process (``uvicorn --factory bench._approvals_app:asgi``), as a real
deployment would be. ``BENCH_DB`` names the file; the tokens are ``approver-N`` (N from 0 to
99, role approver, identity ``approverN``) and ``admin`` (role admin).

With ``BENCH_BREAKDOWN=1`` the server also times where a request's time goes (H1's
``--breakdown``): the whole request as the ASGI app sees it, the App's calls within it, the
store calls within those (awaited, and run on the store's worker thread, or run on the
loop's own thread when they cannot wait on the disk), and the durable commits;
``GET /bench/breakdown`` answers the sums, ``POST /bench/breakdown`` zeroes them. A
diagnostic: the timers cost a few microseconds per call.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TypedDict

from starlette.types import ASGIApp, Receive, Scope, Send

from interlock import END, START, App, Graph, SqliteStore, interrupt
from interlock.server import Identity, TokenAuth, create_app, hash_token

APPROVERS = 100


class H1(TypedDict, total=False):
    n: int
    approved: bool


def prepare(state: H1) -> H1:
    return {"n": state.get("n", 0) + 1}


def review(state: H1) -> H1:
    answer = interrupt({"question": "approve?", "n": state["n"]}, schema={"type": "boolean"})
    return {"approved": bool(answer)}


def finish(state: H1) -> H1:
    return {}


def build_app(path: Path) -> App[Any]:
    """prepare → review (waits for a person) → finish, like the peer's graph."""
    g = Graph(H1, name="h1")
    g.add_node("prepare", prepare).add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "prepare").add_edge("prepare", "review")
    g.add_edge("review", "finish").add_edge("finish", END)
    return g.compile(store=SqliteStore(path))


def tokens() -> TokenAuth:
    known = {hash_token("admin"): Identity(name="admin", role="admin")}
    for n in range(APPROVERS):
        known[hash_token(f"approver-{n}")] = Identity(name=f"approver{n}", role="approver")
    return TokenAuth(known)


def asgi() -> ASGIApp:
    path = Path(os.environ["BENCH_DB"])
    api = create_app(build_app(path), auth=tokens(), decisions_per_second=1e6, decision_burst=10**6)
    return _Breakdown(api) if os.environ.get("BENCH_BREAKDOWN") == "1" else api


class _Breakdown:
    """The server with timers: sums of seconds and counts by request kind and part."""

    def __init__(self, inner: ASGIApp) -> None:
        from interlock.stores import SqliteStore, _worker

        self.inner = inner
        self.sums: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        self.where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="bg")
        run, append = _worker.ThreadWorker.run, SqliteStore.append_checkpoint
        add, where = self.add, self.where

        async def timed_run(worker: Any, fn: Any) -> Any:
            label = where.get()

            def on_worker() -> Any:
                t = time.perf_counter()
                try:
                    return fn()
                finally:
                    add(f"{label} store sql", time.perf_counter() - t)

            t = time.perf_counter()
            try:
                return await run(worker, on_worker)
            finally:
                add(f"{label} store awaited", time.perf_counter() - t)

        async def counted_append(store: Any, record: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("durable", True):
                add(f"{where.get()} durable commit", 0.0)
            return await append(store, record, *args, **kwargs)

        _worker.ThreadWorker.run = timed_run  # type: ignore[method-assign]
        if hasattr(SqliteStore, "_try_inline"):  # calls run on the loop's thread, not handed off
            try_inline = SqliteStore._try_inline

            def timed_inline(store: Any, *args: Any) -> Any:
                t = time.perf_counter()
                ran, value = try_inline(store, *args)
                if ran:
                    add(f"{where.get()} store inline", time.perf_counter() - t)
                return ran, value

            SqliteStore._try_inline = timed_inline  # type: ignore[method-assign]
        SqliteStore.append_checkpoint = counted_append  # type: ignore[method-assign]
        for name in ("run", "resume", "decide", "get_state", "question"):
            self._time(App, name)

    def add(self, key: str, seconds: float) -> None:
        with self.lock:
            found = self.sums.setdefault(key, [0, 0.0])
            found[0] += 1
            found[1] += seconds

    def _time(self, owner: type, name: str) -> None:
        method = getattr(owner, name)
        add, where = self.add, self.where

        async def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                add(f"{where.get()} app", time.perf_counter() - t)

        setattr(owner, name, timed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        if scope["path"] == "/bench/breakdown":
            if scope["method"] == "POST":
                with self.lock:
                    self.sums.clear()
            with self.lock:
                body = json.dumps(self.sums).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return None
        path = scope["path"]
        label = "run" if path.endswith("/runs") else "decision" if "/decision" in path else "other"
        token = self.where.set(label)
        t = time.perf_counter()
        try:
            return await self.inner(scope, receive, send)
        finally:
            self.add(f"{label} request", time.perf_counter() - t)
            self.where.reset(token)
