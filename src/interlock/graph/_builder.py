"""The graph builder: nodes, edges and the compiled plan the engine runs."""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

from .._errors import GraphDefinitionError
from ..runtime._chunks import MessageChunk, ToolCallChunk
from ..serde import Codec, collect_types
from ._schema import StateSchema

# Chunk types a streaming node may yield; every graph's checkpoint codec knows them.
STREAM_TYPES: tuple[type[Any], ...] = (MessageChunk, ToolCallChunk)

if TYPE_CHECKING:
    from ..runtime._app import App
    from ..stores import Store

__all__ = ["END", "START", "CompiledGraph", "Durability", "Graph", "NodeSpec"]

StateT = TypeVar("StateT")

START: Final = "__start__"
"""The virtual node a graph starts from: ``add_edge(START, "first")``."""
END: Final = "__end__"
"""The virtual node that ends a path: route to it to stop."""

Durability = Literal["sync", "exit"]
"""``sync``: commit a checkpoint at every superstep; ``exit``: only when the run stops."""

Route = Callable[[Any], Any]
Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Carries a checkpoint's state values, written by an older graph, over to this one."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of a graph."""

    name: str
    fn: Callable[..., Any] | None
    """The callable (None for a subgraph node)."""
    is_async: bool
    subgraph: App[Any] | None
    """A compiled graph run as this node."""
    is_stream: bool = False
    """The callable is an async generator: its chunks stream out, their concatenation is the
    node's update."""
    dangerous: bool = False
    """The node is a side effect called at most once per task (see `interlock.effect`)."""

    @property
    def kind(self) -> str:
        return "subgraph" if self.subgraph is not None else "node"


@dataclass(frozen=True, slots=True)
class Branch:
    """A conditional edge: ``route(state)`` picks the successors."""

    route: Route
    path_map: Mapping[Any, str] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class CompiledGraph:
    """The immutable plan the engine runs (shared by every run of an App)."""

    name: str
    schema: StateSchema
    nodes: Mapping[str, NodeSpec]
    order: Mapping[str, int]
    """Node name → declaration index: tasks and writes are ordered by it (determinism)."""
    edges: Mapping[str, tuple[str, ...]]
    branches: Mapping[str, tuple[Branch, ...]]
    interrupt_before: frozenset[str]
    interrupt_after: frozenset[str]
    codec: Codec
    types: tuple[type[Any], ...]
    """The types registered with `codec` (a parent graph registers its subgraphs' types too)."""
    fingerprint: str


