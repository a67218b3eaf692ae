"""How long one question takes to reach 100 people by e-mail, each with their own links.

    python bench/email_fanout.py
    python bench/email_fanout.py --recipients 100 --reps 3

The approval server (its lifespan, in this process) serves an App over a SQLite file, with an
`Email` channel that has `EmailLinks`: the mail of a new question goes to each recipient
alone, with links minted for their principal. The mail goes over SMTP to aiosmtpd on
loopback. A run is started that asks one question; the script prints the time from the
question (just before the run starts) to the 1st, the 50th and the last message received,
and that last time per message.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import TypedDict

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from interlock import END, START, Graph, SqliteStore, approve
from interlock.server import Email, EmailLinks, Notifier, TokenAuth, create_app


class State(TypedDict, total=False):
    ok: bool


class Inbox:
    """Takes every message and notes when it arrived."""

    def __init__(self, expected: int) -> None:
        self.arrivals: list[float] = []
        self.expected = expected
        self.done = threading.Event()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.arrivals.append(time.perf_counter())
        if len(self.arrivals) >= self.expected:
            self.done.set()
        return "250 OK"


async def once(folder: Path, recipients: int, rep: int) -> list[float]:
    def ask(state: State) -> State:
        return {"ok": approve("Ship the order?")}

    graph = Graph(State, name="fanout")
    graph.add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    app = graph.compile(store=SqliteStore(folder / f"fanout-{rep}.db"))
    addresses = [f"p{i}@example.com" for i in range(recipients)]
    for i in range(recipients):
        await app.store.add_principal(f"p{i}", role="approver", email=f"p{i}@example.com")
    inbox = Inbox(recipients)
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        email = Email(
            "127.0.0.1",
            controller.port,
            sender="interlock@example.com",
            recipients=addresses,
            links=EmailLinks(secret="b" * 32),
        )
        # Nobody calls the server's API here: an authenticator that knows nobody.
        server = create_app(
            app,
            auth=TokenAuth({}),
            notifier=Notifier([email]),
            public_url="https://approvals.example.com",
            poll_interval=0.005,
        )
        async with server.router.lifespan_context(server):
            started = time.perf_counter()
            await app.run({}, thread=f"t{rep}")
            await asyncio.to_thread(inbox.done.wait, 60)
    finally:
        controller.stop()
        await app.store.close()
    return [t - started for t in sorted(inbox.arrivals)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    runs: list[list[float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            runs.append(asyncio.run(once(Path(tmp), args.recipients, rep)))
    n = args.recipients
    for label, index in (("1st", 0), (f"{n // 2}th", n // 2 - 1), (f"{n}th (last)", n - 1)):
        times = [r[index] * 1000 for r in runs if len(r) > index]
        print(f"question → {label:>12} message: median {statistics.median(times):8.1f} ms")
    last = [r[-1] * 1000 / n for r in runs if len(r) == n]
    print(f"per message (last / {n}):      median {statistics.median(last):8.2f} ms")
    print(f"({args.reps} runs, each: {n} recipients, one SMTP session per message)")


if __name__ == "__main__":
    main()
