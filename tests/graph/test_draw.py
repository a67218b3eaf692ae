"""Drawing a graph as Mermaid text: `CompiledGraph.draw`, `App.draw`, `Agent.draw`.

The texts are compared whole, so any change to a drawing shows here. Several drawings are also
parsed by the real Mermaid parser (Node.js and npm needed: the `mermaid` fixture runs `npm ci` in
`tests/graph/mermaid` once, from its lock file).
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

import pytest

from interlock import END, START, Address, Graph, GraphDefinitionError, approve
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    allow,
    call,
    deny,
    matches,
    plan_execute,
    require_approval,
    sequential,
    supervisor,
    tool,
)
from interlock.graph import Mark, node_path


class S(TypedDict):
    n: int


def _noop(state: Mapping[str, Any]) -> None:
    return None


def _every_edge_kind() -> Graph[S]:
    g: Graph[S] = Graph(S)
    for name in ("a", "b", "c"):
        g.add_node(name, _noop)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", lambda s: "go", {"go": "c", "stop": END, True: END})
    g.add_conditional_edges("c", lambda s: ["a"], ["a", END])
    g.add_edge("c", END)
    return g


def test_a_small_graph_with_every_edge_kind() -> None:
    assert _every_edge_kind().compile().draw() == (
        "flowchart TD\n"
        '    __start__(("start"))\n'
        '    n0["a"]\n'
        '    n1["b"]\n'
        '    n2["c"]\n'
        '    __end__(("end"))\n'
        "    __start__ --> n0\n"
        "    n0 --> n1\n"
        '    n1 -.->|"go"| n2\n'
        '    n1 -.->|"stop, True"| __end__\n'
        "    n2 --> __end__\n"
        "    n2 -.-> n0\n"
        "    n2 -.-> __end__\n"
        "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
        "    class __start__,__end__ terminal\n"
    )


def _to_b_or_end(state: Mapping[str, Any]) -> Literal["b", "__end__"]:
    return "b"


def _maybe_many(state: Mapping[str, Any]) -> list[Literal["a"] | Literal["b"]] | None:
    return None


def _anywhere(state: Mapping[str, Any]) -> str:
    return END


def test_a_route_without_a_path_map() -> None:
    g: Graph[S] = Graph(S)
    g.add_node("a", _noop).add_node("b", _noop)
    g.add_edge(START, "a")
    g.add_conditional_edges("a", _to_b_or_end)  # Literal[...]: its names
    g.add_conditional_edges("b", _maybe_many)  # Literals in a list, a union, an optional
    g.add_conditional_edges("b", _anywhere)  # no Literal: every node and the end
    edges = [line.strip() for line in g.compile().draw().splitlines() if "-.->" in line]
    assert edges == [
        "n0 -.-> n1",
        "n0 -.-> __end__",
        "n1 -.-> n0",
        "n1 -.-> n1",
        'n1 -.->|"_anywhere"| n0',
        'n1 -.->|"_anywhere"| n1',
        'n1 -.->|"_anywhere"| __end__',
    ]


def test_breakpoints_are_marked_with_a_class_and_in_the_label() -> None:
    text = _every_edge_kind().compile(interrupt_before=["b", "c"], interrupt_after=["c"]).draw()
    assert '    n0["a"]\n    n1["⏸ b"]\n    n2["⏸ c ⏸"]\n' in text
    assert text.endswith(
        "    classDef interruptBefore stroke:#d97706,stroke-width:3px\n"
        "    classDef interruptAfter stroke:#d97706,stroke-width:3px,stroke-dasharray:4 2\n"
        "    class __start__,__end__ terminal\n"
        "    class n1,n2 interruptBefore\n"
        "    class n2 interruptAfter\n"
    )


def _nested() -> Graph[S]:
    inner: Graph[S] = Graph(S, name="inner")
    inner.add_node("leaf", _noop).add_edge(START, "leaf").add_edge("leaf", END)
    middle: Graph[S] = Graph(S, name="middle")
    middle.add_node("deep", inner.compile()).add_edge(START, "deep")
    top: Graph[S] = Graph(S)
    top.add_node("first", _noop).add_node("sub", middle.compile(interrupt_before=["deep"]))
    top.add_edge(START, "first").add_edge("first", "sub").add_edge("sub", END)
    return top


def test_a_subgraph_two_levels_deep() -> None:
    assert _nested().compile().draw() == (
        "flowchart TD\n"
        '    __start__(("start"))\n'
        '    n0["first"]\n'
        '    subgraph n1 ["sub"]\n'
        '        n1___start__(("start"))\n'
        '        subgraph n1_n0 ["⏸ deep"]\n'
        '            n1_n0___start__(("start"))\n'
        '            n1_n0_n0["leaf"]\n'
        '            n1_n0___end__(("end"))\n'
        "            n1_n0___start__ --> n1_n0_n0\n"
        "            n1_n0_n0 --> n1_n0___end__\n"
        "        end\n"
        '        n1___end__(("end"))\n'
        "        n1___start__ --> n1_n0\n"
        "    end\n"
        '    __end__(("end"))\n'
        "    __start__ --> n0\n"
        "    n0 --> n1\n"
        "    n1 --> __end__\n"
        "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
        "    classDef interruptBefore stroke:#d97706,stroke-width:3px\n"
        "    class __start__,n1___start__,n1_n0___start__,n1_n0___end__,n1___end__,__end__ "
        "terminal\n"
        "    class n1_n0 interruptBefore\n"
    )


HOSTILE = ["end", "subgraph", 'say "hi"', "a|b", "<b>&amp;", "#35;", "`x`", "two\nlines", "o"]


def _hostile() -> Graph[S]:
    g: Graph[S] = Graph(S)
    for name in HOSTILE:
        g.add_node(name, _noop)
    g.add_edge(START, HOSTILE[0])
    for a, b in itertools.pairwise(HOSTILE):
        g.add_edge(a, b)
    g.add_conditional_edges(HOSTILE[-1], lambda s: END, {'"]; end': END, "x|y": HOSTILE[0]})
    return g


def test_hostile_names_are_labels_never_ids() -> None:
    text = _hostile().compile().draw()
    labels = [line.strip() for line in text.splitlines()[2 : 2 + len(HOSTILE)]]
    assert labels == [
        'n0["end"]',
        'n1["subgraph"]',
        'n2["say #34;hi#34;"]',
        'n3["a#124;b"]',
        'n4["#60;b#62;#38;amp;"]',
        'n5["#35;35;"]',
        'n6["#96;x#96;"]',
        'n7["two lines"]',
        'n8["o"]',
    ]
    assert '    n8 -.->|"#34;]; end"| __end__\n    n8 -.->|"x#124;y"| n0\n' in text


def test_the_same_plan_gives_the_same_text() -> None:
    texts = {_every_edge_kind().compile().draw() for _ in range(3)}
    texts |= {_every_edge_kind().plan((), ()).draw()}
    assert len(texts) == 1
    agent = _files_agent()
    assert agent.draw() == agent.draw() == agent.compile().draw()


@tool
def search(query: str) -> str:
    """Search the documents."""
    return query


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return path


def _files_agent(**kw: Any) -> ToolAgent:
    policy = ApprovalPolicy({"search": "allow", "delete_file": "require_approval"})
    return ToolAgent("files", ScriptedModel(["done"]), [search, delete_file], policy=policy, **kw)


def test_a_tool_agent_marks_its_gated_tool() -> None:
    assert _files_agent().draw() == (
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


def test_an_outer_policy_gates_a_tool_too() -> None:
    free = ToolAgent("free", ScriptedModel(["done"]), [search, delete_file])
    assert '["tools<br>search<br>delete_file"]' in free.draw()
    under = free.with_policy(ApprovalPolicy({"search": "allow"}))  # default: ask
    assert '["tools<br>search<br>🔒 delete_file"]' in under.draw()


def _positive(arguments: dict[str, Any]) -> bool:
    return bool(arguments["n"] > 0)


@pytest.mark.parametrize(
    ("rules", "default", "asks"),
    [
        ({}, "require_approval", True),
        ({}, "allow", False),
        ({"t": "allow"}, "require_approval", False),
        ({"t": "deny"}, "require_approval", False),
        ({"*": "allow"}, "require_approval", False),
        ({"t": [deny(when=matches("p", "/")), allow()]}, "require_approval", False),
        ({"t": [allow(when=matches("p", "x"))]}, "allow", False),
        ({"t": [allow(when=matches("p", "x"))]}, "require_approval", True),
        ({"t": [allow(), require_approval()]}, "require_approval", False),
        ({"t": [require_approval(when=matches("p", "x")), allow()]}, "allow", True),
        ({"t": [allow(when=_positive), allow()]}, "allow", True),  # it may raise: closed
        ({"t": lambda a: "allow"}, "allow", True),  # a callable may say anything
    ],
)
def test_which_tools_a_policy_may_ask_about(rules: Any, default: Any, asks: bool) -> None:
    assert ApprovalPolicy(rules, default=default).may_ask("t") is asks


def _worker(name: str, *tools: Any, policy: ApprovalPolicy | None = None) -> ToolAgent:
    return ToolAgent(name, ScriptedModel(["done"]), list(tools), policy=policy)


def test_a_supervisor_draws_its_children_inside() -> None:
    boss = supervisor(
        ScriptedModel(["done"]),
        [_worker("reader", search), _worker("cleaner", delete_file)],
        policy=ApprovalPolicy({"search": "allow"}),
    )
    assert boss.draw() == (
        "flowchart TD\n"
        '    __start__(("start"))\n'
        '    n0["model"]\n'
        '    n1["tools"]\n'
        '    subgraph n2 ["reader"]\n'
        '        n2___start__(("start"))\n'
        '        n2_n0["model"]\n'
        '        n2_n1["tools<br>search"]\n'
        '        n2___end__(("end"))\n'
        "        n2___start__ --> n2_n0\n"
        "        n2_n0 -.-> n2_n1\n"
        "        n2_n0 -.-> n2___end__\n"
        "        n2_n1 --> n2_n0\n"
        "    end\n"
        '    subgraph n3 ["cleaner"]\n'
        '        n3___start__(("start"))\n'
        '        n3_n0["model"]\n'
        '        n3_n1["tools<br>🔒 delete_file"]\n'
        '        n3___end__(("end"))\n'
        "        n3___start__ --> n3_n0\n"
        "        n3_n0 -.-> n3_n1\n"
        "        n3_n0 -.-> n3___end__\n"
        "        n3_n1 --> n3_n0\n"
        "    end\n"
        '    __end__(("end"))\n'
        "    __start__ --> n0\n"
        "    n0 -.-> n2\n"
        "    n0 -.-> n3\n"
        "    n0 -.-> n1\n"
        "    n0 -.-> __end__\n"
        "    n1 --> n0\n"
        "    n2 --> n0\n"
        "    n3 --> n0\n"
        "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
        "    classDef gated stroke:#dc2626,stroke-width:2px\n"
        "    class __start__,n2___start__,n2___end__,n3___start__,n3___end__,__end__ terminal\n"
        "    class n3_n1 gated\n"
    )


def test_compositions_nest_their_agents() -> None:
    asks = ApprovalPolicy()  # every call waits for approval
    inner = sequential([_worker("a", search), _worker("b", delete_file, policy=asks)])
    text = plan_execute(ScriptedModel(["x"]), inner).draw()
    assert '    subgraph n1 ["execute"]\n' in text  # the executor, in the node that runs it
    assert '        subgraph n1_n0 ["a"]\n' in text  # and its agents inside it
    assert '            n1_n0_n1["tools<br>search"]\n' in text  # no policy: none gated
    assert '            n1_n1_n1["tools<br>🔒 delete_file"]\n' in text
    assert "    n0 -.-> n1\n    n0 -.-> __end__\n" in text  # plan: execute or end


def test_metadata_does_not_change_the_fingerprint() -> None:
    def graph(**metadata: Any) -> str:
        g: Graph[S] = Graph(S)
        g.add_node("a", _noop, **({"metadata": metadata} if metadata else {}))
        return g.add_edge(START, "a").compile().fingerprint

    assert graph() == graph(tools=[{"name": "t", "gated": True}]) == graph(other=1)


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ({"graph": "nope"}, r"metadata\['graph'\] must be the CompiledGraph"),
        ({"tools": "search"}, r"metadata\['tools'\] must be a list"),
        ({"tools": [{"name": 1}]}, r"each of metadata\['tools'\]"),
        ({"tools": [{"name": "t", "gated": "yes"}]}, r"each of metadata\['tools'\]"),
    ],
)
def test_bad_metadata_is_refused_at_once(metadata: dict[str, Any], said: str) -> None:
    with pytest.raises(GraphDefinitionError, match=said):
        Graph(S).add_node("a", _noop, metadata=metadata)


def test_a_graph_in_metadata_may_be_an_app() -> None:
    child: Graph[S] = Graph(S)
    child.add_node("x", _noop).add_edge(START, "x")
    g: Graph[S] = Graph(S)
    g.add_node("runs_child", _noop, metadata={"graph": child.compile()}).add_edge(
        START, "runs_child"
    )
    assert '    subgraph n0 ["runs_child"]\n        n0___start__(("start"))\n' in g.compile().draw()


# -- agents offered as tools ----------------------------------------------------------------


def _helper_outer() -> ToolAgent:
    """An agent offering ``search`` and another agent (``helper``, with a gated tool) as tools."""
    helper = _worker("helper", delete_file, policy=ApprovalPolicy())  # every call waits
    model = ScriptedModel([call("helper", {"request": "tidy up"}), "done"], name="outer")
    return ToolAgent("outer", model, [search, helper.as_tool()])


def test_an_agent_offered_as_a_tool_is_drawn_inside_the_tools_node() -> None:
    assert _helper_outer().draw() == (
        "flowchart TD\n"
        '    __start__(("start"))\n'
        '    n0["model"]\n'
        '    subgraph n1 ["tools<br>search"]\n'
        '        subgraph n1_t1 ["helper"]\n'
        '            n1_t1___start__(("start"))\n'
        '            n1_t1_n0["model"]\n'
        '            n1_t1_n1["tools<br>🔒 delete_file"]\n'
        '            n1_t1___end__(("end"))\n'
        "            n1_t1___start__ --> n1_t1_n0\n"
        "            n1_t1_n0 -.-> n1_t1_n1\n"
        "            n1_t1_n0 -.-> n1_t1___end__\n"
        "            n1_t1_n1 --> n1_t1_n0\n"
        "        end\n"
        "    end\n"
        '    __end__(("end"))\n'
        "    __start__ --> n0\n"
        "    n0 -.-> n1\n"
        "    n0 -.-> __end__\n"
        "    n1 --> n0\n"
        "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
        "    classDef gated stroke:#dc2626,stroke-width:2px\n"
        "    class __start__,n1_t1___start__,n1_t1___end__,__end__ terminal\n"
        "    class n1_t1_n1 gated\n"
    )


def test_an_agent_tool_under_a_policy_is_marked_on_its_block() -> None:
    gated = _helper_outer().with_policy(ApprovalPolicy({"search": "allow"}))  # helper: ask
    text = gated.draw()
    assert '    subgraph n1 ["tools<br>search"]\n        subgraph n1_t1 ["🔒 helper"]\n' in text
    assert "    class n1,n1_t1_n1 gated\n" in text


def test_show_tool_leaves_tools_out_and_the_others_keep_their_ids() -> None:
    outer = _helper_outer()  # its tools: search (0), helper (1)
    text = outer.draw(show_tool=lambda name: name != "search")
    assert '    subgraph n1 ["tools"]\n        subgraph n1_t1 ["helper"]\n' in text
    assert "search" not in text
    only = outer.draw(show_tool=lambda name: name == "search")
    assert '    n1["tools<br>search"]\n' in only
    assert "helper" not in only and "delete_file" not in only and "gated" not in only
    with pytest.raises(TypeError, match="show_tool must be a function of a tool's name"):
        outer.draw(show_tool="search")  # type: ignore[arg-type]


def test_a_graph_in_a_tools_metadata_must_be_a_plan() -> None:
    with pytest.raises(GraphDefinitionError, match=r"the 'graph' of tool 't' in metadata"):
        Graph(S).add_node("a", _noop, metadata={"tools": [{"name": "t", "graph": "plan"}]})


# -- a thread's position ----------------------------------------------------------------------


WAITING_STYLE = "fill:#fef3c7,stroke:#d97706,stroke-width:4px,color:#78350f"


def _boss() -> ToolAgent:
    return supervisor(
        ScriptedModel(["done"]),
        [_worker("reader", search), _worker("cleaner", delete_file)],
        policy=ApprovalPolicy({"search": "allow"}),
    )


def test_marks_give_nodes_their_classes_and_blocks_wait_with_their_nodes() -> None:
    marks: dict[str, Mark] = {
        "model": "done",
        "reader": "done",
        "reader/model": "done",
        "cleaner": "next",  # a block holding a waiting node waits: it outranks next
        "cleaner/tools": "waiting",
        "tools": "failed",
    }
    text = _boss().draw(marks=marks)
    assert text.endswith(
        "    classDef terminal fill:#f3f4f6,stroke:#6b7280,color:#111827\n"
        "    classDef gated stroke:#dc2626,stroke-width:2px\n"
        "    classDef done fill:#dcfce7,stroke:#16a34a,color:#14532d\n"
        "    classDef failed fill:#fee2e2,stroke:#dc2626,stroke-width:3px,color:#7f1d1d\n"
        f"    classDef waiting {WAITING_STYLE}\n"
        "    class __start__,n2___start__,n2___end__,n3___start__,n3___end__,__end__ terminal\n"
        "    class n3_n1 gated\n"
        "    class n0,n2,n2_n0 done\n"
        "    class n1 failed\n"
        "    class n3,n3_n1 waiting\n"
    )
    # The marks add classes only: every line of the plain drawing stays as it was.
    assert text.startswith(_boss().draw().split("    classDef")[0])


def test_next_is_dashed_and_marks_in_nested_tool_blocks_are_found() -> None:
    text = _helper_outer().draw(marks={"model": "next", "tools/helper/tools": "waiting"})
    assert "    classDef next stroke:#2563eb,stroke-width:2px,stroke-dasharray:5 3\n" in text
    assert text.endswith("    class n0 next\n    class n1,n1_t1,n1_t1_n1 waiting\n")


def test_unknown_paths_are_ignored_but_the_blocks_on_the_way_still_wait() -> None:
    plain = _boss().draw()
    assert _boss().draw(marks={"gone": "waiting", "model/x": "done", "": "next"}) == plain
    # A tool's call may run a graph the picture does not know: its node still waits.
    text = _boss().draw(marks={"cleaner/tools/delete_file/inner": "waiting"})
    assert text.endswith("    class n3,n3_n1 waiting\n")


@pytest.mark.parametrize(
    ("marks", "error", "said"),
    [
        ({"model": "busy"}, ValueError, r"marks\['model'\] is 'busy': a mark is one of"),
        ({1: "done"}, TypeError, "a node path must be a str"),
        ([("model", "done")], TypeError, "marks must be a mapping"),
    ],
)
def test_a_mark_that_is_not_one_is_refused(marks: Any, error: type[Exception], said: str) -> None:
    with pytest.raises(error, match=said):
        _boss().draw(marks=marks)


def test_an_interrupts_address_names_the_node_a_drawing_marks() -> None:
    # Run each agent to the question its gated tool asks; the address leads to the node.
    cleaner = ToolAgent(
        "cleaner",
        ScriptedModel([call("delete_file", {"path": "/tmp/x"}), "ok"], name="cleaner"),
        [delete_file],
        policy=ApprovalPolicy(),
    )
    boss = supervisor(
        ScriptedModel([call("transfer_to_cleaner"), "done"], name="boss"), [cleaner], name="boss"
    )
    outer = ToolAgent(
        "outer",
        ScriptedModel([call("cleaner", {"request": "tidy"}), "ok"], name="outer"),
        [search, cleaner.as_tool()],
    )
    found = []
    for agent in (boss, outer):
        result = agent.compile().run_sync({"messages": ["go"]}, thread="t")
        (question,) = result.interrupts
        found.append(node_path(question.address))
        marked = agent.draw(marks={found[-1]: "waiting"})
        assert marked != agent.draw()
        assert marked.endswith(" waiting\n")
    assert found == ["cleaner/tools", "tools/cleaner/tools"]
    assert boss.draw(marks={"cleaner/tools": "waiting"}).endswith("    class n2,n2_n1 waiting\n")
    assert outer.draw(marks={found[1]: "waiting"}).endswith("    class n1,n1_t1,n1_t1_n1 waiting\n")


def test_node_paths_of_subgraphs_and_of_addresses_without_nodes() -> None:
    def leaf(state: S) -> S:
        return {"n": 1 if approve("ok?") else 0}

    inner: Graph[S] = Graph(S, name="inner")
    inner.add_node("leaf", leaf).add_edge(START, "leaf")
    top: Graph[S] = Graph(S)
    top.add_node("sub", inner.compile()).add_edge(START, "sub")
    result = top.compile().run_sync({"n": 0}, thread="t")
    (question,) = result.interrupts
    assert node_path(question.address) == "sub/leaf"
    assert (
        top.compile().draw(marks={"sub/leaf": "waiting"}).endswith("    class n0,n0_n0 waiting\n")
    )
    assert node_path(Address()) == ""
    assert node_path(Address.parse("agent:a/tool:t:1")) == ""  # a tool call of no node


# -- the real Mermaid parser ----------------------------------------------------------------


MERMAID_DIR = Path(__file__).with_name("mermaid")
"""Mermaid's parser for the tests: its packages pinned in a lock file, as the OpenID provider's."""


@pytest.fixture(scope="session")
def mermaid() -> Callable[[list[str]], list[dict[str, Any]]]:
    """Parse texts with Mermaid's own parser (``npm ci`` in ``tests/graph/mermaid`` once)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise RuntimeError(
            "the drawing tests parse with Mermaid's own parser, which runs on Node.js, and "
            "node or npm is not on PATH: install Node.js 20 or later (apt-get install nodejs npm)"
        )
    if not (MERMAID_DIR / "node_modules" / "mermaid" / "package.json").exists():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=MERMAID_DIR,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci in {MERMAID_DIR} failed:\n{done.stdout}\n{done.stderr}")
    script = MERMAID_DIR / "parse.mjs"

    def parse(texts: list[str]) -> list[dict[str, Any]]:
        done = subprocess.run(
            [node, str(script)],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        results: list[dict[str, Any]] = json.loads(done.stdout)
        return results

    return parse


def test_mermaid_parses_every_drawing(mermaid: Callable[[list[str]], list[dict[str, Any]]]) -> None:
    boss = supervisor(
        ScriptedModel(["done"]),
        [_worker("reader", search), _worker("cleaner", delete_file)],
        policy=ApprovalPolicy({"search": "allow"}),
    )
    texts = [
        _every_edge_kind().compile(interrupt_before=["b", "c"], interrupt_after=["c"]).draw(),
        _nested().compile().draw(),
        _hostile().compile(interrupt_before=["end"], interrupt_after="*").draw(),
        _files_agent().draw(),
        boss.draw(),
        plan_execute(ScriptedModel(["x"]), sequential([_worker("a", search)])).draw(),
        _helper_outer().with_policy(ApprovalPolicy()).draw(),
        boss.draw(marks={"model": "done", "tools": "failed", "reader": "next"}),
        boss.draw(marks={"cleaner/tools": "waiting", "reader/model": "done"}),
        _helper_outer().draw(marks={"tools/helper/tools": "waiting", "model": "next"}),
    ]
    results = mermaid([*texts, "flowchart TD\n    end --> x\n"])
    assert results[-1]["ok"] is False  # the parser does refuse a broken text
    assert results[:-1] == [{"ok": True, "type": "flowchart-v2"}] * len(texts)
