"""The graph definition: nodes, edges, and the frozen plan the runtime executes.

This layer describes a graph and checks it; it runs nothing. `GraphBuilder` collects nodes and
edges and turns them into a `CompiledGraph`; the runtime's `interlock.Graph` adds ``compile``,
which binds that plan to a store as an `App`. A compiled graph used as a node of another one
is seen here only through the small `Subgraph` protocol, never as an `App`.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    Protocol,
    Self,
    TypeVar,
    runtime_checkable,
)

import msgspec

from .._errors import GraphDefinitionError
from .._lazy import lazy_module
from ..serde import Codec, collect_types
from ._chunks import MessageChunk, ToolCallChunk, Usage
from ._draw import Mark, draw
from ._schema import StateSchema

if TYPE_CHECKING:
    import hashlib
else:  # imported by the first call that needs it, not by `import interlock`
    hashlib = lazy_module("hashlib", globals())

# Chunk types a streaming node may yield; every graph's checkpoint codec knows them.
STREAM_TYPES: tuple[type[Any], ...] = (MessageChunk, ToolCallChunk, Usage)

__all__ = [
    "END",
    "START",
    "CompiledGraph",
    "Durability",
    "GraphBuilder",
    "Migration",
    "NodeKind",
    "NodeSpec",
    "Subgraph",
]

StateT = TypeVar("StateT")

START: Final = "__start__"
"""The virtual node a graph starts from: ``add_edge(START, "first")``."""
END: Final = "__end__"
"""The virtual node that ends a path: route to it to stop."""

Durability = Literal["sync", "exit"]
"""``sync``: commit a checkpoint at every superstep; ``exit``: only when the run stops."""

NodeKind = Literal["node", "subgraph"]
"""What a node is: a callable, or a compiled graph run as one task."""

Route = Callable[[Any], Any]
Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Carries a checkpoint's state values, written by an older graph, over to this one."""


@runtime_checkable
class Subgraph(Protocol):
    """A compiled graph that can run as a node of another graph (an `App` is one).

    The engine needs only its plan and how many supersteps one run of it may take.
    """

    @property
    def plan(self) -> CompiledGraph:
        """The subgraph's frozen plan."""
        ...

    @property
    def recursion_limit(self) -> int:
        """Most supersteps one run of the subgraph may take."""
        ...


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One node of a graph."""

    name: str
    """The node's name (unique in its graph)."""
    fn: Callable[..., Any] | None = None
    """The callable (None for a subgraph node)."""
    is_async: bool = False
    """The callable is a coroutine function (or an object whose ``__call__`` is one)."""
    subgraph: Subgraph | None = None
    """A compiled graph run as this node."""
    is_stream: bool = False
    """The callable is an async generator: its chunks stream out, their concatenation is the
    node's update."""
    dangerous: bool = False
    """The node is a side effect called at most once per task (see `interlock.effect`)."""
    metadata: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """What the node is, for pictures of the graph (see `GraphBuilder.add_node`); the engine
    never reads it, and it is not part of the graph's fingerprint, its equality or its hash."""

    @property
    def kind(self) -> NodeKind:
        """``subgraph`` for a compiled graph, ``node`` for a callable."""
        return "subgraph" if self.subgraph is not None else "node"

    def _compared(self) -> tuple[Any, ...]:
        return (self.name, self.fn, self.is_async, self.subgraph, self.is_stream, self.dangerous)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeSpec) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())


class Branch(msgspec.Struct, frozen=True, kw_only=True):
    """A conditional edge: ``route(state)`` picks the successors."""

    route: Route
    """Called with the state after the source's step; returns the successors."""
    path_map: Mapping[Any, str] | None
    """Maps what ``route`` returns to node names (None: it returns names)."""


