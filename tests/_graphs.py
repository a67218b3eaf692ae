"""A state schema with one key per reducer kind, and a chain of nodes over it (shared by tests)."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from interlock import START, Graph, append, merge


class S(TypedDict, total=False):
    log: Annotated[list[str], append]
    meta: Annotated[dict[str, Any], merge]
    total: Annotated[int, operator.add]
    last: str


def chain(*names: str) -> Graph[S]:
    """A graph that runs ``names`` one after another, each logging its name."""
    g = Graph(S)
    prev = START
    for n in names:
        g.add_node(n, lambda s, n=n: {"log": [n], "last": n})
        g.add_edge(prev, n)
        prev = n
    return g
