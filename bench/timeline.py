"""How fast a long thread's timeline opens over HTTP: the Studio's reads of a 300-turn chat.

    python bench/timeline.py
    python bench/timeline.py --turns 600 --repeat 50
    python bench/timeline.py --src /path/to/other/checkout/src   # another tree, same driver

An agent-like graph (a model node that replies, a tool node every third turn) appends a user
message and an assistant reply of 200-500 characters per turn, checkpointing every step
(``durability="sync"``), into a SQLite file. The approval server then runs on loopback
(uvicorn, port 0) in this process, and a client times, ``--repeat`` times each:

- ``timeline first page``: ``GET /v1/threads/{thread}/timeline?limit=20``, what the page opens on;
- ``timeline middle page``: the page that starts halfway down the thread (``before=``);
- ``compare first..last``: ``GET .../compare`` of the thread's first and last checkpoints;
- ``thread``: ``GET /v1/threads/{thread}``, the thread's latest state, for scale.

It prints the p50 and p95 of each, in milliseconds, and the size of the answers.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

HERE = Path(__file__).resolve().parent


def _text(rng: random.Random, lo: int = 200, hi: int = 500) -> str:
    words = ("the", "order", "refund", "ship", "customer", "invoice", "account", "policy")
    out: list[str] = []
    size = rng.randint(lo, hi)
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(words))
    return " ".join(out)[:size]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--src", type=Path, help="measure this interlock source tree instead")
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
    sys.path.insert(0, str(HERE))

    import httpx
    from _common import percentile
    from _serve import serving

    import interlock
    from interlock import START, Graph, SqliteStore, append
    from interlock.server import Identity, TokenAuth, create_app, hash_token

    class State(TypedDict, total=False):
        messages: Annotated[list[dict[str, Any]], append]
        turns: int

    rng = random.Random(7)

    def model(state: State) -> dict[str, Any]:
        turns = state.get("turns", 0) + 1
        reply = {"role": "assistant", "content": _text(rng)}
        if turns % 3 == 0:
            reply["tool_calls"] = [{"id": f"c{turns}", "name": "lookup", "args": {"q": "x"}}]
        return {"messages": [reply], "turns": turns}

    def tools(state: State) -> dict[str, Any]:
        call = state["messages"][-1]["tool_calls"][0]
        answer = {"role": "tool", "tool_call_id": call["id"], "name": "lookup"}
        return {"messages": [{**answer, "content": _text(rng, 100, 200)}]}

    graph = Graph(State, name="chat")
    graph.add_node("model", model).add_node("tools", tools).add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["turns"] % 3 == 0 else None)

    print(f"interlock from {Path(interlock.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chat.db"
        writer = graph.compile(store=SqliteStore(path))
        started = time.perf_counter()
        for _ in range(args.turns):
            user = {"role": "user", "content": _text(rng)}
            await writer.run({"messages": [user]}, thread="chat")
        built = time.perf_counter() - started
        history = await writer.history("chat", limit=100_000)
        await writer.store.close()
        count = len(history)
        middle = history[count // 2].checkpoint_id
        first, last = history[-1].checkpoint_id, history[0].checkpoint_id
        messages = len(history[0].values["messages"])
        print(
            f"{args.turns} turns: {count} checkpoints, {messages} messages, "
            f"{path.stat().st_size / 1e6:.1f} MB; built in {built:.1f} s"
        )

        app = graph.compile(store=SqliteStore(path))
        auth = TokenAuth({hash_token("viewer"): Identity(name="viewer", role="viewer")})
        asgi = create_app(app, auth=auth, continue_runs=False)
        requests = {
            "timeline first page": ("/v1/threads/chat/timeline", {"limit": 20}),
            "timeline middle page": (
                "/v1/threads/chat/timeline",
                {"limit": 20, "before": middle},
            ),
            "compare first..last": ("/v1/threads/chat/compare", {"from": first, "to": last}),
            "thread": ("/v1/threads/chat", {}),
        }
        async with (
            serving(asgi) as url,
            httpx.AsyncClient(
                base_url=url, headers={"authorization": "Bearer viewer"}, timeout=60
            ) as client,
        ):
            print(f"\n{'request':<22} {'p50 ms':>8} {'p95 ms':>8} {'KB':>8}")
            for label, (route, params) in requests.items():
                times: list[float] = []
                size = 0
                for _ in range(args.repeat + 1):
                    t0 = time.perf_counter()
                    r = await client.get(route, params=params)
                    elapsed = time.perf_counter() - t0
                    r.raise_for_status()
                    size = len(r.content)
                    times.append(elapsed * 1000)
                times = times[1:]  # the first one warms the caches up
                print(
                    f"{label:<22} {percentile(times, 0.5):>8.1f} {percentile(times, 0.95):>8.1f}"
                    f" {size / 1000:>8.1f}"
                )
        await app.store.close()


if __name__ == "__main__":
    asyncio.run(main())
