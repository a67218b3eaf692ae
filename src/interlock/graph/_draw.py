"""Drawing a plan as Mermaid text (`CompiledGraph.draw`).

The drawing is a ``flowchart TD``: the graph's start and end as small round nodes, every node
in declaration order, plain edges as arrows and conditional edges dashed. A node that runs a
graph of its own (a subgraph, or a node whose ``metadata["graph"]`` names the graph it runs)
is a Mermaid ``subgraph`` block holding that graph, drawn the same way, at any depth.

Node ids are made from positions, never from names (``n0``, ``n1``, and ``n1_n0`` for the
first node of the graph inside ``n1``), so no name can break the text; names are shown in
quoted labels with Mermaid's entity codes for the characters that mean something to it. The
same plan always gives the same text.

A drawing may show where a thread stands: ``marks`` name nodes by their path (the names of the
nodes on the way down, ``"supervisor/researcher/tools"``, as `node_path` reads them from an
interrupt's address) and give each a class: ``waiting``, ``done``, ``failed`` or ``next``.

This module reads a plan through the small `Plan` protocol, so it does not import the builder
(which imports it).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, Union

__all__ = ["AFTER_MARK", "BEFORE_MARK", "GATED_MARK", "MARKS", "Mark", "Plan", "draw", "node_path"]

Mark = Literal["waiting", "done", "failed", "next"]
"""Where a thread stands at a node: waiting on a person there, ran in the current run, failed
there, or runs next."""
MARKS: Final[tuple[Mark, ...]] = typing.get_args(Mark)

BEFORE_MARK: Final = "⏸"
"""Shown before the name of a node the graph pauses before (``interrupt_before``)."""
AFTER_MARK: Final = "⏸"
"""Shown after the name of a node the graph pauses after (``interrupt_after``)."""
GATED_MARK: Final = "🔒"
"""Shown before a tool that may wait for a person's approval."""

_INDENT: Final = "    "
_CLASSES: Final = {
    "terminal": "fill:#f3f4f6,stroke:#6b7280,color:#111827",
    "interruptBefore": "stroke:#d97706,stroke-width:3px",
    "interruptAfter": "stroke:#d97706,stroke-width:3px,stroke-dasharray:4 2",
    "gated": "stroke:#dc2626,stroke-width:2px",
    # The marks of a thread's position come last: their styles win over the ones above.
    "done": "fill:#dcfce7,stroke:#16a34a,color:#14532d",
    "next": "stroke:#2563eb,stroke-width:2px,stroke-dasharray:5 3",
    "failed": "fill:#fee2e2,stroke:#dc2626,stroke-width:3px,color:#7f1d1d",
    "waiting": "fill:#fef3c7,stroke:#d97706,stroke-width:4px,color:#78350f",
}
"""The classes a drawing may use, in the order their ``classDef`` lines are written."""
_PRECEDENCE: Final[dict[Mark, int]] = {"done": 0, "next": 1, "failed": 2, "waiting": 3}
"""Which mark a node keeps when it is given two (a block holding a waiting node is waiting)."""

# Characters that mean something to Mermaid inside a quoted label, written as its entity codes.
_ENTITIES: Final = {ch: f"#{ord(ch)};" for ch in '"#&<>`|'}
_LINE_BREAKS: Final = frozenset("\u0085\u2028\u2029")


class Plan(Protocol):
    """What a drawing reads of a plan (a `CompiledGraph` has it all)."""

    @property
    def nodes(self) -> Mapping[str, Any]:
        """Node name → its `NodeSpec`, in declaration order."""
        ...

    @property
    def edges(self) -> Mapping[str, tuple[str, ...]]:
        """Source → the targets of its plain edges."""
        ...

    @property
    def branches(self) -> Mapping[str, tuple[Any, ...]]:
        """Source → its conditional edges (`Branch`)."""
        ...

    @property
    def interrupt_before(self) -> frozenset[str]:
        """Nodes the graph pauses before."""
        ...

    @property
    def interrupt_after(self) -> frozenset[str]:
        """Nodes the graph pauses after."""
        ...


