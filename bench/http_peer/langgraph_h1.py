"""H1 over HTTP against LangGraph's Agent Server: the approval round trip, measured by a client.

One round trip, per iteration, on a fresh thread:

1. ``POST /threads`` — create the thread;
2. ``POST /threads/{id}/runs/wait`` with ``{"assistant_id": "h1", "input": {"n": 0}}`` — the run
   stops at the interrupt of ``review``; the response carries it under ``__interrupt__``;
3. ``POST /threads/{id}/runs/wait`` with ``{"assistant_id": "h1", "command": {"resume": true}}``
   — the run finishes; the response is the final state, ``{"n": 1, "approved": true}``.

The timer covers the three requests only; the checks of each response run outside it. The
warm-up iterations also read the thread's state (``GET /threads/{id}/state``) after the interrupt
and after the resume and check it (the measured iterations do not, so that no extra request sits
between the run and its resume).

``--concurrency N`` runs N clients at once (asyncio tasks, each with its own ``httpx`` client and
so its own keep-alive connection) that share the iterations; round trips/s is then iterations ÷
wall time. With one client it is iterations ÷ the sum of round-trip times.

``--client lean`` (the default) sends the requests with `lean_http.LeanClient` (standard library
only, one keep-alive connection), the client the interlock side of H1 uses too; ``--client httpx``
with ``httpx`` (the LangGraph venv has it), as before. Prints one JSON line. Usually started by
``peer.py``, which also starts and stops the server::

    python langgraph_h1.py --url http://127.0.0.1:2024 --iterations 200 --warmup 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import httpx
from lean_http import LeanClient

QUESTION = {"question": "approve?", "n": 1}
FINAL = {"n": 1, "approved": True}


class Violation(AssertionError):
    """A response that is not what the H1 graph must answer."""


@dataclass
class Sample:
    create_s: float
    run_s: float
    resume_s: float

    @property
    def total_s(self) -> float:
        return self.create_s + self.run_s + self.resume_s


@dataclass
class Shared:
    remaining: int
    samples: list[Sample] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _check_interrupt(body: Any) -> None:
    pending = body.get("__interrupt__") if isinstance(body, dict) else None
    if not pending or len(pending) != 1 or pending[0].get("value") != QUESTION:
        raise Violation(f"run did not stop at review's interrupt: {body!r}")
    if body.get("n") != 1 or "approved" in body:
        raise Violation(f"unexpected state at the interrupt: {body!r}")


def _check_final(body: Any) -> None:
    if body != FINAL:
        raise Violation(f"resume did not finish with approved=true: {body!r}")


def _check_state_interrupted(state: Any) -> None:
    tasks = state.get("tasks") or []
    interrupts = [i for t in tasks for i in t.get("interrupts", [])]
    if state.get("next") != ["review"] or [i.get("value") for i in interrupts] != [QUESTION]:
        raise Violation(f"thread state is not paused at review: {state!r}")
    if state.get("values") != {"n": 1}:
        raise Violation(f"thread values at the interrupt: {state.get('values')!r}")


def _check_state_done(state: Any) -> None:
    if state.get("next") != [] or state.get("values") != FINAL:
        raise Violation(f"thread state after the resume: {state!r}")


async def _post(client: httpx.AsyncClient, path: str, payload: dict[str, Any]) -> Any:
    response = await client.post(path, json=payload)
    response.raise_for_status()
    return response.json()


async def round_trip(client: httpx.AsyncClient, assistant: str, *, check_state: bool) -> Sample:
    t0 = perf_counter()
    thread = await _post(client, "/threads", {})
    t1 = perf_counter()
    thread_id = thread["thread_id"]
    runs = f"/threads/{thread_id}/runs/wait"
    t2 = perf_counter()
    paused = await _post(client, runs, {"assistant_id": assistant, "input": {"n": 0}})
    t3 = perf_counter()
    _check_interrupt(paused)
    if check_state:
        state = (await client.get(f"/threads/{thread_id}/state")).raise_for_status().json()
        _check_state_interrupted(state)
    t4 = perf_counter()
    done = await _post(client, runs, {"assistant_id": assistant, "command": {"resume": True}})
    t5 = perf_counter()
    _check_final(done)
    if check_state:
        state = (await client.get(f"/threads/{thread_id}/state")).raise_for_status().json()
        _check_state_done(state)
    return Sample(create_s=t1 - t0, run_s=t3 - t2, resume_s=t5 - t4)


def _client(url: str, request_timeout_s: float, kind: str = "lean") -> Any:
    if kind == "lean":
        return LeanClient(url, timeout=request_timeout_s)
    return httpx.AsyncClient(
        base_url=url,
        timeout=request_timeout_s,
        trust_env=False,  # loopback only: never a proxy from the environment
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    )


async def _worker(
    url: str, assistant: str, shared: Shared, request_timeout_s: float, kind: str
) -> None:
    async with _client(url, request_timeout_s, kind) as client:
        while shared.remaining > 0:
            shared.remaining -= 1
            shared.samples.append(await round_trip(client, assistant, check_state=False))


async def measure(
    url: str,
    *,
    assistant: str,
    iterations: int,
    warmup: int,
    concurrency: int,
    request_timeout_s: float,
    client: str = "lean",
) -> dict[str, Any]:
    async with _client(url, request_timeout_s, client) as warming:
        info = (await warming.get("/info")).raise_for_status().json()
        for _ in range(warmup):
            await round_trip(warming, assistant, check_state=True)

    shared = Shared(remaining=iterations)
    start = perf_counter()
    await asyncio.gather(
        *(_worker(url, assistant, shared, request_timeout_s, client) for _ in range(concurrency))
    )
    wall = perf_counter() - start

    totals = [s.total_s for s in shared.samples]
    per_s = len(totals) / (sum(totals) if concurrency == 1 else wall)

    def ms(values: list[float], q: float) -> float:
        return round(percentile(values, q) * 1000, 3)

    return {
        "peer": "langgraph-api",
        "version": info.get("version"),
        "langgraph": info.get("langgraph_py_version"),
        "concurrency": concurrency,
        "client": client,
        "iterations": len(totals),
        "warmup": warmup,
        "round_trips_per_s": round(per_s, 3),
        "p50_ms": ms(totals, 50),
        "p99_ms": ms(totals, 99),
        "phase_p50_ms": {
            "create_thread": ms([s.create_s for s in shared.samples], 50),
            "run_to_interrupt": ms([s.run_s for s in shared.samples], 50),
            "resume_to_done": ms([s.resume_s for s in shared.samples], 50),
        },
        "wall_s": round(wall, 3),
        "violations": 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="base URL of the server")
    parser.add_argument("--assistant", default="h1", help="graph id (assistant_id)")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="lean: lean_http.LeanClient, the client of interlock's H1 too (default); httpx",
    )
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.concurrency < 1 or args.warmup < 0:
        parser.error("--iterations and --concurrency must be ≥ 1, --warmup ≥ 0")
    try:
        result = asyncio.run(
            measure(
                args.url,
                assistant=args.assistant,
                iterations=args.iterations,
                warmup=args.warmup,
                concurrency=args.concurrency,
                request_timeout_s=args.timeout,
                client=args.client,
            )
        )
    except Violation as exc:
        print(json.dumps({"peer": "langgraph-api", "violations": 1, "error": str(exc)}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
