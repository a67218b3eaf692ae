"""Principals and tokens across OS processes: two ``interlock serve`` processes share one
PostgreSQL; tokens made and revoked by the command line or through either server are taken
and refused by both within a second, with no restart."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx2 as httpx
import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict

from interlock.cli import cli

SERVING = Path(__file__).resolve().parent.parent / "server"

pytestmark = pytest.mark.slow  # server processes: run on the main Python only


def as_url(dsn: str) -> str:
    """The test server's DSN (libpq key=value form) as a postgresql:// URL."""
    parts = conninfo_to_dict(dsn)
    query = f"?options={quote(str(parts['options']), safe='')}" if parts.get("options") else ""
    return f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}{query}"


def interlock(*args: str) -> str:
    """Run a command in this process; its stdout."""
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout


@contextmanager
def serve(folder: Path, url: str) -> Iterator[str]:
    """``interlock serve`` in a process of its own; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log = folder / f"serve-{port}.log"
    command = ["-m", "interlock", "serve", "--app", "orders:graph", "--store", url]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *command, "--port", str(port)],
            cwd=folder,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(SERVING)])},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(base + "/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"interlock serve did not start: {log.read_text()}")
            time.sleep(0.05)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def me(base: str, token: str) -> int:
    return httpx.get(base + "/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code


def within_a_second(base: str, token: str, status: int) -> float:
    """Poll ``base`` until ``token`` is answered ``status``; fail after a second."""
    started = time.monotonic()
    while (got := me(base, token)) != status:
        took = time.monotonic() - started
        assert took < 1.0, f"{base} still answers {got} after {took:.2f}s"
        time.sleep(0.01)
    return time.monotonic() - started


def test_two_server_processes_follow_the_tokens_the_command_line_makes_and_revokes(
    tmp_path: Path, dsn: str
) -> None:
    url = as_url(dsn)
    (tmp_path / "orders.py").write_text(
        "from _serving import order_graph\n\ngraph = order_graph()\n"
    )
    interlock("principal", "add", "root", "--role", "admin", "--store", url)
    root = interlock("token", "create", "root", "--store", url).strip()
    interlock("principal", "add", "ana", "--store", url)
    with ExitStack() as servers:
        # No --tokens: the store has principals, so the servers authenticate with them.
        one = servers.enter_context(serve(tmp_path, url))
        two = servers.enter_context(serve(tmp_path, url))
        assert me(one, root) == me(two, root) == 200

        made = interlock("token", "create", "ana", "--json", "--store", url)
        issued = json.loads(made)
        token, token_id = issued["token"], issued["id"]
        for base in (one, two):
            within_a_second(base, token, 200)
        interlock("token", "revoke", token_id, "--store", url)
        for base in (one, two):
            within_a_second(base, token, 401)

        # Through a server's admin route, seen by the other.
        admin = {"Authorization": f"Bearer {root}"}
        made = httpx.post(one + "/v1/tokens", json={"principal": "ana"}, headers=admin).json()
        within_a_second(two, made["token"], 200)
        assert httpx.post(f"{one}/v1/tokens/{made['id']}/revoke", headers=admin).is_success
        assert me(one, made["token"]) == 401
        within_a_second(two, made["token"], 401)

        # A principal disabled by the command line: all of its tokens, on both.
        again = httpx.post(two + "/v1/tokens", json={"principal": "ana"}, headers=admin).json()
        within_a_second(one, again["token"], 200)
        interlock("principal", "disable", "ana", "--store", url)
        for base in (one, two):
            within_a_second(base, again["token"], 401)
        interlock("principal", "enable", "ana", "--store", url)
        for base in (one, two):
            within_a_second(base, again["token"], 200)
