"""What checking who may decide adds to a decision: `App.decide` with and without an Authority.

    python bench/authority.py                 # 2,000 decisions per case, 5 repetitions
    python bench/authority.py --n 5000 --reps 3
    python bench/authority.py --src /path/to/checkout-before/src   # the same driver, before

Each case runs N threads to an approval in memory (`MemoryStore`), then times N calls of
`App.decide`, one per thread, as a principal:

- ``none``: the question names nobody (the check returns at once);
- ``groups``: ``Authority(groups=("finance",), not_starter=True)``, decided by a member;
- ``four eyes``: a question without its own rules, decided with the server's four eyes
  (``require=Authority(not_starter=True)``);
- ``approvers``: ``Authority(not_approvers=True)``, which reads the thread's audit log.

It prints the median microseconds per decision of each case and its difference from
``none``. With ``--src`` naming a tree from before the check existed, only ``none`` runs there
(decided by name), for the before/after of a decision. The target: the check adds at most
100 µs to a decision.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else None
sys.path.insert(0, _SRC or str(Path(__file__).resolve().parent.parent / "src"))

import interlock  # noqa: E402
from interlock import END, START, App, Graph, MemoryStore, approve  # noqa: E402

Authority: Any = getattr(interlock, "Authority", None)
Principal: Any = getattr(interlock, "Principal", None)
BEFORE = Authority is None
"""The tree measured has no authority check (a tree from before it)."""


class S(TypedDict, total=False):
    ok: bool


def _app(authority: Any) -> App[S]:
    def review(s: S) -> S:
        if BEFORE:
            return {"ok": approve("Refund?")}
        return {"ok": approve("Refund?", authority=authority)}

    g = Graph(S, name="bench")
    g.add_node("review", review).add_edge(START, "review").add_edge("review", END)
    return g.compile(store=MemoryStore())


CASES: dict[str, tuple[Any, Any]] = (
    {"none": (None, None)}
    if BEFORE
    else {
        "none": (None, None),
        "groups": (Authority(groups=("finance",), not_starter=True), None),
        "four eyes": (None, Authority(not_starter=True)),
        "approvers": (Authority(not_approvers=True), None),
    }
)


async def _one(case: str, n: int) -> float:
    authority, require = CASES[case]
    app = _app(authority)
    ids = []
    for k in range(n):
        result = await app.run({}, thread=f"t{k}", metadata={"started_by": "ana"})
        ids.append(result.interrupts[0].id)
    start = time.perf_counter()
    if BEFORE:
        for k, iid in enumerate(ids):
            await app.decide(f"t{k}", {iid: True}, actor="carol")
    else:
        who = Principal(name="carol", groups=("finance",))
        for k, iid in enumerate(ids):
            await app.decide(f"t{k}", {iid: True}, actor=who, require=require)
    return (time.perf_counter() - start) / n * 1e6


async def _token_lookup(n: int) -> float:
    """Microseconds for the approval server's store-backed authenticator to name the caller
    of one request (its mirror warm: 1,000 principals with a token each)."""
    from interlock.server import StoreAuth, issue_token

    store = MemoryStore()
    tokens = []
    for k in range(1000):
        await store.add_principal(f"p{k}", role="approver", groups=("finance",))
        tokens.append((await issue_token(store, f"p{k}")).token)
    async with StoreAuth(store) as auth:
        headers = [f"Bearer {t}" for t in tokens]
        assert auth.authenticate(headers[0]) is not None
        start = time.perf_counter()
        for k in range(n):
            auth.authenticate(headers[k % len(headers)])
        return (time.perf_counter() - start) / n * 1e6


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--src", help="measure this interlock source tree instead")
    args = parser.parse_args()
    medians: dict[str, float] = {}
    for case in CASES:
        runs: list[Any] = [await _one(case, args.n) for _ in range(args.reps)]
        medians[case] = statistics.median(runs)
    base = medians["none"]
    print(f"interlock from {Path(interlock.__file__).parent}")
    print(f"App.decide, {args.n} decisions x {args.reps} repetitions (median µs per decision)")
    for case, us in medians.items():
        extra = "" if case == "none" else f"   +{us - base:6.1f} µs"
        print(f"  {case:10s} {us:8.1f} µs{extra}")
    if BEFORE:
        return
    lookup = await _token_lookup(args.n * 10)
    print(f"  token lookup (StoreAuth, warm) {lookup:6.2f} µs per request")
    worst = max(us - base for case, us in medians.items() if case != "none") + lookup
    verdict = "within" if worst <= 100 else "over"
    print(f"the check and the token lookup add at most {worst:.1f} µs: {verdict} the 100 µs target")


if __name__ == "__main__":
    asyncio.run(main())
