"""`import interlock` leaves out what only some calls need, and the call that needs it loads it.

The cost itself (time, memory, modules) is measured by `bench/import_cost.py`, never here: a
timed test would fail on a busy machine. What is checked is the cause: which modules a fresh
`import interlock` brings in.
"""

from __future__ import annotations

from _imports import run_fresh

ANSWER_SCHEMAS = ("jsonschema", "referencing", "jsonschema_specifications", "attrs", "rpds")
"""Answer-schema checking: `jsonschema` and what it stands on."""

STREAMS = ("anyio.streams.memory",)
"""anyio's memory streams: `EventStream` names them in annotations only. The first run loads
them anyway (both anyio backends import them), so this moves their cost to where it is paid by a
process that runs something, not by every ``import interlock``."""

DEFERRED = ANSWER_SCHEMAS + STREAMS
"""Every module `import interlock` must not import."""

REPORT = """
import sys
def loaded(*names):
    print(sorted(m for m in names if m in sys.modules))
"""


def asking(interrupt_args: str) -> str:
    """Code that builds ``app``: one node that asks with ``interrupt(interrupt_args)``."""
    return (
        "from typing import Any, TypedDict\n"
        "import interlock as il\n"
        "class S(TypedDict, total=False):\n"
        "    a: Any\n"
        "g = il.Graph(S)\n"
        f"g.add_node('ask', lambda s: {{'a': il.interrupt({interrupt_args})}})\n"
        "g.add_edge(il.START, 'ask')\n"
        "app = g.compile(store=il.MemoryStore())\n"
    )


def test_import_interlock_leaves_the_deferred_modules_out() -> None:
    code = REPORT + f"import interlock\nfrom interlock import *\nloaded(*{DEFERRED!r})\n"
    assert run_fresh(code) == ["[]"]


def test_a_graph_without_answer_schemas_runs_without_jsonschema() -> None:
    code = (
        REPORT + asking("'ok?', key='q'") + "iid = app.run_sync({}, thread='t').interrupt().id\n"
        "print(app.resume_sync('t', {iid: 'yes'}).values)\n"
        f"loaded(*{ANSWER_SCHEMAS!r})\n"
    )
    assert run_fresh(code) == ["{'a': 'yes'}", "[]"]


def test_an_answer_schema_loads_jsonschema_and_checks_the_answer() -> None:
    code = (
        REPORT
        + asking("'how many?', key='q', schema={'type': 'integer', 'minimum': 1}")
        + "iid = app.run_sync({}, thread='t').interrupt().id\n"
        "try:\n"
        "    app.resume_sync('t', {iid: 0})\n"
        "except il.InvalidResume as exc:\n"
        "    print('refused:', 'less than the minimum of 1' in str(exc))\n"
        "print(app.resume_sync('t', {iid: 3}).values)\n"
        f"loaded(*{ANSWER_SCHEMAS!r})\n"
    )
    assert run_fresh(code) == [
        "refused: True",
        "{'a': 3}",
        repr(sorted(ANSWER_SCHEMAS)),
    ]


def test_a_schema_that_refers_to_nothing_is_refused_where_interrupt_is_called() -> None:
    # The `$ref` check runs on `referencing`, imported by the first schema that needs it.
    code = asking("'q', key='q', schema={'$ref': '#/x'}") + (
        "try:\n"
        "    app.run_sync({}, thread='t')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, 'which it does not hold' in str(exc))\n"
    )
    assert run_fresh(code) == ["NodeError True"]
