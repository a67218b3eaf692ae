"""`interlock demo` end to end, in real processes, on a real SQLite file."""

from __future__ import annotations

import json
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
from interlock.agents import Message, Runner, ToolMessage
from interlock.cli import cli
from interlock.cli._demo import build_demo_agent

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def command() -> list[str]:
    exe = shutil.which("interlock") or ""
    return [exe] if exe else [sys.executable, "-m", "interlock.cli"]


def interlock(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command(), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60
    )


def pending_sessions(db: Path) -> list[str]:
    async def pending() -> list[str]:
        async with SqliteStore(db) as store:
            return [i.thread for i in await store.pending()]

    return anyio.run(pending)


def conversation(db: Path, session: str) -> list[Message]:
    async def read() -> list[Message]:
        async with SqliteStore(db) as store:
            return await Runner(build_demo_agent(), store).messages(session)

    return anyio.run(read)


def tool_message(db: Path, session: str) -> ToolMessage:
    (answer,) = [m for m in conversation(db, session) if isinstance(m, ToolMessage)]
    return answer


def audit(db: Path, session: str) -> list[tuple[str, str | None, dict[str, object]]]:
    """``(kind, actor, data)`` of the session's audit log, oldest first."""

    async def read() -> list[tuple[str, str | None, dict[str, object]]]:
        async with SqliteStore(db) as store:
            log = await store.audit_log(thread=session)
            return [(e.kind, e.actor, json.loads(e.data)) for e in log]

    return anyio.run(read)


def kinds(db: Path, session: str) -> list[str]:
    return [kind for kind, _, _ in audit(db, session)]


