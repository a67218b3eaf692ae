"""A real OpenID provider for the single sign-on tests, and servers that sign people in with it.

The provider is the `oidc-provider` npm package, run by the machine's Node.js from
``tests/server/oidc/`` (``npm ci`` installs it there the first time; ``.ci/run`` does it before
the tests). Node.js missing is a failure, not a skip: single sign-on would go untested.

Each approval server under test listens on a socket bound first (port 0), so its callback URL
is known before it starts; it registers itself with the provider under that URL (dynamic
client registration).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2 as httpx
import uvicorn
from _serving import Serving, _stores_of
from starlette.types import ASGIApp

PROVIDER_DIR = Path(__file__).resolve().parent / "oidc"

ACCOUNTS: dict[str, dict[str, Any]] = {
    "ana@example.com": {"email": "ana@example.com", "groups": ["approvers", "staff"]},
    "olga@example.com": {"email": "olga@example.com", "groups": ["ops"]},
    "vera@example.com": {"email": "vera@example.com", "groups": ["auditors"]},
    "nina@example.com": {"email": "nina@example.com", "groups": ["visitors"]},
    "root@example.com": {"email": "root@example.com", "roles": ["admin"]},
}
"""The provider's people: account id (also their email) to claims."""


class NodeMissing(RuntimeError):
    """Raised when Node.js or npm, which run the test OpenID provider, is not installed."""


def install() -> None:
    """``npm ci`` in ``tests/server/oidc`` unless its packages are installed already."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise NodeMissing(
                f"the single sign-on tests run a real OpenID provider with Node.js, and {tool} "
                "is not on PATH: install Node.js 20 or later (apt-get install nodejs npm)"
            )
    if (PROVIDER_DIR / "node_modules" / "oidc-provider" / "package.json").exists():
        return
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=PROVIDER_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise NodeMissing(f"npm ci in {PROVIDER_DIR} failed:\n{done.stdout}\n{done.stderr}")


@dataclass
class Provider:
    """The OpenID provider, running."""

    issuer: str

    def register(self, redirect_url: str) -> tuple[str, str]:
        """Register a client with ``redirect_url``; its ``(client_id, client_secret)``."""
        answer = httpx.post(
            f"{self.issuer}/reg",
            json={
                "redirect_uris": [redirect_url],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        )
        assert answer.status_code == 201, answer.text
        body = answer.json()
        return body["client_id"], body["client_secret"]

    def tamper_next_id_token(self, mode: str) -> None:
        """Make the next token response carry a bad ID token (``forged``, ``expired``,
        ``wrong-audience``)."""
        answer = httpx.post(f"{self.issuer}/test/next-id-token", data={"mode": mode})
        assert answer.status_code == 204, answer.text


@contextmanager
def oidc_provider(folder: Path) -> Iterator[Provider]:
    """Run the OpenID provider with `ACCOUNTS` on a free loopback port."""
    install()
    setup = folder / "oidc-setup.json"
    setup.write_text(json.dumps({"accounts": ACCOUNTS}), encoding="utf-8")
    log = folder / "oidc-provider.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            ["node", str(PROVIDER_DIR / "provider.mjs"), str(setup)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    try:
        assert process.stdout is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(30)
        if not line or not line[0]:
            raise AssertionError(f"the OpenID provider did not start: {log.read_text()}")
        yield Provider(issuer=json.loads(line[0])["issuer"])
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the provider stops when its standard input closes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


@contextmanager
def serving_at(factory: Callable[[str], ASGIApp]) -> Iterator[Serving]:
    """Run ``factory(url)`` under uvicorn on a socket bound first (port 0) at ``url``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    holder: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        try:
            config = uvicorn.Config(
                factory(url), log_level="warning", lifespan="on", timeout_graceful_shutdown=1
            )
            server = uvicorn.Server(config)
            holder["server"] = server
        except BaseException as exc:
            holder["error"] = exc
            ready.set()
            raise
        ready.set()
        try:
            server.run(sockets=[sock])
        finally:
            for store in _stores_of(config.app):
                anyio.run(store.close)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        ready.wait(10)
        if "error" in holder:
            raise holder["error"]
        server: uvicorn.Server = holder["server"]
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        try:
            yield Serving(url=url, server=server)
        finally:
            server.should_exit = True
            thread.join(15)
    finally:
        sock.close()


def to_callback(client: httpx.Client, server: str, account: str, *, next: str = "") -> str:
    """Sign ``account`` in at the provider, starting at ``server``'s ``/auth/login``; the URL
    of the callback the provider sends the browser back to (not followed)."""
    url = f"{server}/auth/login" + (f"?next={next}" if next else "")
    for _ in range(10):
        answer = client.get(url)
        if answer.status_code == 200 and "/interaction/" in url:
            # The provider's sign-in page: name the account.
            answer = client.post(url.rstrip("/") + "/login", data={"account": account})
        assert answer.status_code in (302, 303), (url, answer.status_code, answer.text)
        url = urljoin(url, answer.headers["location"])
        if url.startswith(f"{server}/auth/callback"):
            return url
    raise AssertionError("the provider did not send the browser back")
