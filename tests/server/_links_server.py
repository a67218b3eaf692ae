"""An approval server that mails one-tap links: an agent, its principals, an aiosmtpd mailbox.

The server runs under uvicorn on a socket bound to a free loopback port before the app is
built (the links need the server's public URL), in a thread of its own.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from _notify_mailbox import Mail, Mailbox
from _serving import auth, refund, wipe_disk

from interlock import App, Authority, SqliteStore
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    UserMessage,
    call,
    require_approval,
)
from interlock.server import Email, EmailLinks, Notifier, TrustedProxy, create_app

SECRET = "links-secret-" + "k" * 40
SENDER = "interlock@example.com"
ADDRESSES = {
    "ana@example.com": "ana",
    "ben@example.com": "ben",
    "eve@example.com": "eve",
}
"""Whose address each is; zed@example.com belongs to nobody."""
RECIPIENTS = [*ADDRESSES, "zed@example.com"]
LINK = re.compile(r"^(Approve|Reject):\s+(\S+)", re.M)


def desk_agent(path: Path) -> App[Any]:
    """Refunds (ana or ben may approve) and disk wipes (approving them takes a confirmation)."""

    def script(messages: Any, tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage):
            if last.content.startswith("wipe"):
                return call("wipe_disk", {"device": "/dev/sdb"})
            return call("refund", {"amount": int(last.content.split()[-1])})
        return "Done."

    policy = ApprovalPolicy(
        {
            "refund": [
                require_approval(name="money", authority=Authority(principals=("ana", "ben")))
            ],
            "wipe_disk": [require_approval(name="disks", confirm=True)],
        }
    )
    agent = ToolAgent(
        "desk", ScriptedModel(script, name="desk"), [refund, wipe_disk], policy=policy
    )
    return agent.compile(store=SqliteStore(path))


async def add_principals(app: App[Any]) -> None:
    store = app.store
    email = {name: address for address, name in ADDRESSES.items()}
    for name, role in (("ana", "approver"), ("ben", "approver"), ("eve", "viewer")):
        if await store.get_principal(name) is None:
            # Addresses are kept as given and found whatever their case.
            await store.add_principal(name, role=role, email=email[name].upper())


@dataclass
class LinkServer:
    """The running server and the mailbox its mail goes to."""

    url: str
    mailbox: Mailbox
    links: EmailLinks

    def mail_to(self, address: str, interrupt_id: str, timeout: float = 10.0) -> Mail:
        """The mail ``address`` got about ``interrupt_id`` (waits for it)."""
        deadline = time.monotonic() + timeout
        while True:
            for mail in list(self.mailbox.mail):
                body = mail.message.get_content()
                if mail.rcpt_tos == [address] and f"Interrupt: {interrupt_id}" in body:
                    return mail
            if time.monotonic() > deadline:
                raise AssertionError(f"no mail to {address} about {interrupt_id}")
            time.sleep(0.02)


def links_of(mail: Mail) -> dict[str, str]:
    """``{"Approve": url, "Reject": url}`` from a mail's body."""
    return {what: url for what, url in LINK.findall(mail.message.get_content())}


@contextmanager
def link_server(
    folder: Path, *, require_sign_in: bool = False, ttl: float = 3600.0
) -> Iterator[LinkServer]:
    """The desk agent served with e-mail links, its mail caught by a `Mailbox`."""
    links = EmailLinks(secret=SECRET, ttl=ttl, require_sign_in=require_sign_in)
    with Mailbox() as mailbox:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        holder: dict[str, Any] = {}

        def run() -> None:
            app = desk_agent(folder / "desk.db")
            anyio.run(add_principals, app)
            email = Email(
                mailbox.host,
                mailbox.port,
                sender=SENDER,
                recipients=RECIPIENTS,
                links=links,
                backoff=0.01,
            )
            proxy = (
                TrustedProxy(addresses=("127.0.0.1",), default_role="approver")
                if require_sign_in
                else None
            )
            server = uvicorn.Server(
                uvicorn.Config(
                    create_app(
                        app, auth=auth(), notifier=Notifier([email]), public_url=url, proxy=proxy
                    ),
                    log_level="warning",
                    lifespan="on",
                    timeout_graceful_shutdown=1,
                )
            )
            holder["server"] = server
            try:
                server.run(sockets=[sock])
            finally:
                anyio.run(app.store.close)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not getattr(holder.get("server"), "started", False):
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        try:
            yield LinkServer(url=url, mailbox=mailbox, links=links)
        finally:
            holder["server"].should_exit = True
            thread.join(15)
            sock.close()
