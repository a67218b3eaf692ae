"""The import graph of `interlock`: one-way layers and no cycle (see docs/architecture.md).

Every ``import`` of every module counts — at module level, inside functions and under
``TYPE_CHECKING`` alike: a lazy import hides a dependency, it does not remove it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "interlock"

# Lowest first. A module may import from its own layer and the layers below it, never above.
LAYERS: dict[str, int] = {
    "_errors": 0,  # the error tree and the argument checks everything shares
    "_args": 0,
    "_collector": 0,  # pausing the garbage collector while a page of records is built
    "_public": 0,  # public names report their public module
    "_daemon": 0,  # daemon threads that leave signals to the main thread
    "_principals": 0,  # principal names in normal form
    "_sqlfiles": 0,  # the SQL files shipped with the package, split into statements
    "_lazy": 0,  # standard modules imported when a call first uses them
    "_plain": 0,  # values as JSON-able builtins, for the surfaces that show them
    "observability": 0,  # traces, logs and metrics: the runtime reports, and knows nothing above
    "serde": 1,
    "stores": 1,
    "graph": 2,
    "runtime": 3,
    "agents": 4,
    "workers": 4,  # procrastinate jobs that run an App's threads
    "cli": 5,
    "server": 5,
    "agui": 5,  # AG-UI: an agent's runs for front-ends
    "a2a": 5,  # A2A: agents served to and called from other machines
    "testing": 5,  # the store conformance kit: used by tests, imported by nothing
    "__main__": 6,  # `python -m interlock`: runs the command line
}
FACADE = "interlock"  # the public namespace re-exports every layer; nothing imports it

UPPER: frozenset[str] = frozenset({"agents", "server", "cli", "workers", "agui", "a2a"})
"""The layers built on the runtime: they enter another package through its public namespace
(``interlock.runtime``, ``interlock.stores``...), never through a private module of it."""
HIDDEN_ATTRIBUTES: frozenset[str] = frozenset({"io"})
"""Attributes of the runtime's insides an upper layer may not touch (with the App's private
attributes, read from its ``__init__``)."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["interlock", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """The interlock modules ``name`` imports (a ``from pkg import sub`` names ``pkg.sub``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "interlock")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "interlock":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in MODULES else target


GRAPH: dict[str, set[str]] = {
    name: {t for t in _imports(name, path) if t != name} for name, path in MODULES.items()
}


def _layer(module: str) -> tuple[str, int]:
    if module == FACADE:
        return FACADE, max(LAYERS.values()) + 1
    top = module.split(".")[1]
    if top not in LAYERS:
        pytest.fail(
            f"module {module} is in no layer: add {top!r} to LAYERS in tests/test_layers.py "
            "and to docs/architecture.md",
            pytrace=False,
        )
    return top, LAYERS[top]


def test_every_import_is_resolved() -> None:
    unknown = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if target not in MODULES
    )
    assert not unknown, f"imports of modules that do not exist: {unknown}"


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for source, targets in sorted(GRAPH.items()):
        src_name, src_rank = _layer(source)
        for target in sorted(targets):
            dst_name, dst_rank = _layer(target)
            if dst_rank > src_rank:
                upward.append(f"{source} ({src_name}) imports {target} ({dst_name})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    # A package's __init__ importing its own modules is the usual re-export, not a cycle, as
    # long as those modules do not import the package back.
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_import_reader_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from interlock.runtime import _app\n"
        "def f():\n"
        "    from interlock.graph._builder import NodeSpec\n"
    )
    found = set(_imports("interlock.stores.m", module))
    assert found == {"interlock.runtime._app", "interlock.graph._builder"}


# -- doors: the upper layers use the public namespaces -------------------------------------------


def _private_app_attributes() -> frozenset[str]:
    """The attributes `App.__init__` sets that start with an underscore."""
    tree = ast.parse((PACKAGE / "runtime" / "_app.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for target in ast.walk(node):
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and target.attr.startswith("_")
                ):
                    found.add(target.attr)
    return frozenset(found)


FORBIDDEN_ATTRIBUTES: frozenset[str] = HIDDEN_ATTRIBUTES | _private_app_attributes()


def _private_module(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _door_problems(name: str, path: Path, targets: set[str]) -> list[str]:
    """How ``name`` (an upper layer's module) goes past another package's door."""
    own = name.split(".")[1]
    problems = [
        f"{name} imports the private module {target}: import from "
        f"interlock.{target.split('.')[1]} instead (add the name to its __all__ if missing)"
        for target in sorted(targets)
        if target.split(".")[1] != own
        and target.split(".")[1] in PACKAGES
        and _private_module(target)
    ]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            problems.append(
                f"{name}:{node.lineno} reads .{node.attr}, the runtime's insides: "
                "what a surface needs and the App lacks becomes an App method first"
            )
    return problems


PACKAGES: frozenset[str] = frozenset(
    name.split(".")[1]
    for name, path in MODULES.items()
    if path.name == "__init__.py" and "." in name
)


def test_upper_layers_enter_other_packages_through_their_doors() -> None:
    problems = [
        problem
        for name, path in sorted(MODULES.items())
        if name.count(".") >= 1 and name.split(".")[1] in UPPER
        for problem in _door_problems(name, path, GRAPH[name])
    ]
    assert not problems, "\n".join(problems)


def test_the_runtime_enters_the_stores_through_their_door() -> None:
    # The runtime and the graph layer are built together and share private parts; the store
    # is a boundary a third party's backend implements, so the runtime uses only its door.
    private = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if name.startswith("interlock.runtime")
        for target in targets
        if target.startswith("interlock.stores.") and _private_module(target)
    )
    assert not private, "\n".join(private)


def test_the_door_check_finds_a_private_import_and_the_apps_insides(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from interlock.runtime._persist import interrupt_of\n"
        "from interlock.stores import _postgres_sql\n"
        "from interlock.runtime import App\n"
        "def f(app):\n"
        "    app._calls.io.get('t', None)\n"
    )
    name = "interlock.server.m"
    problems = _door_problems(name, module, set(_imports(name, module)))
    assert len(problems) == 4, problems
    assert any("interlock.runtime._persist" in p for p in problems)
    assert any("interlock.stores._postgres_sql" in p for p in problems)
    assert any("reads ._calls" in p for p in problems)
    assert any("reads .io" in p for p in problems)
    # Its own layer's private modules are its own business.
    own = tmp_path / "own.py"
    own.write_text("from interlock.server._views import ThreadView\n")
    assert _door_problems("interlock.server.own", own, set(_imports("x.server.own", own))) == []
