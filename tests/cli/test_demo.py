"""`interlock demo` end to end, in real processes, on a real SQLite file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from interlock import SqliteStore
from interlock.cli._demo import APPROVAL_KEY, build_demo_app


def interlock(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    exe = shutil.which("interlock") or ""
    cmd = [exe] if exe else [sys.executable, "-m", "interlock.cli"]
    return subprocess.run(
        [*cmd, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60
    )


def test_demo_waits_then_another_process_resumes(tmp_path: Path) -> None:
    first = interlock("demo", "--no-wait", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "needs approval" in first.stdout and "interlock demo --resume" in first.stdout
    db = tmp_path / "interlock-demo.db"
    assert db.exists()

    async def pending() -> list[str]:
        async with SqliteStore(db) as store:
            return [i.thread for i in await store.pending(key=APPROVAL_KEY)]

    (thread,) = anyio.run(pending)

    second = interlock("demo", "--resume", "--decide", "approve", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"Resuming thread {thread}" in second.stdout
    assert "Order processed" in second.stdout
    assert anyio.run(pending) == []

    async def final_state() -> dict[str, object]:
        async with SqliteStore(db) as store:
            state = await build_demo_app(store).get_state(thread)
            return state.values

    values = anyio.run(final_state)
    assert values["decision"] == "approve" and values["outcome"] == "processed"
    log = values["log"]
    assert isinstance(log, list) and log[-1].endswith("processed and paid")


def test_demo_interactive_reject_and_nothing_to_resume(tmp_path: Path) -> None:
    done = interlock("demo", "--amount", "120", cwd=tmp_path, stdin="reject\n")
    assert done.returncode == 0, done.stderr
    assert "¥120 needs approval" in done.stdout and "Order cancelled" in done.stdout
    nothing = interlock("demo", "--resume", cwd=tmp_path)
    assert nothing.returncode == 1
    assert "Nothing is pending" in nothing.stdout


@pytest.mark.parametrize("bad", [["--decide", "maybe"], ["--amount", "lots"]])
def test_demo_rejects_bad_options_with_usage(tmp_path: Path, bad: list[str]) -> None:
    out = interlock("demo", *bad, cwd=tmp_path)
    assert out.returncode == 2 and "Invalid value" in out.stderr
