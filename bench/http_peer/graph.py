"""The H1 graph on LangGraph's side: prepare → review (interrupt) → finish.

Served by LangGraph's Agent Server (``langgraph_api``, in-memory runtime) under the id ``h1``
(see ``langgraph.json``); the server supplies the checkpointer, so the graph is compiled
without one. interlock's side of H1 has the same shape.
"""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    n: int
    approved: bool


def prepare(state: State) -> State:
    return {"n": state.get("n", 0) + 1}


def review(state: State) -> State:
    answer = interrupt({"question": "approve?", "n": state["n"]})
    return {"approved": bool(answer)}


def finish(state: State) -> State:
    return {}


builder = StateGraph(State)
builder.add_node("prepare", prepare)
builder.add_node("review", review)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "review")
builder.add_edge("review", "finish")
builder.add_edge("finish", END)

graph = builder.compile()