class CompiledGraph(msgspec.Struct, frozen=True, kw_only=True):
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
    top_addresses: dict[Any, Any] = msgspec.field(default_factory=dict)
    """A cache the engine keeps: the address of each (node, sub id) task of a top-level run;
    not part of the plan's equality or ``repr``.

    Typed loosely because addresses are the runtime's type, which this layer cannot import."""

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _PLAN_FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompiledGraph) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _PLAN_FIELDS)
        return f"{type(self).__qualname__}({shown})"

    def draw(
        self,
        *,
        marks: Mapping[str, Mark] | None = None,
        show_tool: Callable[[str], bool] | None = None,
    ) -> str:
        """The graph as Mermaid text: a ``flowchart TD`` to paste into any Mermaid viewer.

        Drawn: the start and the end as small round nodes; every node, in declaration order;
        plain edges as arrows; conditional edges dashed, labelled with their path map's keys
        (a key that is its target's own name is not repeated). A route without a path map is
        drawn to the names of its ``Literal[...]`` return annotation, as LangGraph does; a
        route without one may go anywhere, so it is drawn as a dashed edge to every node and
        the end, labelled with the route's name. Where a node sends a `Command` or `Send`
        is decided as it runs, and is not drawn.

        A node the graph pauses before (``interrupt_before``) shows ``⏸`` before its name and
        has the class ``interruptBefore``; one it pauses after shows ``⏸`` after its name and
        has the class ``interruptAfter``. A subgraph node, or a node whose metadata names the
        graph it runs (``metadata={"graph": plan}``, as the agent compositions do for their
        children), is a block holding that graph, at any depth. A node whose metadata lists
        tools (``metadata={"tools": [{"name": ..., "gated": ...}]}``, as a `ToolAgent`'s tools
        node does) shows them under its name, those that may wait for approval marked ``🔒``;
        it then has the class ``gated``. A tool that runs a graph of its own (an agent offered
        with ``as_tool()``: ``{"name": ..., "gated": ..., "graph": plan}``) is a block named
        after the tool inside the node, holding that graph.

        ``marks`` show where a thread stands: node path → ``"waiting"``, ``"done"``,
        ``"failed"`` or ``"next"`` (`Mark`), the node's class (styled by a ``classDef``). A
        path is the names of the nodes on the way down, joined by ``/``: ``"agent"`` at the
        top, ``"supervisor/researcher/tools"`` inside blocks, with the name of a tool that
        runs a graph before that graph's nodes (``"tools/helper/model"``); `node_path` reads
        it from an interrupt's address. Every block holding a waiting node is marked waiting
        too. A path the drawing does not have is ignored, since a thread may have been
        written by an older graph. A node given two marks keeps the first of ``waiting``,
        ``failed``, ``next``, ``done``.

        ``show_tool`` picks the tools shown, by name (an approval server draws for an identity
        whose scope leaves some out); a hidden tool's block goes with it, and the others keep
        their ids.

        Ids come from positions (``n0``, ``n1``, ``n1_n0`` inside ``n1``), never from names,
        so any name is safe; the same plan always gives the same text.

        Examples:
            >>> from typing import TypedDict
            >>> from interlock.graph import GraphBuilder, START, END
            >>> class S(TypedDict):
            ...     n: int
            >>> g = GraphBuilder(S).add_node("a", lambda s: None)
            >>> print(g.add_edge(START, "a").add_edge("a", END).plan((), ()).draw(), end="")
            flowchart TD
                __start__(("start"))
                n0["a"]
                __end__(("end"))
                __start__ --> n0
                n0 --> __end__
                classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827
                class __start__,__end__ terminal
            >>> marked = g.plan((), ()).draw(marks={"a": "waiting", "gone": "done"})
            >>> marked.splitlines()[-2:]
            ['    class __start__,__end__ terminal', '    class n0 waiting']
        """
        return draw(self, start=START, end=END, marks=marks, show_tool=show_tool)


_PLAN_FIELDS: Final = tuple(f for f in CompiledGraph.__struct_fields__ if f != "top_addresses")
"""The fields of a plan that its equality, hash and ``repr`` take (not the engine's cache)."""


