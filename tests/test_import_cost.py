"""`import interlock` leaves out what only some calls need, and the call that needs it loads it.

The cost itself (time, memory, modules) is measured by `bench/import_cost.py`, never here: a
timed test would fail on a busy machine. What is checked is the cause: which modules a fresh
`import interlock` brings in, and which files it reads; and that the call that needs a deferred
module loads it and works.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Literal, Optional

import msgspec
import pytest

from _imports import SRC, run_fresh
from interlock import Command, Segment, Send, TimeoutDefault
from interlock._public import _hints
from interlock.graph import NodeSpec

SRC_STORES = Path(SRC) / "interlock" / "stores"

ANSWER_SCHEMAS = ("jsonschema", "referencing", "jsonschema_specifications", "attrs", "rpds")
"""Answer-schema checking: `jsonschema` and what it stands on."""

STREAMS = ("anyio.streams.memory",)
"""anyio's memory streams: `EventStream` names them in annotations only. The first run loads
them anyway (both anyio backends import them), so this moves their cost to where it is paid by a
process that runs something, not by every ``import interlock``."""

EVENT_LOOP = ("asyncio", "anyio", "ssl", "concurrent.futures", "subprocess")
"""What runs a graph: anyio, and asyncio with what it imports. The first run loads them (a run
on trio never loads asyncio); ``import interlock`` loads neither."""

SQL_FILES = ("importlib.resources", "zipfile")
"""What reads the SQL files shipped with the package: a store reads its migrations when it
first migrates a database, not when its module is imported."""

STANDARD = (
    "json",
    "pathlib",
    "queue",
    "random",
    "secrets",
    "shlex",
    "socket",
    "unicodedata",
    "urllib.parse",
    "zlib",
    "bisect",
    "heapq",
)
"""Standard modules interlock's functions call, each imported by the first call that needs it."""

AT_FIRST_USE = ("hashlib", "_hashlib", "dataclasses", "selectors")
"""Standard modules interlock binds at its modules' tops and imports on first use: `hashlib`
(with OpenSSL's ``_hashlib``) by the first fingerprint, digest or interrupt id, `dataclasses`
by the first look at what kind of class a schema's type is, `selectors` by the first look at
an asyncio loop's internals (asyncio itself imports it first). That `dataclasses` stays out
also proves that `import interlock` creates no dataclass: its records are msgspec Structs,
built in C (a dataclass compiles its methods from source text at every import)."""

DEFERRED = ANSWER_SCHEMAS + STREAMS + EVENT_LOOP + SQL_FILES + STANDARD + AT_FIRST_USE
"""Every module `import interlock` must not import."""

REPORT = """
import sys
def loaded(*names):
    print(sorted(m for m in names if m in sys.modules))
"""

SQL_READS = """
import sys
SQL_READ = []
def _audit(event, args):
    if event == "open" and str(args[0]).endswith(".sql"):
        SQL_READ.append(str(args[0]).rpartition("/")[2])
sys.addaudithook(_audit)
"""
"""Code that records the name of every ``.sql`` file the process opens, in ``SQL_READ``."""


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


def test_a_bare_interpreter_has_none_of_the_deferred_modules() -> None:
    # Otherwise the test above would prove nothing about interlock.
    assert run_fresh(REPORT + f"loaded(*{DEFERRED!r})\n") == ["[]"]


def test_import_interlock_reads_no_sql_file() -> None:
    code = SQL_READS + "import interlock\nfrom interlock import *\nprint(SQL_READ)\n"
    assert run_fresh(code) == ["[]"]


def sqlite_run(path: Path, thread: str) -> str:
    """Code that runs ``asking`` on a `SqliteStore` at ``path`` to its question, then closes it."""
    return asking("'ok?', key='q'").replace(
        "il.MemoryStore()", f"il.SqliteStore({str(path)!r})"
    ) + (
        f"print(app.run_sync({{}}, thread={thread!r}).interrupt().info)\n"
        "import anyio\n"
        "anyio.run(app.store.close)\n"
    )


