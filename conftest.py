"""Every code block of the README and the documentation site runs in the test suite.

The blocks of one page run in order, in one namespace, as a reader would paste them, in a
temporary folder of their own (a page's ``app.db`` is created there). A ``python`` block runs as
a script; it may ``await`` at its top level, as in a notebook, and then runs in an event loop of
its own. An ``sh`` block runs in bash, with this environment's ``interlock`` first on ``PATH``,
and fails the test if a command fails; what it printed is left in the page's namespace as
``_stdout`` and ``_stderr`` for the blocks after it to check. A page shows the reader a
readable port (``127.0.0.1:8000``) while its test serves on a free one: an invisible block
sets ``_ports = {8000: port}``, and the ``sh`` blocks after it reach ``port`` where they say
``127.0.0.1:8000`` or ``localhost:8000``. ``text`` blocks show output and
other blocks data (``json``, ``toml``, ``yaml``, ``http``); `tests/test_docs_site.py` checks
those and that every block is one of these kinds.

A block that is not meant to run is preceded by ``<!-- skip: next "why not" -->`` and shows in
pytest's summary as skipped, with that reason. A page may check what its blocks did in blocks
the reader does not see: ``<!-- invisible-code-block: python ... -->``.

When a page's blocks are done, every `App`, `Store` and `Runner` left in its namespace is closed
and every process it started (a `subprocess.Popen` it kept) that still runs is stopped, also when
a block failed before the page could stop it; the modules it wrote and imported are forgotten.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator, pad
from sybil.integration.pytest import SybilItem
from sybil.parsers.markdown import CodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent
SHELL_TIMEOUT = 120


class _AwaitingEvaluator(PythonEvaluator):
    """Python blocks as scripts, or, when they ``await`` at the top, as a notebook cell."""

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        source = pad(example.parsed, example.line + example.parsed.line_offset)
        code = compile(
            source, example.path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
        )
        if code.co_flags & inspect.CO_COROUTINE:

            async def cell() -> None:
                await eval(code, example.namespace)

            anyio.run(cell)
        else:
            exec(code, example.namespace)
        example.namespace.pop("__builtins__", None)


def _run_shell(example: Example) -> None:
    __tracebackhide__ = True
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([example.namespace["_folder"], env.get("PYTHONPATH", "")])
    script = example.parsed
    for shown, actual in example.namespace.get("_ports", {}).items():
        for host in ("127.0.0.1", "localhost"):
            script = script.replace(f"{host}:{shown}", f"{host}:{actual}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=example.namespace["_folder"],
        env=env,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"the block exited with {done.returncode}:\n{script}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    example.namespace["_stdout"] = done.stdout
    example.namespace["_stderr"] = done.stderr


def _track_stores(namespace: dict[str, Any]) -> None:
    """Keep every store the page opens, so that its end closes it even after a rebinding.

    A reader's script may open a store, name another one the same, and end without closing
    either; the test must not leave them to the collector, which reports an unclosed SQLite
    connection (Python 3.13) as an error of whichever test runs then.
    """
    from interlock.stores import PostgresStore, SqliteStore

    opened: list[Any] = []
    originals = {}
    for cls in (SqliteStore, PostgresStore):
        original = cls.__init__
        originals[cls] = original

        def init(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> None:
            __original(self, *args, **kwargs)
            opened.append(self)

        cls.__init__ = init  # type: ignore[method-assign]
    namespace["_opened_stores"] = opened
    namespace["_store_inits"] = originals


def _setup(namespace: dict[str, Any]) -> None:
    _track_stores(namespace)
    folder = tempfile.mkdtemp(prefix="interlock-docs-")
    namespace["_folder"] = folder
    namespace["_previous_cwd"] = os.getcwd()
    os.chdir(folder)
    sys.path.insert(0, folder)


def _teardown(namespace: dict[str, Any]) -> None:
    from interlock import App
    from interlock.agents import Runner
    from interlock.stores import Store

    for cls, original in namespace["_store_inits"].items():
        cls.__init__ = original

    async def close_all() -> None:
        for store in namespace["_opened_stores"]:
            await store.close()  # closing twice is harmless
        for value in list(namespace.values()):
            if isinstance(value, Runner):
                await value.app.store.close()
            elif isinstance(value, App):
                await value.store.close()
            elif isinstance(value, Store) and not isinstance(value, type):
                await value.close()

    try:
        for value in list(namespace.values()):
            if isinstance(value, subprocess.Popen) and value.poll() is None:
                value.terminate()
                try:
                    value.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    value.kill()
                    value.wait()
        anyio.run(close_all)
    finally:
        os.chdir(namespace["_previous_cwd"])
        sys.path.remove(namespace["_folder"])
        # A module the page wrote and imported (its `shop.py`) must not answer another page's
        # import of the same name.
        for module_name, module in list(sys.modules.items()):
            if (getattr(module, "__file__", None) or "").startswith(namespace["_folder"]):
                del sys.modules[module_name]


def _lenient_traceback_filter(self: SybilItem, excinfo: Any) -> Any:
    """Sybil's filter, or the whole traceback where the filter cannot cut it.

    Sybil's filter expects two frames of the example's module in every traceback; the members
    of an exception group have fewer, and the filter's IndexError would replace the test's
    report with pytest's INTERNALERROR.
    """
    try:
        return _sybil_traceback_filter(self, excinfo)
    except IndexError:
        return excinfo.traceback


_sybil_traceback_filter = SybilItem._traceback_filter
SybilItem._traceback_filter = _lenient_traceback_filter  # type: ignore[method-assign]

pytest_collect_file = Sybil(
    parsers=[
        CodeBlockParser("python", _AwaitingEvaluator()),
        CodeBlockParser("sh", _run_shell),
        SkipParser(),
    ],
    path=str(ROOT),
    patterns=["README.md", "docs/*.md", "docs/*/*.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