class AddressSegment(Protocol):
    """What `node_path` reads of one level of an address (an `interlock.Segment` has it)."""

    @property
    def kind(self) -> str:
        """``graph``, ``node``, ``subgraph``, ``tool`` or ``agent``."""
        ...

    @property
    def name(self) -> str:
        """The node's, tool's or agent's name."""
        ...


def node_path(address: Iterable[AddressSegment]) -> str:
    """The path of the node an address lies in, as `CompiledGraph.draw`'s ``marks`` name it.

    The names of the nodes on the way down, joined by ``/``: a node's name at each level, and
    the name of a tool whose call ran a graph of its own (an agent offered with
    ``as_tool()``) before the nodes of that graph. Agents' and tools' own levels are not
    drawn as nodes, so they are left out.

    Examples:
        >>> from interlock import Address
        >>> node_path(Address.parse(
        ...     "node:researcher/agent:boss/node:tools/agent:researcher/tool:search:call_1"
        ... ))
        'researcher/tools'
        >>> node_path(Address.parse("node:tools/agent:outer/tool:helper:c1/node:tools"))
        'tools/helper/tools'
    """
    names: list[str] = []
    tool: str | None = None
    for segment in address:
        if segment.kind in ("node", "subgraph"):
            if tool is not None:
                names.append(tool)  # the call ran a graph: its nodes are inside the tool's block
                tool = None
            names.append(segment.name)
        elif segment.kind == "tool":
            tool = segment.name
    return "/".join(names)


def draw(
    plan: Plan,
    *,
    start: str,
    end: str,
    marks: Mapping[str, Mark] | None = None,
    show_tool: Callable[[str], bool] | None = None,
) -> str:
    """The plan as a Mermaid ``flowchart TD`` (see `CompiledGraph.draw`).

    Args:
        plan: The plan to draw.
        start: The name edges use for the graph's start (`START`).
        end: The name edges use for the graph's end (`END`).
        marks: Node path → `Mark`: the class each named node gets.
        show_tool: Which tools to show, by name (None: all).
    """
    checked = _checked_marks(marks)
    if show_tool is not None and not callable(show_tool):
        raise TypeError(f"show_tool must be a function of a tool's name, not {show_tool!r:.60}")
    drawing = _Drawing(start, end, show_tool or _every_tool)
    drawing.graph(plan, "", "", 1)
    drawing.mark(checked)
    return drawing.text()


def _checked_marks(marks: Mapping[str, Mark] | None) -> dict[str, Mark]:
    if marks is None:
        return {}
    if not isinstance(marks, Mapping):
        raise TypeError(
            f"marks must be a mapping of node paths to marks ({', '.join(MARKS)}), "
            f"not {type(marks).__name__}"
        )
    out: dict[str, Mark] = {}
    for path, mark in marks.items():
        if not isinstance(path, str):
            raise TypeError(f"marks: a node path must be a str like 'agent/tools', not {path!r}")
        if mark not in MARKS:
            raise ValueError(
                f"marks[{path!r}] is {mark!r}: a mark is one of {', '.join(map(repr, MARKS))}"
            )
        out[path] = mark
    return out


def _every_tool(name: str) -> bool:
    return True


