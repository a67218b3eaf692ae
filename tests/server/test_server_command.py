"""``interlock serve`` and ``interlock token new``, as a person runs them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
from _serving import serve_process
from click.testing import CliRunner

from interlock.cli import cli
from interlock.server import TokenAuth

HERE = Path(__file__).resolve().parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_token_new_prints_a_token_once_and_an_entry_that_authenticates_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["token", "new", "ana", "--role", "approver", "--tool", "send_*"]
    )
    assert result.exit_code == 0, result.output
    token = result.stderr.rsplit(": ", 1)[1].strip()
    entry = result.stdout
    assert token not in entry
    path = tmp_path / "tokens.toml"
    path.write_text(entry)
    identity = TokenAuth.from_file(path).authenticate(f"Bearer {token}")
    assert identity is not None
    assert (identity.name, identity.role, identity.tools) == ("ana", "approver", ("send_*",))


def test_serve_runs_the_api_for_the_app_and_stops_on_sigterm(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    made = CliRunner().invoke(cli, ["token", "new", "ana"])
    tokens.write_text(made.stdout)
    secret = made.stderr.rsplit(": ", 1)[1].strip()
    with serve_process(tmp_path / "o.db", tokens) as running:
        url = running.url
        headers = {"Authorization": f"Bearer {secret}"}
        r = httpx.post(
            f"{url}/v1/threads/t/runs", json={"input": {"n": 1}, "wait": True}, headers=headers
        )
        assert r.status_code == 200, r.text
        question = r.json()["thread_view"]["interrupts"][0]
        decided = httpx.post(
            f"{url}/v1/interrupts/{question['id']}/decision",
            json={"answer": True, "payload_hash": question["payload_hash"], "wait": True},
            headers={**headers, "Idempotency-Key": "k"},
        )
        assert decided.status_code == 201
        assert decided.json()["thread_view"]["status"] == "done"
        unknown = httpx.get(f"{url}/v1/me", headers={"Authorization": "Bearer nope"})
        assert unknown.status_code == 401
    out = running.log.read_text()
    # uvicorn shuts down cleanly, then ends by the signal it got (as its docs say).
    assert running.returncode in (0, -signal.SIGTERM), out
    assert "Application shutdown complete" in out
    assert f"serving 'orders' on {url}" in out


def test_ctrl_c_stops_the_server_cleanly(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    with serve_process(tmp_path / "o.db", tokens, stop=signal.SIGINT) as running:
        assert httpx.get(f"{running.url}/healthz").status_code == 200
    out = running.log.read_text()
    assert running.returncode in (0, -signal.SIGINT, 130), out
    assert "Application shutdown complete" in out


def test_serve_says_what_is_missing(tmp_path: Path) -> None:
    runner = CliRunner()
    # Neither a tokens file nor a principal in the store: nobody could sign in.
    missing = runner.invoke(
        cli,
        ["serve", "--app", "_serving:env_order_app", "--port", "0"],
        env={"INTERLOCK_TOKENS": None, "INTERLOCK_TEST_DB": str(tmp_path / "o.db")},
    )
    assert missing.exit_code == 2
    assert "--tokens" in missing.output and "interlock principal add" in missing.output
    bad = tmp_path / "bad.toml"
    bad.write_text("[[identity]]\nname = 'a'\n")
    refused = runner.invoke(cli, ["serve", "--app", "x:y", "--tokens", str(bad)])
    assert refused.exit_code == 2
    assert "token_sha256" in refused.output


def test_the_mounting_example_in_the_docs_serves_under_its_prefix(
    tmp_path: Path, monkeypatch: object
) -> None:
    import re

    from _serving import order_app, serving

    doc = (HERE.parent.parent / "docs" / "approvers.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", doc, re.S)
    made = CliRunner().invoke(cli, ["token", "new", "ana"])
    secret = made.stderr.rsplit(": ", 1)[1].strip()
    (tmp_path / "tokens.toml").write_text(made.stdout)

    def factory() -> object:
        scope: dict[str, object] = {"app": order_app(tmp_path / "o.db")}
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            exec(compile(block, "approvers.md", "exec"), scope)
        finally:
            os.chdir(cwd)
        return scope["outer"]

    with serving(factory) as s:  # type: ignore[arg-type]
        assert httpx.get(f"{s.url}/approvals/readyz").json() == {"status": "ready"}
        me = httpx.get(f"{s.url}/approvals/v1/me", headers={"Authorization": f"Bearer {secret}"})
        assert me.json()["name"] == "ana"
        assert me.json()["four_eyes"] is True


def test_a_token_in_a_query_string_never_reaches_the_access_log(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    made = CliRunner().invoke(cli, ["token", "new", "ana"])
    tokens.write_text(made.stdout)
    secret = made.stderr.rsplit(": ", 1)[1].strip()
    sent = [
        f"/v1/events?access_token={secret}",  # an EventSource cannot send a header
        f"/v1/interrupts?thread=t&token={secret}&limit=5",
        f"/v1/me?Authorization=Bearer%20{secret}",
        f"/v1/threads/t?app={secret}",  # the server's token, under any name
        "/v1/interrupts?access_token=an-old-token",
    ]
    with serve_process(tmp_path / "o.db", tokens) as running:
        for path in sent:
            assert httpx.get(running.url + path).status_code == 401  # never taken from a URL
        assert httpx.get(f"{running.url}/v1/me?thread=t-1&limit=5").status_code == 401
    out = running.log.read_text()
    assert secret not in out and "an-old-token" not in out
    assert '"GET /v1/events?access_token=[redacted] HTTP/1.1" 401' in out
    assert "/v1/interrupts?thread=t&token=[redacted]&limit=5 " in out
    assert "/v1/me?Authorization=[redacted] " in out
    assert "/v1/threads/t?app=[redacted] " in out
    assert "/v1/me?thread=t-1&limit=5 " in out  # what is not a token is left as it was


def _serve(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "interlock.cli", "serve", "--app", "_serving:env_order_app", *args],
        cwd=HERE,
        env={**os.environ, "INTERLOCK_TEST_DB": str(tmp_path / "o.db")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _refused_in_one_line(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in out + err, err
    assert "serving" not in out + err, out  # the banner: it would be a lie
    assert out == "", out
    (line,) = err.splitlines()
    return line


def test_serve_that_cannot_start_says_why_in_one_line_and_no_banner(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(CliRunner().invoke(cli, ["token", "new", "ana"]).stdout)
    with socket.socket() as closed, socket.socket() as taken:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections to it are refused
        down = f"postgresql://nobody@127.0.0.1:{closed.getsockname()[1]}/interlock"
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # Both at once: each spends its second importing, not waiting for the other.
        no_database = _serve(tmp_path, "--tokens", str(tokens), "--store", down, "--port", "0")
        port_taken = _serve(tmp_path, "--tokens", str(tokens), "--port", str(port))
        unreachable = _refused_in_one_line(no_database)
        busy = _refused_in_one_line(port_taken)
    assert unreachable.startswith(f"Error: PostgreSQL {down} failed: connection"), unreachable
    assert "check that the server is up and reachable" in unreachable
    assert busy == (
        f"Error: cannot listen on 127.0.0.1:{port}: the port is taken by another program (or "
        "another interlock); stop it, or pass another --port (0 picks a free one)"
    )
    assert not (tmp_path / "o.db").exists()  # refused before the app's store was opened
