"""What one approval over HTTP costs inside: store reads, and the layers it crosses.

    python bench/approval_reads.py
    python bench/approval_reads.py --src /path/to/other/checkout/src   # another tree, same driver

The approval server runs on loopback (uvicorn, port 0) over a SQLite file, in this process, so
that the store's methods can be counted. Two threads stop at an approval: one run by the
server's own App (*warm*: it holds the thread's latest state), one by another App on the same
file (*cold*: as when a worker ran it). For each, the client reads the question
(``GET /v1/interrupts/{id}``) and then decides it (``POST .../decision``). For each request the
script prints:

- the store's calls, by method (reads, and ``append_checkpoint``, the one write a decision
  makes). The server is told not to continue the thread (``continue_runs=False``), so what is
  counted is the approval alone, not the run it lets go on;
- the calls from one layer of interlock into another (server → runtime, runtime → stores, …),
  each the module a call leaves and the module it enters, with how many distinct functions of
  that module it enters (a layer's *doors*, as the server sees them).

``--src`` measures another source tree with the same driver, so two commits can be compared.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, TypedDict

HERE = Path(__file__).resolve().parent

_READS = (
    "get_interrupt",
    "get_checkpoint",
    "checkpoint_range",
    "checkpoints_at",
    "list_checkpoints",
    "get_thread",
    "threads",
    "pending",
    "pending_counts",
    "audit_log",
    "get_effect",
    "changes",
)
_WRITES = ("append_checkpoint",)


class Review(TypedDict, total=False):
    amount: int
    approved: bool


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "interlock":
        return None
    return parts[1] if len(parts) > 1 else "interlock"


class Crossings:
    """Calls from one interlock layer into another, seen by a profile hook."""

    def __init__(self) -> None:
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()
        self.doors: dict[tuple[str, str], set[str]] = collections.defaultdict(set)

    def hook(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        caller_frame = frame.f_back
        if caller_frame is None:
            return
        caller = caller_frame.f_globals.get("__name__", "")
        src, dst = _layer(caller), _layer(callee)
        if src is None or dst is None or src == dst:
            return
        self.calls[(caller, callee)] += 1
        self.doors[(caller, callee)].add(frame.f_code.co_qualname)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="measure this interlock source tree instead")
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))

    import httpx
    from _serve import serving

    import interlock
    from interlock import END, START, Graph, SqliteStore, approve
    from interlock.server import Identity, TokenAuth, create_app, hash_token

    def review(state: Review) -> Review:
        return {"approved": approve({"action": "refund", "amount": state["amount"]})}

    graph = Graph(Review, name="refunds")
    graph.add_node("review", review).add_edge(START, "review").add_edge("review", END)

    counts: collections.Counter[str] = collections.Counter()
    originals: dict[str, Any] = {}
    for name in (*_READS, *_WRITES):
        method = getattr(SqliteStore, name)

        def counted(self: Any, *a: Any, __m: Any = method, __n: str = name, **k: Any) -> Any:
            counts[__n] += 1
            return __m(self, *a, **k)

        originals[name] = method
        setattr(SqliteStore, name, counted)

    print(f"interlock from {Path(interlock.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "approvals.db"
        app = graph.compile(store=SqliteStore(path))
        # "warm": the server's App ran the thread; "cold": another process did (a worker).
        await app.run({"amount": 120}, thread="warm")
        writer = graph.compile(store=SqliteStore(path))
        await writer.run({"amount": 80}, thread="cold")
        await writer.run({"amount": 40}, thread="unseen")
        await writer.store.close()
        pending = {i.thread: i for i in await app.inbox()}
        auth = TokenAuth({hash_token("alice"): Identity(name="alice", role="approver")})
        asgi = create_app(app, auth=auth, continue_runs=False, poll_interval=3600)
        headers = {"authorization": "Bearer alice"}
        async with (
            serving(asgi) as url,
            httpx.AsyncClient(base_url=url, headers=headers) as client,
        ):
            await asyncio.sleep(0.05)  # the change feed's first read happens now, not below
            # "unseen": decided without a GET first (the hash from the inbox's listing).
            for thread in ("cold", "warm", "unseen"):
                iid = pending[thread].id
                digest = app.payload_hash(pending[thread])
                if thread != "unseen":
                    counts.clear()
                    crossings = Crossings()
                    sys.setprofile(crossings.hook)
                    try:
                        shown = await client.get(f"/v1/interrupts/{iid}")
                    finally:
                        sys.setprofile(None)
                    shown.raise_for_status()
                    _report(f"GET the question ({thread})", shown.status_code, counts, crossings)
                counts.clear()
                crossings = Crossings()
                sys.setprofile(crossings.hook)
                try:
                    decided = await client.post(
                        f"/v1/interrupts/{iid}/decision",
                        json={"answer": True, "payload_hash": digest},
                        headers={"idempotency-key": f"key-{thread}"},
                    )
                finally:
                    sys.setprofile(None)
                decided.raise_for_status()
                _report(f"POST the decision ({thread})", decided.status_code, counts, crossings)
        await app.store.close()
    for name, method in originals.items():
        setattr(SqliteStore, name, method)


def _report(
    label: str,
    status: int,
    counts: collections.Counter[str],
    crossings: Crossings,
) -> None:
    reads = sum(n for name, n in counts.items() if name in _READS)
    writes = sum(n for name, n in counts.items() if name in _WRITES)
    print(f"\n{label}: HTTP {status}")
    which = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k in _READS)
    print(f"  store reads: {reads}   ({which})")
    print(f"  store writes: {writes}")
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    doors: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for (caller, callee), n in crossings.calls.items():
        edges[(caller, callee)] += n
        doors[(caller, callee)] |= crossings.doors[(caller, callee)]
    entered = {
        (callee, fn)
        for (caller, callee), names in doors.items()
        if _layer(caller) == "server" and _layer(callee) not in ("server", "_args")
        for fn in names
    }
    modules = sorted({callee for callee, _ in entered})
    print(
        f"  the server enters {len(modules)} modules of lower layers, {len(entered)} functions "
        f"({sum(edges.values())} calls across layers in all)"
    )
    for module in modules:
        names = sorted(fn for callee, fn in entered if callee == module)
        print(f"    {module}: {', '.join(names)}")


if __name__ == "__main__":
    asyncio.run(main())
