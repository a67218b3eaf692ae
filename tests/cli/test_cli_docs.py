"""docs/cli.md: its example files and shell sessions run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio

from interlock import SqliteStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
BLOCK = re.compile(r"```(python|sh)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    # Without the installed script, the same command line through the module.
    prelude = "" if shutil.which("interlock") else 'interlock() { python -m interlock.cli "$@"; }\n'
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", prelude + script],
        cwd=cwd,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_walkthroughs_run_as_written(tmp_path: Path) -> None:
    outputs = []
    for language, body in blocks():
        if language == "python":
            name = body.splitlines()[0].removeprefix("# ").strip()
            (tmp_path / name).write_text(body, encoding="utf-8")
            continue
        done = shell(body, tmp_path)
        assert done.returncode == 0, f"{body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        outputs.append(done.stdout)
    orders, ops = outputs
    assert "Thread order-42 is waiting on 1 new question(s)" in orders
    assert "refused: it takes basic or pro" in orders
    assert "Thread order-42 is done." in orders
    assert "every link intact" in orders
    assert "refused: not the tool's schema" in ops
    assert "Thread ticket-7 is done." in ops

    async def last_words() -> str:
        async with SqliteStore(tmp_path / "ops.db") as store:
            log = await store.audit_log(thread="ticket-7")
        return next(e.data.decode() for e in log if e.kind == "decision")

    assert '"after":{"command":"rm -rf /tmp/build/cache"}' in anyio.run(last_words)
