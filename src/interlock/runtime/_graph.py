"""`Graph`: the graph builder of `interlock.graph`, plus ``compile`` into a runnable `App`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

from ..graph._builder import Durability, GraphBuilder, Migration
from ..stores import Store
from ._app import App
from ._authority import Authority
from ._usage import Price

__all__ = ["Graph"]

StateT = TypeVar("StateT")


class Graph(GraphBuilder[StateT]):
    """Build a graph over a state schema, then `compile` it into an `App`.

    Args:
        schema: A TypedDict, dataclass or pydantic model class. Keys annotated with
            ``Annotated[T, reducer]`` merge writes with the reducer (`append`, `merge`, or any
            ``fn(current, update)``); other keys take the last write, and two writes to them in
            one superstep are an error.
        types: Extra types the checkpoint codec must know (those in the schema are collected).
        name: The graph's name (shown in addresses of subgraphs and in errors).

    Examples:
        >>> from typing import Annotated, TypedDict
        >>> from interlock import Graph, START, append
        >>> class S(TypedDict):
        ...     log: Annotated[list[str], append]
        >>> g = Graph(S)
        >>> _ = g.add_node("hello", lambda s: {"log": ["hi"]})
        >>> _ = g.add_edge(START, "hello")
        >>> g.compile().run_sync({"log": []}, thread="t").values
        {'log': ['hi']}
    """

    def compile(
        self,
        *,
        store: Store | None = None,
        interrupt_before: Sequence[str] | Literal["*"] = (),
        interrupt_after: Sequence[str] | Literal["*"] = (),
        durability: Durability = "sync",
        recursion_limit: int = 100,
        lease_ttl: float = 30.0,
        migrations: Mapping[str, Migration] | None = None,
        authority: Authority | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> App[StateT]:
        """Check the graph and return a runnable `App`.

        Args:
            store: Where checkpoints go (default: a new `MemoryStore`).
            interrupt_before: Nodes to pause before (``"*"`` for all).
            interrupt_after: Nodes to pause after (``"*"`` for all).
            durability: ``"sync"`` commits each superstep; ``"exit"`` only when the run stops.
            recursion_limit: Most supersteps one call may take.
            lease_ttl: Seconds a run's lease on its thread outlives the run's last sign of life
                (it is renewed every ``lease_ttl / 3`` while the run works). A thread whose
                runner died is free again after this long.
            migrations: ``{old_fingerprint: fn}``: checkpoints written by a graph with that
                fingerprint are loaded through ``fn(values) -> values`` instead of raising
                `GraphChanged` (see `App.fingerprint`).
            authority: Rules every question of this App's threads must also meet, whatever
                surface decides it: ``Authority(not_starter=True)`` is four eyes on every
                question; a question's own `Authority` says who may decide it (see
                `App.decide`).
            prices: ``{model: Price}``: what each model costs per million tokens, so that the
                usage totals of threads (``metadata["usage"]``) say what they cost. A model
                is priced by its own name, else by the longest name it starts with.
        """
        return App(
            self.plan(interrupt_before, interrupt_after),
            store=store,
            durability=durability,
            recursion_limit=recursion_limit,
            lease_ttl=lease_ttl,
            migrations=migrations,
            authority=authority,
            prices=prices,
        )
