"""Time travel: resuming from a past checkpoint starts a new lineage there."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, TypedDict

import pytest

from interlock import START, Graph, Store, append

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    log: Annotated[list[str], append]


def chain(entries: Counter[str]) -> Graph[S]:
    g = Graph(S)
    prev = START
    for n in ("a", "b", "c"):

        def node(s: S, n: str = n) -> dict[str, Any]:
            entries[n] += 1
            return {"log": [n]}

        g.add_node(n, node).add_edge(prev, n)
        prev = n
    return g


async def test_resuming_a_past_checkpoint_without_questions_branches_there(store: Store) -> None:
    entries: Counter[str] = Counter()
    app = chain(entries).compile(store=store)
    first = await app.run({}, thread="t")
    old = await app.history("t")
    (past,) = [s for s in old if s.next == ("b",)]
    assert past.interrupts == [] and past.status == "ready"

    again = await app.resume("t", checkpoint_id=past.checkpoint_id)
    assert again.values["log"] == ["a", "b", "c"] and entries == Counter(a=1, b=2, c=2)
    # Walk the new head back to the branch point: none of the abandoned checkpoints is on it.
    by_id = {s.checkpoint_id: s for s in await app.history("t", limit=100)}
    assert first.checkpoint_id in by_id
    lineage, cur = [], again.checkpoint_id
    while cur != past.checkpoint_id:
        assert cur is not None
        lineage.append(cur)
        cur = by_id[cur].parent_id
    abandoned = {s.checkpoint_id for s in old} - {
        s.checkpoint_id for s in old if s.step <= past.step
    }
    assert first.checkpoint_id in abandoned and not abandoned & set(lineage)
    assert by_id[lineage[-1]].parent_id == past.checkpoint_id
    state = await app.get_state("t")
    assert state.checkpoint_id == again.checkpoint_id and state.values["log"] == ["a", "b", "c"]
