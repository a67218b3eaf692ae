"""`interlock demo` end to end, in real processes, on a real SQLite file."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from interlock import SqliteStore
from interlock.cli import cli
from interlock.cli._demo import APPROVAL_KEY, build_demo_app
from interlock.stores import PendingFilter

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def command() -> list[str]:
    exe = shutil.which("interlock") or ""
    return [exe] if exe else [sys.executable, "-m", "interlock.cli"]


def interlock(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command(), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60
    )


def pending_threads(db: Path) -> list[str]:
    async def pending() -> list[str]:
        async with SqliteStore(db) as store:
            return [i.thread for i in await store.pending(PendingFilter(key=APPROVAL_KEY))]

    return anyio.run(pending)


def final_values(db: Path, thread: str) -> dict[str, object]:
    async def values() -> dict[str, object]:
        async with SqliteStore(db) as store:
            return dict((await build_demo_app(store).get_state(thread)).values)

    return anyio.run(values)


def test_demo_waits_then_another_process_resumes(tmp_path: Path) -> None:
    first = interlock("demo", "--no-wait", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "interlock-demo.db"
    # The way back names the file, so it works from any folder.
    assert "needs approval" in first.stdout
    assert f"interlock demo --resume --db {db}" in first.stdout
    (thread,) = pending_threads(db)

    second = interlock("demo", "--resume", "--decide", "approve", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"Resuming thread {thread}" in second.stdout
    assert "Order processed" in second.stdout
    assert pending_threads(db) == []
    values = final_values(db, thread)
    assert values["decision"] == "approve" and values["outcome"] == "processed"
    log = values["log"]
    assert isinstance(log, list) and log[-1].endswith("processed and paid")


def test_demo_interactive_reject_and_nothing_to_resume(tmp_path: Path) -> None:
    done = interlock("demo", "--amount", "120", cwd=tmp_path, stdin="reject\n")
    assert done.returncode == 0, done.stderr
    assert "¥120 needs approval" in done.stdout and "Order cancelled" in done.stdout
    nothing = interlock("demo", "--resume", cwd=tmp_path)
    assert nothing.returncode == 1
    assert f"Nothing is pending in {tmp_path / 'interlock-demo.db'}" in nothing.stdout


@pytest.mark.parametrize("bad", [["--decide", "maybe"], ["--amount", "lots"]])
def test_demo_rejects_bad_options_with_usage(tmp_path: Path, bad: list[str]) -> None:
    out = interlock("demo", *bad, cwd=tmp_path)
    assert out.returncode == 2 and "Invalid value" in out.stderr


class Terminal:
    """The demo on a pseudo-terminal, as a person runs it: read what it prints, send signals."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.fd, replica = pty.openpty()
        self.proc = subprocess.Popen(
            [*command(), *args], cwd=cwd, stdin=replica, stdout=replica, stderr=replica
        )
        os.close(replica)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 30) -> str:
        """Read the screen until ``text`` shows (or the program ends), at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while text not in self.screen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                break
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the program ended and closed the terminal
                break
            if not chunk:
                break
            self.screen += ANSI.sub("", chunk.decode(errors="replace")).replace("\r", "")
        return self.screen

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.fd)


def test_ctrl_c_at_the_question_commits_nothing_and_leaves_it_pending(tmp_path: Path) -> None:
    db = tmp_path / "interlock-demo.db"
    term = Terminal("demo", cwd=tmp_path)
    try:
        assert "Your decision" in term.read_until("Your decision"), term.screen
        (thread,) = pending_threads(db)
        term.proc.send_signal(signal.SIGINT)
        screen = term.read_until("--resume --db")
        try:
            status = term.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Ctrl-C at the question did not stop the demo:\n{screen}")
    finally:
        term.close()
    assert status == 130, screen
    assert "Interrupted: nothing was decided" in screen
    assert f"Thread {thread} is still waiting for approval" in screen
    assert "Aborted!" not in screen
    assert pending_threads(db) == [thread]
    assert "decision" not in final_values(db, thread)
    # No lease left behind: another process finishes it at once.
    later = interlock("demo", "--resume", "--decide", "reject", cwd=tmp_path)
    assert later.returncode == 0, later.stdout + later.stderr
    assert f"Resuming thread {thread}" in later.stdout and "Order cancelled" in later.stdout


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["demo", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_bare_enter_asks_again_and_never_approves(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    code, out, err = invoke("--db", str(db), stdin="\n\n")
    assert code == 1, out + err
    assert out.count("Your decision") == 3  # asked again after each bare Enter
    assert "No answer: nothing was decided" in err
    (thread,) = pending_threads(db)
    assert "decision" not in final_values(db, thread)

    code, out, err = invoke("--db", str(db), "--resume", stdin="\napprove\n")
    assert code == 0, out + err
    assert out.count("Your decision") == 2 and "Order processed" in out
    assert final_values(db, thread)["decision"] == "approve"


def test_decide_with_no_wait_is_refused_before_anything_starts(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    code, _, err = invoke("--db", str(db), "--no-wait", "--decide", "reject")
    assert code == 2
    assert "--decide answers the approval and --no-wait leaves it pending" in err
    assert not db.exists()


@pytest.mark.parametrize("amount", ["-5", "0", str(10**12)])
def test_amount_must_be_a_sane_positive_number(tmp_path: Path, amount: str) -> None:
    db = tmp_path / "orders.db"
    code, _, err = invoke("--db", str(db), "--amount", amount, "--decide", "approve")
    assert code == 2
    assert f"Invalid value for '--amount': {amount} is not in the range" in err
    assert not db.exists()


def test_amount_with_resume_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "orders.db"
    assert invoke("--db", str(db), "--no-wait")[0] == 0
    code, _, err = invoke("--db", str(db), "--resume", "--amount", "7", "--decide", "approve")
    assert code == 2 and "--amount sets a new order's amount" in err
    assert len(pending_threads(db)) == 1


def test_resume_without_a_database_names_the_file_and_creates_none(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = interlock("demo", "--resume", cwd=elsewhere)
    assert out.returncode == 1
    assert f"no demo database at {elsewhere / 'interlock-demo.db'}" in out.stderr
    assert list(elsewhere.iterdir()) == []