def test_the_first_run_loads_the_event_loop_and_a_new_file_reads_the_migrations(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    code = (
        SQL_READS
        + REPORT
        + sqlite_run(path, "t1")
        + (f"loaded(*{EVENT_LOOP[:2]!r})\nprint(sorted(SQL_READ)[0], len(SQL_READ))\n")
    )
    code += f"loaded(*{AT_FIRST_USE!r})\n"
    migrations = sorted((SRC_STORES / "sql" / "sqlite").glob("*.sql"))
    assert run_fresh(code) == [
        "ok?",
        "['anyio', 'asyncio']",
        f"{migrations[0].name} {len(migrations)}",
        # The graph's fingerprint and the rows' digests loaded hashlib; sorting out the
        # schema's types, dataclasses; the run on asyncio, selectors (asyncio imports it).
        repr(sorted(AT_FIRST_USE)),
    ]
    # The file is at the current version now: opening it again reads no SQL file.
    code = SQL_READS + sqlite_run(path, "t2") + "print(SQL_READ)\n"
    assert run_fresh(code) == ["ok?", "[]"]


def test_a_run_on_trio_never_imports_asyncio(tmp_path: Path) -> None:
    # Every store call asks whether an asyncio loop is running; on trio none can be, and
    # asking must not import asyncio to find out.
    code = (
        REPORT
        + asking("'ok?', key='q'").replace(
            "il.MemoryStore()", f"il.SqliteStore({str(tmp_path / 'threads.db')!r})"
        )
        + (
            "import trio\n"
            "async def main():\n"
            "    try:\n"
            "        print((await app.run({}, thread='t')).interrupt().info)\n"
            "    finally:\n"
            "        await app.store.close()\n"
            "trio.run(main)\n"
            "loaded('asyncio', 'anyio', 'trio')\n"
        )
    )
    assert run_fresh(code) == ["ok?", "['anyio', 'trio']"]


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


def test_the_records_keep_their_behaviour_as_structs() -> None:
    # The records `import interlock` defines are msgspec Structs rather than dataclasses; what
    # a caller sees of them is unchanged: keyword (or positional) construction, repr, equality,
    # hashing when frozen, immutability, and `msgspec.structs.replace` / `fields`.
    segment = Segment("tool", "execute", "c1")
    assert segment == Segment(kind="tool", name="execute", sub_id="c1")
    assert repr(segment) == "Segment(kind='tool', name='execute', sub_id='c1')"
    assert {segment, Segment("tool", "execute", "c1")} == {segment}
    assert Segment("node", "a") != Segment("node", "b")
    assert msgspec.structs.replace(segment, sub_id="c2").sub_id == "c2"
    assert repr(Send("worker", {"n": 1})) == "Send(node='worker', arg={'n': 1})"
    assert repr(TimeoutDefault(False)) == "TimeoutDefault(value=False)"
    command = Command(resume="yes")
    assert command == Command(resume="yes", update=None, goto=())
    assert [f.name for f in msgspec.structs.fields(command)] == ["resume", "update", "goto"]
    with pytest.raises(AttributeError):
        command.resume = "no"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Command("yes")  # type: ignore[misc]  # keyword-only, as the dataclass was

    # A node's metadata is for pictures: not part of its equality or hash.
    plain, shown = NodeSpec(name="a"), NodeSpec(name="a", metadata={"kind": "model"})
    assert plain == shown and hash(plain) == hash(shown)
    assert "metadata={'kind': 'model'}" in repr(shown)


class _Base:
    inherited: int | None


class _Later:
    pass


class _Plain(_Base):
    plain: str
    nothing: None
    optional: Segment | None
    literal: Literal["a", "b"]
    extras: Annotated[int, "meta"]


class _QuotedInside:
    later: Optional["_Later"]  # noqa: UP037, UP045 (a forward reference inside a type)


class _QuotedTwice:
    later: "_Later"  # noqa: UP037


def test_public_annotations_resolve_as_typing_resolves_them() -> None:
    # `publish` resolves a public class's annotations before moving its `__module__`, with
    # each annotation string compiled once instead of `typing.get_type_hints` compiling every
    # one of them each time (~1 ms of every import); the result must be the same.
    for cls in (_Plain, _QuotedInside, _QuotedTwice):
        assert _hints(cls) == typing.get_type_hints(cls, include_extras=True), cls
    assert _hints(_QuotedInside)["later"] == Optional[_Later]  # noqa: UP045
    assert _hints(_QuotedTwice)["later"] is _Later
