"""``interlock graph --app module:attr``: the app's graph as Mermaid text, without a store."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from interlock.cli import cli

APP_MODULE = '''
from typing import TypedDict

from interlock import END, START, Graph, SqliteStore
from interlock.agents import ApprovalPolicy, ScriptedModel, ToolAgent, tool


class S(TypedDict):
    n: int


@tool
def search(query: str) -> str:
    """Search."""
    return query


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return path


agent = ToolAgent(
    "files",
    ScriptedModel(["done"]),
    [search, delete_file],
    policy=ApprovalPolicy({"search": "allow"}),
)
graph = Graph(S)
graph.add_node("only", lambda s: None).add_edge(START, "only").add_edge("only", END)
app = graph.compile(interrupt_before=["only"])


def make_app():
    return graph.compile(store=SqliteStore("never-opened.db"))


def make_nothing():
    return 42


def broken():
    raise RuntimeError("no config")


empty = Graph(S)
number = 7
'''

_MODULES = itertools.count()

AGENT_TEXT = (
    "flowchart TD\n"
    '    __start__(("start"))\n'
    '    n0["model"]\n'
    '    n1["tools<br>search<br>🔒 delete_file"]\n'
    '    __end__(("end"))\n'
    "    __start__ --> n0\n"
    "    n0 -.-> n1\n"
    "    n0 -.-> __end__\n"
    "    n1 --> n0\n"
    "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
    "    classDef gated stroke:#dc2626,stroke-width:2px\n"
    "    class __start__,__end__ terminal\n"
    "    class n1 gated\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A folder holding a module of apps (named anew for each test: imports are cached)."""
    name = f"drawn_{next(_MODULES)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(APP_MODULE))
    monkeypatch.chdir(tmp_path)
    for variable in ("INTERLOCK_APP", "INTERLOCK_STORE"):
        monkeypatch.delenv(variable, raising=False)
    return name


def test_an_agent_is_drawn_with_its_gated_tool(project: str) -> None:
    result = CliRunner().invoke(cli, ["graph", "--app", f"{project}:agent"])
    assert result.exit_code == 0, result.output
    assert result.stdout == AGENT_TEXT


@pytest.mark.parametrize("attribute", ["app", "graph", "make_app", "app.plan"])
def test_an_app_a_graph_a_factory_or_a_plan(project: str, attribute: str) -> None:
    result = CliRunner().invoke(cli, ["graph", "--app", f"{project}:{attribute}"])
    assert result.exit_code == 0, result.output
    label = '["⏸ only"]' if attribute in ("app", "app.plan") else '["only"]'
    assert f"    n0{label}\n    __end__" in result.stdout
    assert not Path("never-opened.db").exists()  # no store is opened


def test_the_app_may_come_from_the_environment(project: str) -> None:
    result = CliRunner().invoke(cli, ["graph"], env={"INTERLOCK_APP": f"{project}:agent"})
    assert result.exit_code == 0, result.output
    assert result.stdout == AGENT_TEXT


@pytest.mark.parametrize(
    ("attribute", "code", "said"),
    [
        (None, 2, "`interlock graph` draws your app: pass --app module:attribute"),
        ("number", 2, "it is an int: name an interlock App, agent or graph"),
        ("make_nothing", 2, "returned an int, not an interlock App"),
        ("broken", 1, "calling {module}:broken() to make the app failed: RuntimeError"),
        ("empty", 1, "is not a graph that can be drawn: the graph has no nodes"),
        ("missing", 2, "has no attribute 'missing'"),
    ],
)
def test_what_cannot_be_drawn_says_why(
    project: str, attribute: str | None, code: int, said: str
) -> None:
    args = ["graph"] if attribute is None else ["graph", "--app", f"{project}:{attribute}"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == code
    assert said.format(module=project) in " ".join(result.output.split())


def test_the_command_in_its_own_process(project: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "interlock.cli", "graph", "--app", f"{project}:agent"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == AGENT_TEXT
