"""The approval server the H benchmarks run: the H1 graph on a durable SQLite file.

Started as its own process (``uvicorn --factory bench._approvals_app:asgi``), as a real
deployment would be. ``BENCH_DB`` names the file; the tokens are ``approver-N`` (N from 0 to
99, role approver, identity ``approverN``) and ``admin`` (role admin).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypedDict

from starlette.types import ASGIApp

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
    return create_app(
        build_app(path), auth=tokens(), decisions_per_second=1e6, decision_burst=10**6
    )
