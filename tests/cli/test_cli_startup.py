"""``interlock worker`` refuses to start in one line when it cannot work, before any banner."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _cli_run import APP, HERE
from test_cli_postgres import as_url

TIMEOUT = 60


def _start(folder: Path, *args: str) -> subprocess.Popen[str]:
    path = os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.Popen(
        [sys.executable, "-m", "interlock.cli", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": path, "INTERLOCK_TEST_DB": str(folder / "unused.db")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _refused_in_one_line(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in out + err, err
    assert "worker for" not in out + err, err  # the banner
    assert out == "", out
    (line,) = err.splitlines()
    return line


def test_a_worker_that_cannot_work_says_why_in_one_line(tmp_path: Path, dsn: str) -> None:
    with socket.socket() as closed, socket.socket() as taken:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections to it are refused
        down = f"postgresql://nobody@127.0.0.1:{closed.getsockname()[1]}/interlock"
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        metrics = str(taken.getsockname()[1])
        # Both at once: each spends its second importing, not waiting for the other.
        no_database = _start(tmp_path, "worker", "--app", APP, "--store", down)
        port_taken = _start(
            tmp_path, "worker", "--app", APP, "--store", as_url(dsn), "--metrics-port", metrics
        )
        unreachable = _refused_in_one_line(no_database)
        busy = _refused_in_one_line(port_taken)
    assert unreachable.startswith(f"Error: PostgreSQL {down} failed: connection"), unreachable
    assert "check that the server is up and reachable" in unreachable
    assert busy == (
        f"Error: cannot listen on 127.0.0.1:{metrics}: the port is taken by another program (or "
        "another interlock); stop it, or pass another --metrics-port (0 picks a free one)"
    )


@pytest.fixture(autouse=True)
def _no_inherited_target(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("INTERLOCK_APP", "INTERLOCK_STORE"):
        monkeypatch.delenv(name, raising=False)