def test_demo_waits_then_another_process_resumes(tmp_path: Path) -> None:
    first = interlock("demo", "--no-wait", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    db = tmp_path / "interlock-demo.db"
    assert "ops wants to run: echo hello" in first.stdout
    assert "approval needed at node:tools/agent:ops/tool:execute:" in first.stdout
    assert "rule: every command" in first.stdout
    # The way back names the file, so it works from any folder.
    assert f"interlock demo --resume --db {db}" in first.stdout
    (session,) = pending_sessions(db)
    assert "effect_started" not in kinds(db, session)  # nothing ran before the approval

    second = interlock("demo", "--resume", "--decide", "approve", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"Resuming session {session}" in second.stdout
    assert "✓ execute ok: hello" in second.stdout  # the real echo's output
    assert "ops: Done. `echo hello` printed: hello" in second.stdout
    assert f"The command ran. Session {session} is done." in second.stdout
    assert pending_sessions(db) == []
    answer = tool_message(db, session)
    assert (answer.status, answer.content) == ("ok", "hello\n")
    log = audit(db, session)
    decision = next(data for kind, _, data in log if kind == "decision")
    assert decision["answer"] == {"action": "approve"}
    assert [k for k, _, _ in log if k.startswith("effect")] == ["effect_started", "effect_done"]


def test_interactive_reject_tells_the_agent_why_and_runs_nothing(tmp_path: Path) -> None:
    done = interlock("demo", cwd=tmp_path, stdin="reject\nnot on a Friday\n")
    assert done.returncode == 0, done.stderr
    assert "Your decision" in done.stdout and "Why?" in done.stdout
    assert "✗ execute rejected: not on a Friday" in done.stdout
    assert "Sorry, I did not run `echo hello`: not on a Friday." in done.stdout
    assert "The command did not run." in done.stdout
    db = tmp_path / "interlock-demo.db"
    session = re.search(r"Starting session (shell-\d+)", done.stdout)
    assert session is not None
    assert tool_message(db, session[1]).status == "rejected"
    log = audit(db, session[1])
    assert not [k for k, _, _ in log if k.startswith("effect")]  # the command never ran
    decision = next((actor, data) for kind, actor, data in log if kind == "decision")
    assert decision[0] == "demo-user"
    assert decision[1]["reason"] == "not on a Friday"
    assert decision[1]["answer"] == {"action": "reject", "message": "not on a Friday"}

    nothing = interlock("demo", "--resume", cwd=tmp_path)
    assert nothing.returncode == 1
    assert f"Nothing is pending in {db}" in nothing.stdout


def test_decide_reject_in_a_script_gives_the_default_reason(tmp_path: Path) -> None:
    db = tmp_path / "ops.db"
    out = interlock("demo", "--db", str(db), "--decide", "reject", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Your decision" not in out.stdout
    assert "Sorry, I did not run `echo hello`: The user rejected this tool call." in out.stdout
    assert pending_sessions(db) == []


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (["--decide", "maybe"], "Invalid value for '--decide'"),
        (["--db", "."], "Invalid value for '--db'"),
        (["--amount", "5000"], "No such option '--amount'"),  # the old order demo's
    ],
)
def test_demo_rejects_bad_options_with_usage(tmp_path: Path, bad: list[str], said: str) -> None:
    out = interlock("demo", *bad, cwd=tmp_path)
    assert out.returncode == 2 and said in out.stderr
    assert list(tmp_path.iterdir()) == []


def _default_sigint() -> None:
    """Give the program the SIGINT a shell gives a job in the foreground of a terminal.

    A process inherits an ignored SIGINT (a shell ignores it for commands started with ``&``,
    and so does every program such a command starts, this test run included), and Python then
    leaves it ignored: Ctrl-C would do nothing, as it should for a background job.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """The demo on a pseudo-terminal, as a person runs it: read what it prints, send signals."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.fd, replica = pty.openpty()
        self.proc = subprocess.Popen(
            [*command(), *args],
            cwd=cwd,
            stdin=replica,
            stdout=replica,
            stderr=replica,
            preexec_fn=_default_sigint,
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

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_reading(self, timeout: float = 10) -> None:
        """Wait until the program blocks reading the terminal, as it does when a person types.

        A prompt shows just before ``input`` waits; a SIGINT sent in between, before the wait
        begins, is seen by CPython's readline only on the next key, which never comes. A person
        cannot press Ctrl-C within those microseconds; a test can, so it waits for the read.
        """
        waiting = {"0", "7", "23", "270", "271"}  # read, poll, select, pselect6, ppoll (x86-64)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{self.proc.pid}/syscall") as f:
                    if f.read().split(" ", 1)[0] in waiting:
                        return
            except OSError:  # no /proc here, or not allowed to read it: wait a little instead
                time.sleep(0.5)
                return
            time.sleep(0.01)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.fd)


def signals(term: Terminal) -> str:
    """What the program does with signals, and what each of its threads waits in.

    For a failure message: whether SIGINT (bit 2) was blocked, ignored or caught, and where.
    """
    lines: list[str] = []
    try:
        with open(f"/proc/{term.proc.pid}/status") as f:
            lines += [line.strip() for line in f if line.startswith(("ShdPnd", "Sig"))]
        for task in sorted(Path(f"/proc/{term.proc.pid}/task").iterdir()):
            lines.append(f"thread {task.name}: {(task / 'syscall').read_text().strip()}")
    except OSError as exc:  # no /proc here, or the program is gone
        lines.append(f"(no /proc view: {exc})")
    return "\n".join(lines)


def interrupt_at(tmp_path: Path, prompt: str, *answers: str) -> tuple[int, str]:
    """Run the demo on a terminal, type ``answers``, press Ctrl-C at ``prompt``."""
    term = Terminal("demo", cwd=tmp_path)
    try:
        for answer in answers:
            assert "Your decision" in term.read_until("Your decision"), term.screen
            term.send(answer)
        assert prompt in term.read_until(prompt), term.screen
        term.wait_reading()
        term.proc.send_signal(signal.SIGINT)
        screen = term.read_until("--resume --db")
        try:
            status = term.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Ctrl-C at {prompt!r} did not stop the demo:\n{screen}\n{signals(term)}")
    finally:
        term.close()
    return status, screen


@pytest.mark.parametrize(
    ("prompt", "answers"),
    [("Your decision", ()), ("Why?", ("reject\n",))],
    ids=["at the decision", "at the reason"],
)
def test_ctrl_c_at_a_question_commits_nothing_and_leaves_it_pending(
    tmp_path: Path, prompt: str, answers: tuple[str, ...]
) -> None:
    db = tmp_path / "interlock-demo.db"
    status, screen = interrupt_at(tmp_path, prompt, *answers)
    (session,) = pending_sessions(db)
    assert status == 130, screen
    assert "Interrupted: nothing was decided" in screen
    assert f"Session {session} is still waiting for approval" in screen
    assert "Aborted!" not in screen and "Traceback" not in screen
    assert "decision" not in kinds(db, session)
    # No lease left behind: another process finishes it at once.
    later = interlock("demo", "--resume", "--decide", "approve", cwd=tmp_path)
    assert later.returncode == 0, later.stdout + later.stderr
    assert f"Resuming session {session}" in later.stdout and "The command ran" in later.stdout


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["demo", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_bare_enter_asks_again_and_never_approves(tmp_path: Path) -> None:
    db = tmp_path / "ops.db"
    code, out, err = invoke("--db", str(db), stdin="\n\n")
    assert code == 1, out + err
    assert out.count("Your decision") == 3  # asked again after each bare Enter
    assert "No answer: nothing was decided" in err
    (session,) = pending_sessions(db)
    assert "decision" not in kinds(db, session)

    code, out, err = invoke("--db", str(db), "--resume", stdin="\napprove\n")
    assert code == 0, out + err
    assert out.count("Your decision") == 2 and "The command ran" in out
    assert tool_message(db, session).status == "ok"


def test_decide_with_no_wait_is_refused_before_anything_starts(tmp_path: Path) -> None:
    db = tmp_path / "ops.db"
    code, _, err = invoke("--db", str(db), "--no-wait", "--decide", "reject")
    assert code == 2
    assert "--decide answers the approval and --no-wait leaves it pending" in err
    assert not db.exists()


def test_resume_without_a_database_names_the_file_and_creates_none(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = interlock("demo", "--resume", cwd=elsewhere)
    assert out.returncode == 1
    assert f"no demo database at {elsewhere / 'interlock-demo.db'}" in out.stderr
    assert list(elsewhere.iterdir()) == []


def test_resume_answers_the_oldest_pending_session_first(tmp_path: Path) -> None:
    db = tmp_path / "ops.db"
    assert invoke("--db", str(db), "--no-wait")[0] == 0
    (first,) = pending_sessions(db)
    assert invoke("--db", str(db), "--no-wait")[0] == 0
    second = next(s for s in pending_sessions(db) if s != first)
    code, out, _ = invoke("--db", str(db), "--resume", "--decide", "approve")
    assert code == 0 and f"Resuming session {first}" in out
    assert pending_sessions(db) == [second]


def test_the_prompt_takes_y_and_n_in_any_case(tmp_path: Path) -> None:
    code, out, err = invoke("--db", str(tmp_path / "yes.db"), stdin="maybe\nY\n")
    assert code == 0, out + err
    assert "'maybe' is not an answer: type approve or reject (or y, n)" in out + err
    assert out.count("Your decision") == 2 and "The command ran" in out
    code, out, err = invoke("--db", str(tmp_path / "no.db"), stdin="No\n\n")
    assert code == 0, out + err
    assert "The command did not run" in out
    (session,) = re.findall(r"Starting session (shell-\d+)", out)
    assert tool_message(tmp_path / "no.db", session).status == "rejected"
