"""Building a graph: a mistake in its definition is a GraphDefinitionError, raised at once."""

from __future__ import annotations

import pytest

from _graphs import S, chain
from interlock import START, Graph, GraphDefinitionError


def test_definition_errors_are_clear() -> None:
    g = Graph(S)
    with pytest.raises(GraphDefinitionError, match="no nodes"):
        g.compile()
    g.add_node("a", lambda s: None)
    with pytest.raises(GraphDefinitionError, match="no entry"):
        g.compile()
    with pytest.raises(GraphDefinitionError, match="already in the graph"):
        g.add_node("a", lambda s: None)
    g.add_edge(START, "a").add_edge("a", "ghost")
    with pytest.raises(GraphDefinitionError, match="unknown node 'ghost'"):
        g.compile()
    with pytest.raises(GraphDefinitionError, match="TypedDict, a dataclass or a pydantic"):
        Graph(int)
    with pytest.raises(GraphDefinitionError, match="interrupt_before names unknown"):
        chain("x").compile(interrupt_before=["y"])
