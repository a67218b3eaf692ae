"""Running the command line in tests: in-process with CliRunner, or as a real process.

`Approvers` holds one test's SQLite file (``$INTERLOCK_TEST_DB``, which `_cli_app` reads) and
runs commands against it, naming the app as ``_cli_app:make_app`` and the store by URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import _cli_app
import anyio
import pytest
from click.testing import CliRunner, Result

from interlock import SqliteStore
from interlock.cli import cli
from interlock.stores import AuditRecord, InterruptRecord, ThreadRecord

HERE = Path(__file__).resolve().parent
APP = "_cli_app:make_app"
WIDE = {"COLUMNS": "200"}
"""Rich wraps tables to the terminal's width; tests read whole rows."""


class Approvers:
    """One test's store, and ways to run ``interlock`` on it."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dir = tmp_path
        self.db = tmp_path / "approvals.db"
        monkeypatch.setenv(_cli_app.DB_VARIABLE, str(self.db))
        monkeypatch.chdir(tmp_path)
        for name in ("INTERLOCK_APP", "INTERLOCK_STORE"):
            monkeypatch.delenv(name, raising=False)

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.db}"  # an absolute path: four slashes in all

    def start(self, kind: str, thread: str, **extra: Any) -> str:
        """Start a thread of ``kind``; return the id of the question it stops at."""
        return _cli_app.start(kind, thread, **extra)

    def invoke(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """Run ``interlock ARGS`` in this process."""
        return CliRunner().invoke(cli, list(args), env={**WIDE, **(env or {})})

    def read(self, *args: str) -> Result:
        """A read-only command, from the store alone."""
        return self.invoke(*args, "--store", self.store_url)

    def decide(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """A command that needs the app."""
        return self.invoke(*args, "--app", APP, env=env)

    def process(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m interlock.cli ARGS`` as a process of its own, in this test's folder."""
        return self._spawn(["-m", "interlock.cli", *args], env)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run Python ``code`` (with `_cli_app` imported) as a process of its own."""
        return self._spawn(["-c", f"import _cli_app\n{code}"], None)

    def _spawn(
        self, args: list[str], env: dict[str, str] | None
    ) -> subprocess.CompletedProcess[str]:
        path = os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
        return subprocess.run(
            [sys.executable, *args],
            cwd=self.dir,
            env={**os.environ, **WIDE, "PYTHONPATH": path, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def json(self, *args: str) -> Any:
        result = self.read(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    # -- reading the store directly, to check what the commands did ----------------------------

    def _with_store(self, fn: Any) -> Any:
        async def go() -> Any:
            async with SqliteStore(self.db) as store:
                return await fn(store)

        return anyio.run(go)

    def interrupt(self, id: str) -> InterruptRecord:
        found: InterruptRecord | None = self._with_store(lambda s: s.get_interrupt(id))
        assert found is not None
        return found

    def thread(self, thread: str) -> ThreadRecord:
        found: ThreadRecord | None = self._with_store(lambda s: s.get_thread(thread))
        assert found is not None
        return found

    def audit(self, thread: str) -> list[AuditRecord]:
        found: list[AuditRecord] = self._with_store(lambda s: s.audit_log(thread=thread))
        return found

    def decisions(self, thread: str) -> list[tuple[str | None, dict[str, Any]]]:
        """``(actor, data)`` of the thread's decision entries."""
        return [(e.actor, json.loads(e.data)) for e in self.audit(thread) if e.kind == "decision"]

    def values(self, thread: str) -> dict[str, Any]:
        app = _cli_app.make_app()

        async def go() -> dict[str, Any]:
            try:
                return (await app.get_state(thread)).values
            finally:
                await app.store.close()

        return anyio.run(go)