class Graph(Generic[StateT]):
    """Build a graph over a state schema, then `compile` it into an `App`.

    Args:
        schema: A TypedDict, dataclass or pydantic model class. Keys annotated with
            ``Annotated[T, reducer]`` merge writes with the reducer (`append`, `merge`, or any
            ``fn(current, update)``); other keys take the last write, and two writes to them in
            one superstep are an error.
        types: Extra types the checkpoint codec must know (those in the schema are collected).
        name: The graph's name (shown in addresses of subgraphs and in errors).

    Example:
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

    def __init__(
        self, schema: type[StateT], *, types: Iterable[type[Any]] = (), name: str = "graph"
    ) -> None:
        caller = sys._getframe(1)
        namespace = {**caller.f_globals, **caller.f_locals}
        self.schema = StateSchema(schema, namespace=namespace)
        self.name = name
        found: list[type[Any]] = []
        for spec in self.schema.fields.values():
            found.extend(t for t in collect_types(spec.annotation) if t not in found)
        self._types = [*found, *STREAM_TYPES, *types]
        self._nodes: dict[str, NodeSpec] = {}
        self._edges: dict[str, list[str]] = {}
        self._branches: dict[str, list[Branch]] = {}

    def add_node(
        self,
        name: str,
        node: Callable[..., Any] | App[Any],
        *,
        dangerous: bool = False,
        idempotent: bool = False,
    ) -> Graph[StateT]:
        """Add a node: ``def``/``async def`` taking the state, or a compiled `App` (subgraph).

        A node returns a dict of state updates, a `Command`, or None. An async generator node
        streams: each chunk it yields is emitted as a `ChunkEvent`, and the chunks joined by
        their concat rule (see `register_concat`) are its update.

        Args:
            name: The node's name.
            node: The callable or subgraph.
            dangerous: The node acts on the world and must run at most once per task: an
                effect record is written ``started`` before the call and ``done`` (with the
                update) after it. A task found ``started`` on a re-run (the process died
                mid-call) is not called again: it raises a ``reconcile`` interrupt for a person
                to answer ``"retry"`` or ``{"result": update}`` (see `interlock.effect`).
            idempotent: The node may run more than once (at least once); it reads a stable key
                for the outside system with `interlock.effect_key()`. Documentation only: this
                is what every node gets without ``dangerous``.
        """
        from ..runtime._app import App

        if not name or name in (START, END) or "/" in name or ":" in name:
            raise GraphDefinitionError(f"invalid node name {name!r}")
        if name in self._nodes:
            raise GraphDefinitionError(f"node {name!r} is already in the graph")
        if isinstance(node, App):
            if dangerous:
                raise GraphDefinitionError(
                    f"subgraph node {name!r} cannot be dangerous; mark its own nodes instead"
                )
            spec = NodeSpec(name, None, True, node)
        elif callable(node):
            is_async = inspect.iscoroutinefunction(node) or inspect.iscoroutinefunction(
                getattr(node, "__call__", None)  # noqa: B004 - async callable objects
            )
            is_stream = inspect.isasyncgenfunction(node) or inspect.isasyncgenfunction(
                getattr(node, "__call__", None)  # noqa: B004
            )
            if dangerous and idempotent:
                raise GraphDefinitionError(
                    f"node {name!r} cannot be both dangerous (at most once) and idempotent "
                    "(at least once); pick one"
                )
            if dangerous and is_stream:
                raise GraphDefinitionError(
                    f"node {name!r} streams, so it cannot be dangerous: make the side effect "
                    "a plain node, or call it with interlock.effect() inside"
                )
            spec = NodeSpec(name, node, is_async, None, is_stream, dangerous)
        else:
            raise GraphDefinitionError(f"node {name!r} must be callable or an App, got {node!r}")
        self._nodes[name] = spec
        return self

    def add_edge(self, source: str, target: str) -> Graph[StateT]:
        """Run ``target`` in the superstep after ``source`` finished."""
        if target == START or source == END:
            raise GraphDefinitionError(f"edge {source!r} -> {target!r} goes the wrong way")
        self._edges.setdefault(source, []).append(target)
        return self

    def add_conditional_edges(
        self,
        source: str,
        route: Route,
        path_map: Mapping[Any, str] | Sequence[str] | None = None,
    ) -> Graph[StateT]:
        """After ``source``, call ``route(state)`` to pick successors.

        ``route`` returns a node name, `END`, a list of names, a `Send` or a list of `Send`s. It
        runs at the step boundary, on the state after every write of the step.
        """
        mapping: Mapping[Any, str] | None
        if path_map is None or isinstance(path_map, Mapping):
            mapping = path_map
        else:
            mapping = {name: name for name in path_map}
        self._branches.setdefault(source, []).append(Branch(route, mapping))
        return self

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
        """
        from ..runtime._app import App

        plan = self._plan(interrupt_before, interrupt_after)
        return App(
            plan,
            store=store,
            durability=durability,
            recursion_limit=recursion_limit,
            lease_ttl=lease_ttl,
            migrations=migrations,
        )

    def _plan(
        self,
        before: Sequence[str] | Literal["*"],
        after: Sequence[str] | Literal["*"],
    ) -> CompiledGraph:
        if not self._nodes:
            raise GraphDefinitionError("the graph has no nodes")
        if START not in self._edges and START not in self._branches:
            raise GraphDefinitionError("the graph has no entry: add_edge(START, 'first_node')")
        for source, targets in self._edges.items():
            for name in (source, *targets):
                if name not in self._nodes and name not in (START, END):
                    raise GraphDefinitionError(
                        f"edge {source!r} -> {targets} names unknown node {name!r}; "
                        f"nodes: {sorted(self._nodes)}"
                    )
        for source in self._branches:
            if source not in self._nodes and source != START:
                raise GraphDefinitionError(f"conditional edge from unknown node {source!r}")
        before_set = self._breakpoints(before, "interrupt_before")
        after_set = self._breakpoints(after, "interrupt_after")
        types = list(dict.fromkeys(self._types))
        for spec in self._nodes.values():
            if spec.subgraph is not None:
                types.extend(t for t in spec.subgraph.plan.types if t not in types)
        codec = Codec(types=types)
        parts = [
            self.schema.describe(),
            ";".join(f"{n}={s.kind}" for n, s in self._nodes.items()),
            ";".join(f"{s}>{','.join(t)}" for s, t in sorted(self._edges.items())),
            ";".join(f"{s}?{len(b)}" for s, b in sorted(self._branches.items())),
        ]
        for spec in self._nodes.values():
            if spec.subgraph is not None:
                parts.append(f"{spec.name}[{spec.subgraph.plan.fingerprint}]")
        fingerprint = hashlib.blake2b("|".join(parts).encode(), digest_size=12).hexdigest()
        return CompiledGraph(
            name=self.name,
            schema=self.schema,
            nodes=dict(self._nodes),
            order={name: i for i, name in enumerate(self._nodes)},
            edges={k: tuple(v) for k, v in self._edges.items()},
            branches={k: tuple(v) for k, v in self._branches.items()},
            interrupt_before=before_set,
            interrupt_after=after_set,
            codec=codec,
            types=tuple(types),
            fingerprint=fingerprint,
        )

    def _breakpoints(self, names: Sequence[str] | Literal["*"], what: str) -> frozenset[str]:
        if names == "*":
            return frozenset(self._nodes)
        unknown = [n for n in names if n not in self._nodes]
        if unknown:
            raise GraphDefinitionError(f"{what} names unknown nodes {unknown}")
        return frozenset(names)