class GraphBuilder(Generic[StateT]):
    """Collect a graph's nodes and edges over a state schema and check them into a plan.

    `interlock.Graph` is this builder plus ``compile``; its docstring shows the whole API.

    Args:
        schema: A TypedDict, dataclass or pydantic model class. Keys annotated with
            ``Annotated[T, reducer]`` merge writes with the reducer (`append`, `merge`, or any
            ``fn(current, update)``); other keys take the last write, and two writes to them in
            one superstep are an error.
        types: Extra types the checkpoint codec must know (those in the schema are collected).
        name: The graph's name (shown in addresses of subgraphs and in errors).
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
        node: Callable[..., Any] | Subgraph,
        *,
        dangerous: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Self:
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
                Without it a node may run more than once (at least once); it reads a stable
                key for the outside system with `interlock.effect_key()`.
            metadata: What the node is, for pictures of the graph (`CompiledGraph.draw`);
                the engine never reads it, and it does not change the graph's fingerprint.
                Two keys are drawn: ``"graph"``, the plan (or compiled `App`) of a graph the
                node runs as a child, drawn inside the node; and ``"tools"``, a list of
                ``{"name": str, "gated": bool}``, shown in the node with the gated ones
                marked (a tool with a ``"graph"`` too, the plan or App the tool runs, is
                drawn as a block holding it).
        """
        if not name or name in (START, END) or "/" in name or ":" in name:
            raise GraphDefinitionError(f"invalid node name {name!r}")
        if name in self._nodes:
            raise GraphDefinitionError(f"node {name!r} is already in the graph")
        if isinstance(node, Subgraph) and isinstance(node.plan, CompiledGraph):
            if dangerous:
                raise GraphDefinitionError(
                    f"subgraph node {name!r} cannot be dangerous; mark its own nodes instead"
                )
            spec = NodeSpec(name=name, is_async=True, subgraph=node)
        elif callable(node):
            is_async = inspect.iscoroutinefunction(node) or inspect.iscoroutinefunction(
                getattr(node, "__call__", None)  # noqa: B004 - async callable objects
            )
            is_stream = inspect.isasyncgenfunction(node) or inspect.isasyncgenfunction(
                getattr(node, "__call__", None)  # noqa: B004
            )
            if dangerous and is_stream:
                raise GraphDefinitionError(
                    f"node {name!r} streams, so it cannot be dangerous: make the side effect "
                    "a plain node, or call it with interlock.effect() inside"
                )
            spec = NodeSpec(
                name=name, fn=node, is_async=is_async, is_stream=is_stream, dangerous=dangerous
            )
        else:
            raise GraphDefinitionError(f"node {name!r} must be callable or an App, got {node!r}")
        if metadata is not None:
            spec = msgspec.structs.replace(spec, metadata=_checked_metadata(name, metadata))
        self._nodes[name] = spec
        return self

    def add_edge(self, source: str, target: str) -> Self:
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
    ) -> Self:
        """After ``source``, call ``route(state)`` to pick successors.

        ``route`` returns a node name, `END`, a list of names, a `Send` or a list of `Send`s. It
        runs at the step boundary, on the state after every write of the step.
        """
        mapping: Mapping[Any, str] | None
        if path_map is None or isinstance(path_map, Mapping):
            mapping = path_map
        else:
            mapping = {name: name for name in path_map}
        self._branches.setdefault(source, []).append(Branch(route=route, path_map=mapping))
        return self

    def plan(
        self,
        before: Sequence[str] | Literal["*"],
        after: Sequence[str] | Literal["*"],
    ) -> CompiledGraph:
        """Check the graph and return its frozen plan (with the given breakpoints).

        Raises:
            GraphDefinitionError: The graph has no entry, or an edge or breakpoint names an
                unknown node.
        """
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


def _checked_metadata(node: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A node's metadata, its drawn keys checked (a child graph given as an App is its plan)."""
    if not isinstance(metadata, Mapping):
        raise GraphDefinitionError(
            f"node {node!r}: metadata must be a mapping, not {type(metadata).__name__}"
        )
    out = dict(metadata)
    graph = out.get("graph")
    if graph is not None:
        if isinstance(graph, Subgraph) and isinstance(graph.plan, CompiledGraph):
            out["graph"] = graph.plan
        elif not isinstance(graph, CompiledGraph):
            raise GraphDefinitionError(
                f"node {node!r}: metadata['graph'] must be the CompiledGraph (or compiled App) "
                f"the node runs, not {type(graph).__name__}"
            )
    tools = out.get("tools")
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise GraphDefinitionError(
                f"node {node!r}: metadata['tools'] must be a list of "
                '{"name": str, "gated": bool}, not ' + type(tools).__name__
            )
        checked: list[dict[str, Any]] = []
        for tool in tools:
            if (
                not isinstance(tool, Mapping)
                or not isinstance(tool.get("name"), str)
                or not isinstance(tool.get("gated", False), bool)
            ):
                raise GraphDefinitionError(
                    f"node {node!r}: each of metadata['tools'] must be "
                    f'{{"name": str, "gated": bool}}, not {tool!r:.80}'
                )
            entry = dict(tool)
            runs = entry.get("graph")
            if runs is not None:
                if isinstance(runs, Subgraph) and isinstance(runs.plan, CompiledGraph):
                    entry["graph"] = runs.plan
                elif not isinstance(runs, CompiledGraph):
                    raise GraphDefinitionError(
                        f"node {node!r}: the 'graph' of tool {entry['name']!r} in "
                        "metadata['tools'] must be the CompiledGraph (or compiled App) the tool "
                        f"runs, not {type(runs).__name__}"
                    )
            checked.append(entry)
        out["tools"] = tuple(checked)
    return out
