"""A decision made in Slack: a signed interaction in → the decision recorded → the message updated.

    python bench/slack_decision.py              # 300 decisions
    python bench/slack_decision.py --n 1000

The approval server runs for real (uvicorn on a free loopback port, a SQLite file, the `Slack`
channel in its notifier) against the fake of Slack's Web API the tests use
(``tests/server/_slack_fake.py``, real HTTP on loopback). Each of N threads asks one question
and the question's message is posted first; then, one at a time, the bench presses *Approve*
as Slack would (a form body signed with the signing secret) and times until the fake has seen
the ``chat.update`` that says "Approved by ana". It prints p50, p99 and the mean in
milliseconds, and checks that each question got exactly one decision.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "server"))
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import httpx2 as httpx  # noqa: E402
import uvicorn  # noqa: E402
from _slack_fake import SIGNING_SECRET, TOKEN, FakeSlack, button, signed  # noqa: E402
from bench._common import percentile  # noqa: E402

from interlock import END, START, Graph, SqliteStore, approve  # noqa: E402
from interlock.server import Identity, Notifier, Slack, TokenAuth, create_app, hash_token  # noqa: E402


class S(TypedDict, total=False):
    ok: bool


def _app(path: Path) -> Any:
    def review(s: S) -> S:
        return {"ok": approve("Ship the order?")}

    g = Graph(S, name="bench")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    return g.compile(store=SqliteStore(path))


def _serve(factory: Any) -> tuple[str, uvicorn.Server, threading.Thread]:
    holder: dict[str, Any] = {}

    def run() -> None:
        config = uvicorn.Config(
            factory(), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
        holder["server"] = uvicorn.Server(config)
        holder["server"].run()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while "server" not in holder or not holder["server"].started:
        time.sleep(0.01)
    server: uvicorn.Server = holder["server"]
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}", server, thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="decisions to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, FakeSlack() as fake:
        path = Path(folder) / "bench.db"

        async def prepare() -> None:
            store = SqliteStore(path)
            await store.add_principal("ana", role="approver")
            await store.update_principal("ana", slack_user="UANA")
            await store.close()

        anyio.run(prepare)
        auth = TokenAuth({hash_token("t"): Identity(name="ana", role="approver")})

        def factory() -> Any:
            slack = Slack(
                token=TOKEN,
                signing_secret=SIGNING_SECRET,
                channel="C0BENCH",
                base_url=fake.base_url,
            )
            return create_app(
                _app(path),
                auth=auth,
                notifier=Notifier([slack]),
                poll_interval=0.005,
                decisions_per_second=1e6,
                decision_burst=1_000_000,
            )

        url, server, thread = _serve(factory)
        try:
            with httpx.Client(base_url=url, headers={"Authorization": "Bearer t"}) as client:
                for k in range(args.n):
                    started = client.post(f"/v1/threads/b{k}/runs", json={"input": {}})
                    assert started.status_code == 202, started.text
                posted = fake.wait_for("chat.postMessage", args.n, timeout=120)
                times: list[float] = []
                for message in posted:
                    body, headers = signed(button(message, "interlock.approve", "UANA"))
                    ts = message.answer["ts"]
                    began = time.perf_counter()
                    answer = client.post("/slack/interactions", content=body, headers=headers)
                    assert answer.status_code == 200, answer.text
                    while not any(
                        c.args["ts"] == ts and "Approved by ana" in c.args["text"]
                        for c in fake.of("chat.update")
                    ):
                        time.sleep(0.0005)
                        if time.perf_counter() - began > 5:
                            raise SystemExit(
                                f"no update: {[(c.method, c.args) for c in fake.calls[-3:]]}"
                            )
                    times.append((time.perf_counter() - began) * 1000)
                pending = client.get("/v1/interrupts").json()["items"]
        finally:
            server.should_exit = True
            thread.join(15)

        async def count() -> int:
            store = SqliteStore(path)
            try:
                found = 0
                for k in range(args.n):
                    entries = await store.audit_log(thread=f"b{k}")
                    found += sum(1 for e in entries if e.kind == "decision")
                return found
            finally:
                await store.close()

        decisions = anyio.run(count)
    line = {
        "bench": "slack_decision",
        "decisions": args.n,
        "recorded": decisions,
        "pending_after": len(pending),
        "p50_ms": round(percentile(times, 0.5), 2),
        "p99_ms": round(percentile(times, 0.99), 2),
        "mean_ms": round(statistics.fmean(times), 2),
    }
    print(json.dumps(line), flush=True)
    if decisions != args.n or pending:
        raise SystemExit(f"expected {args.n} decisions and nothing pending: {line}")


if __name__ == "__main__":
    main()