class _Drawing:
    """The lines of one drawing, and the classes its nodes were given."""

    def __init__(self, start: str, end: str, show_tool: Callable[[str], bool]) -> None:
        self.start = start
        self.end = end
        self.show_tool = show_tool
        self.lines: list[str] = ["flowchart TD"]
        self.classes: dict[str, list[str]] = {name: [] for name in _CLASSES}
        self.ids: dict[str, str] = {}
        """Node path → its id, in the order the nodes are drawn."""

    def text(self) -> str:
        out = list(self.lines)
        for name, style in _CLASSES.items():
            if self.classes[name]:
                out.append(f"{_INDENT}classDef {name} {style}")
        for name in _CLASSES:
            if self.classes[name]:
                out.append(f"{_INDENT}class {','.join(self.classes[name])} {name}")
        return "\n".join(out) + "\n"

    def mark(self, marks: Mapping[str, Mark]) -> None:
        """Give the drawn nodes ``marks`` name their classes (paths not drawn are left out)."""
        given: dict[str, Mark] = {}

        def give(path: str, mark: Mark) -> None:
            held = given.get(path)
            if held is None or _PRECEDENCE[mark] > _PRECEDENCE[held]:
                given[path] = mark

        for path, mark in marks.items():
            if path in self.ids:
                give(path, mark)
            if mark == "waiting":
                # Each drawn block on the way waits too, even when the node itself is not drawn
                # (a tool's call that ran a graph of its own the picture does not know).
                names = path.split("/")
                for i in range(1, len(names)):
                    above = "/".join(names[:i])
                    if above in self.ids:
                        give(above, "waiting")
        for path, node_id in self.ids.items():  # drawing order: the same marks, the same text
            if path in given:
                self.classes[given[path]].append(node_id)

    def graph(self, plan: Plan, prefix: str, path: str, depth: int) -> None:
        """Write ``plan``'s nodes and edges at ``depth``, their ids starting with ``prefix``
        and their paths with ``path``."""
        pad = _INDENT * depth
        ids = {self.start: f"{prefix}__start__", self.end: f"{prefix}__end__"}
        for i, name in enumerate(plan.nodes):
            ids[name] = f"{prefix}n{i}"
        self.lines.append(f'{pad}{ids[self.start]}(("start"))')
        self.classes["terminal"].append(ids[self.start])
        for name, spec in plan.nodes.items():
            self.node(plan, name, spec, ids[name], f"{path}{name}", depth)
        self.lines.append(f'{pad}{ids[self.end]}(("end"))')
        self.classes["terminal"].append(ids[self.end])
        for source in (self.start, *plan.nodes):
            for target in plan.edges.get(source, ()):
                if target in ids:
                    self.lines.append(f"{pad}{ids[source]} --> {ids[target]}")
            for branch in plan.branches.get(source, ()):
                for target, label in self.routes(plan, branch):
                    if target not in ids:
                        continue  # a path map naming no node: the run refuses to go there
                    shown = f'|"{_escape(label)}"|' if label else ""
                    self.lines.append(f"{pad}{ids[source]} -.->{shown} {ids[target]}")

    def node(self, plan: Plan, name: str, spec: Any, node_id: str, path: str, depth: int) -> None:
        """Write one node: a box, or a block holding the graph it runs and the graphs its
        tools run (agents offered as tools)."""
        self.ids[path] = node_id
        pad = _INDENT * depth
        label = _escape(name)
        if name in plan.interrupt_before:
            label = f"{BEFORE_MARK} {label}"
            self.classes["interruptBefore"].append(node_id)
        if name in plan.interrupt_after:
            label = f"{label} {AFTER_MARK}"
            self.classes["interruptAfter"].append(node_id)
        metadata: Mapping[str, Any] = getattr(spec, "metadata", None) or {}
        # Positions among all the tools, so that a tool's block keeps its id when some are hidden.
        shown: list[tuple[int, Mapping[str, Any]]] = [
            (i, t)
            for i, t in enumerate(metadata.get("tools") or ())
            if self.show_tool(str(t.get("name", "")))
        ]
        tools = [t for _, t in shown]
        for tool in tools:
            if tool.get("graph") is None:  # a tool running a graph is its own block, below
                label += f"<br>{_tool_label(tool)}"
        if any(tool.get("gated") for tool in tools):
            self.classes["gated"].append(node_id)
        subgraph = getattr(spec, "subgraph", None)
        inner: Plan | None = subgraph.plan if subgraph is not None else metadata.get("graph")
        agents = [(i, tool) for i, tool in shown if tool.get("graph") is not None]
        if inner is None and not agents:
            self.lines.append(f'{pad}{node_id}["{label}"]')
            return
        self.lines.append(f'{pad}subgraph {node_id} ["{label}"]')
        if inner is not None:
            self.graph(inner, f"{node_id}_", f"{path}/", depth + 1)
        for i, tool in agents:
            # Ids from the tool's position (t0, t1...), as nodes' are: never from its name.
            tool_id = f"{node_id}_t{i}"
            tool_path = f"{path}/{tool.get('name', '')}"
            self.ids[tool_path] = tool_id
            self.lines.append(f'{pad}{_INDENT}subgraph {tool_id} ["{_tool_label(tool)}"]')
            self.graph(tool["graph"], f"{tool_id}_", f"{tool_path}/", depth + 2)
            self.lines.append(f"{pad}{_INDENT}end")
        self.lines.append(f"{pad}end")

    def routes(self, plan: Plan, branch: Any) -> list[tuple[str, str]]:
        """Where a conditional edge may lead: ``(target, label)`` pairs, in a fixed order.

        With a path map, each target it names, labelled with the keys leading there (a key
        that is the target's own name is not repeated). Without one, the names of the route's
        ``Literal[...]`` return annotation; failing that, every node and the end, labelled
        with the route's name, since any of them may be picked.
        """
        path_map: Mapping[Any, str] | None = branch.path_map
        if path_map is not None:
            keys: dict[str, list[str]] = {}
            for key, target in path_map.items():
                shown = key if isinstance(key, str) else repr(key)
                keys.setdefault(target, [])
                if shown != target:
                    keys[target].append(shown)
            return [(target, ", ".join(labels)) for target, labels in keys.items()]
        named = _literal_names(branch.route)
        if named is not None:
            return [(target, "") for target in named]
        label = _route_name(branch.route)
        return [(target, label) for target in (*plan.nodes, self.end)]


