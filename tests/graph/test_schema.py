"""State schemas: a dataclass or a pydantic model is a state, as a TypedDict is."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import pydantic
import pytest

from interlock import START, Graph, Store, append

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class DState:
    items: Annotated[list[int], append] = dataclasses.field(default_factory=list)
    label: str = ""


class PState(pydantic.BaseModel):
    items: Annotated[list[int], append] = []
    label: str = ""


@pytest.mark.parametrize("schema", [DState, PState])
async def test_dataclass_and_pydantic_states(store: Store, schema: type[Any]) -> None:
    seen: list[Any] = []

    def node(s: Any) -> dict[str, Any]:
        seen.append(s)
        return {"items": [len(s.items)], "label": "x"}

    g: Graph[Any] = Graph(schema)
    g.add_node("a", node).add_node("b", node)
    g.add_edge(START, "a").add_edge("a", "b")
    r = await g.compile(store=store).run(schema(items=[7]), thread="t")
    assert isinstance(seen[0], schema)
    assert isinstance(r.state, schema)
    assert r.values["items"] == [7, 1, 2]
    assert r.state.label == "x"