def _tool_label(tool: Mapping[str, Any]) -> str:
    """A tool as a drawing shows it: its name, marked when it may wait for approval."""
    mark = f"{GATED_MARK} " if tool.get("gated") else ""
    return f"{mark}{_escape(str(tool.get('name', '')))}"


def _escape(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label (line breaks and control codes as spaces)."""
    out: list[str] = []
    for ch in text:
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch < " " or ch == "\x7f" or ch in _LINE_BREAKS:
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def _route_name(route: Callable[..., Any]) -> str:
    """How a route is named on the edges drawn for it."""
    while isinstance(route, functools.partial):
        route = route.func
    name = getattr(route, "__name__", None)
    return name if isinstance(name, str) else type(route).__name__


def _literal_names(route: Callable[..., Any]) -> list[str] | None:
    """The names a route's return annotation allows, when it is made of ``Literal[...]``s of
    strings (in unions, optionals and lists of them); else None."""
    while isinstance(route, functools.partial):
        route = route.func
    target: Any = route
    if not (inspect.isfunction(route) or inspect.ismethod(route)):
        target = getattr(type(route), "__call__", None)  # noqa: B004 - callable objects
    try:
        annotation = typing.get_type_hints(target).get("return")
    except Exception:  # an annotation that does not resolve: nothing to infer from
        return None
    if annotation is None:
        return None
    names: list[str] = []
    if not _collect(annotation, names):
        return None
    return list(dict.fromkeys(names))


def _collect(annotation: Any, names: list[str]) -> bool:
    """Add the names ``annotation`` allows to ``names``; False if it allows anything else."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        args = typing.get_args(annotation)
        if not all(isinstance(a, str) for a in args):
            return False
        names.extend(args)
        return True
    if origin is Union or origin is types.UnionType:
        return all(_collect(a, names) for a in typing.get_args(annotation))
    if annotation is type(None):
        return True  # no successor
    if origin in (list, tuple, Sequence):
        items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return bool(items) and all(_collect(a, names) for a in items)
    return False
