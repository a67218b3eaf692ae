"""Usage totals: what model calls used, summed per run and per thread into checkpoint metadata,
carried across calls and processes, priced, and counted by Prometheus."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from prometheus_client import CollectorRegistry

from _crashes import stops_with
from interlock import END, START, Graph, Price, SqliteStore, append
from interlock.graph import Usage
from interlock.observability import PrometheusMetrics
from interlock.runtime import (
    UsageTotals,
    _usage,
    current_usage,
    interrupt,
    keep_limits,
    report_usage,
    usage_of,
)

pytestmark = pytest.mark.anyio

Opener = Callable[[Path | str], SqliteStore]


class S(TypedDict):
    log: Annotated[list[str], append]


def graph(*, ask: bool = False, model: str = "claude-sonnet-4-5-20250929") -> Graph[S]:
    """``call`` reports one model call of 1,000 in / 200 out (100 cached); with ``ask`` a
    second node asks a person, then reports one more call."""

    def call(state: S) -> dict[str, Any]:
        cost = report_usage(
            Usage(input_tokens=1000, output_tokens=200, cached_tokens=100), model=model
        )
        return {"log": [f"cost {cost}"]}

    def check(state: S) -> dict[str, Any]:
        answer = interrupt({"question": "go on?"})
        report_usage(Usage(input_tokens=10, output_tokens=1), model="small")
        return {"log": [f"answer {answer}"]}

    g: Graph[S] = Graph(S)
    g.add_node("call", call)
    g.add_edge(START, "call")
    if ask:
        g.add_node("check", check)
        g.add_edge("call", "check")
        g.add_edge("check", END)
    else:
        g.add_edge("call", END)
    return g


PRICES = {"claude-sonnet-4-5": Price(input=3.0, output=15.0, cached=0.3)}


def test_a_price_counts_cached_input_at_its_own_rate() -> None:
    price = Price(input=3.0, output=15.0, cached=0.3)
    used = Usage(input_tokens=10_000, output_tokens=1_000, cached_tokens=8_000)
    assert price.cost(used) == pytest.approx((2_000 * 3 + 8_000 * 0.3 + 1_000 * 15) / 1e6)
    assert Price(input=3.0, output=15.0).cost(used) == pytest.approx(
        (10_000 * 3 + 1_000 * 15) / 1e6
    )


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "3"])
def test_a_price_must_be_a_finite_number_at_least_zero(bad: Any) -> None:
    with pytest.raises(ValueError, match="per million tokens"):
        Price(input=bad, output=1.0)


def test_prices_must_map_model_names_to_prices() -> None:
    with pytest.raises(TypeError, match="must be a Price"):
        graph().compile(prices={"gpt-4o": 2.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="mapping of model names"):
        graph().compile(prices=[Price(input=1, output=1)])  # type: ignore[arg-type]


async def test_a_run_keeps_its_usage_in_the_checkpoint_metadata(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = graph().compile(store=sqlite_files(tmp_path / "t.db"), prices=PRICES)
    result = await app.run({"log": []}, thread="t")
    one = (1000 - 100) * 3 / 1e6 + 100 * 0.3 / 1e6 + 200 * 15 / 1e6
    assert result.values["log"] == [f"cost {round(one, 9)}"]  # priced by its prefix
    totals = usage_of((await app.get_state("t")).metadata)
    assert (totals.thread.input_tokens, totals.thread.output_tokens) == (1000, 200)
    assert totals.thread.cached_tokens == 100
    assert totals.thread.calls == 1 and totals.thread.cost == pytest.approx(one)
    assert totals.run == totals.thread
    assert set(totals.models) == {"claude-sonnet-4-5-20250929"}

    await app.run({"log": []}, thread="t")  # a second run: the thread sums, the run anew
    again = usage_of((await app.get_state("t")).metadata)
    assert again.thread.calls == 2 and again.thread.tokens == 2400
    assert again.thread.cost == pytest.approx(2 * one)
    assert again.run.calls == 1 and again.run.tokens == 1200


async def test_the_sums_go_on_in_another_process_after_a_question(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    first = graph(ask=True).compile(store=sqlite_files(db), prices=PRICES)
    result = await first.run({"log": []}, thread="t")
    assert result.status == "interrupted"
    waiting = usage_of((await first.get_state("t")).metadata)
    assert waiting.run.calls == 1

    other = graph(ask=True).compile(store=sqlite_files(db), prices=PRICES)  # a fresh App
    done = await other.resume("t", {result.interrupts[0].id: "yes"})
    assert done.status == "done"
    totals = usage_of((await other.get_state("t")).metadata)
    assert totals.run.calls == 2 and totals.thread.calls == 2  # one run, across the question
    assert totals.models["small"].input_tokens == 10
    assert totals.models["small"].cost is None and totals.thread.unpriced == 1
    assert totals.thread.cost == waiting.thread.cost  # the unpriced call adds no cost


async def test_a_run_that_reports_nothing_writes_no_usage(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    g: Graph[S] = Graph(S)
    g.add_node("quiet", lambda s: {"log": ["x"]})
    g.add_edge(START, "quiet")
    g.add_edge("quiet", END)
    app = g.compile(store=sqlite_files(tmp_path / "t.db"))
    await app.run({"log": []}, thread="t")
    meta = (await app.get_state("t")).metadata
    assert "usage" not in meta
    assert usage_of(meta) == UsageTotals()


async def test_running_time_leaves_out_the_wait_for_a_person(
    sqlite_files: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(_usage.time, "monotonic", lambda: now[0])
    app = graph(ask=True).compile(store=sqlite_files(tmp_path / "t.db"))

    def slow_call(state: S) -> dict[str, Any]:
        now[0] += 5.0  # the model call takes five seconds
        report_usage(Usage(input_tokens=1), model="m")
        return {}

    g: Graph[S] = Graph(S)
    g.add_node("call", slow_call)
    g.add_node("check", lambda s: {"log": [str(interrupt("ok?"))]})
    g.add_edge(START, "call")
    g.add_edge("call", "check")
    g.add_edge("check", END)
    app = g.compile(store=sqlite_files(tmp_path / "t.db"))
    result = await app.run({"log": []}, thread="t")
    assert usage_of((await app.get_state("t")).metadata).run_seconds == 5.0
    now[0] += 86_400.0  # a day waiting on a person
    await app.resume("t", {result.interrupts[0].id: "yes"})
    assert usage_of((await app.get_state("t")).metadata).run_seconds == 5.0


async def test_a_node_reads_the_totals_and_keeps_limits(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    seen: list[UsageTotals] = []

    def call(state: S) -> dict[str, Any]:
        report_usage(Usage(input_tokens=7, output_tokens=3), model="m")
        seen.append(current_usage())
        keep_limits("me:run", {"tokens": 50.0})
        keep_limits("me:thread", {"tokens": 90.0})
        return {}

    g: Graph[S] = Graph(S)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    app = g.compile(store=sqlite_files(tmp_path / "t.db"))
    await app.run({"log": []}, thread="t")
    assert seen[0].run.tokens == 10
    assert usage_of((await app.get_state("t")).metadata).grants == {
        "me:run": {"tokens": 50.0},
        "me:thread": {"tokens": 90.0},
    }
    await app.run({"log": []}, thread="t")  # a new run: a run's raised limits go
    assert seen[1].grants == {"me:thread": {"tokens": 90.0}}
    assert seen[1].thread.tokens == 20 and seen[1].run.tokens == 10


def test_outside_a_run_reporting_only_counts_metrics() -> None:
    assert report_usage(Usage(input_tokens=1), model="m") is None
    assert current_usage() == UsageTotals()
    with pytest.raises(TypeError, match="takes a Usage"):
        report_usage({"input_tokens": 1})  # type: ignore[arg-type]


def test_unreadable_usage_metadata_reads_as_nothing() -> None:
    assert usage_of({"usage": "junk"}) == UsageTotals()
    odd = usage_of({"usage": {"thread": {"input_tokens": -3, "cost": "x"}, "models": []}})
    assert odd.thread.input_tokens == 0 and odd.thread.cost is None and odd.models == {}


async def test_prometheus_counts_tokens_and_cost_by_model(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    metrics.attach()
    try:
        app = graph().compile(store=sqlite_files(tmp_path / "t.db"), prices=PRICES)
        await app.run({"log": []}, thread="t")
        await app.run({"log": []}, thread="u")
    finally:
        metrics.detach()
    model = "claude-sonnet-4-5-20250929"

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"model": model, **labels})

    assert sample("interlock_model_tokens_total", kind="input") == 2000
    assert sample("interlock_model_tokens_total", kind="output") == 400
    assert sample("interlock_model_tokens_total", kind="cached") == 200
    one = (900 * 3 + 100 * 0.3 + 200 * 15) / 1e6
    assert sample("interlock_model_cost_total") == pytest.approx(2 * one)


class Crash(BaseException):
    """Stands for the process ending between two steps: nothing more is committed."""


async def crashes(call: Awaitable[Any]) -> None:
    """Await ``call``, which must stop with `Crash`."""
    await stops_with(call, Crash)


def crashing(crash: dict[str, bool]) -> Graph[S]:
    """``call`` reports a call, ``quiet`` reports none, ``last`` reports one more call —
    unless ``crash`` says so, which stops it (and the process, as far as the store knows)."""

    def call(state: S) -> dict[str, Any]:
        if crash.pop("call", False):
            raise Crash
        report_usage(Usage(input_tokens=100, output_tokens=10), model="m")
        return {"log": ["call"]}

    def last(state: S) -> dict[str, Any]:
        if crash.pop("last", False):
            raise Crash
        report_usage(Usage(input_tokens=1, output_tokens=1), model="m")
        return {"log": ["last"]}

    g: Graph[S] = Graph(S)
    g.add_node("call", call)
    g.add_node("quiet", lambda s: {"log": ["quiet"]})
    g.add_node("last", last)
    g.add_edge(START, "call")
    g.add_edge("call", "quiet")
    g.add_edge("quiet", "last")
    g.add_edge("last", END)
    return g


async def test_only_changes_and_a_calls_last_checkpoint_hold_the_whole_totals(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    app = crashing({}).compile(store=sqlite_files(tmp_path / "t.db"))
    await app.run({"log": []}, thread="t")
    await app.run({"log": []}, thread="t")  # the thread had usage: its input says a new run
    state = await app.get_state("t")
    second = [state, *await app.history("t", limit=3, before=state.checkpoint_id)][::-1]
    # The second run: its input and the quiet step hold only the running seconds; the model
    # calls' steps hold the totals, the last one (the call's last checkpoint) too.
    kept = [s.metadata.get("usage") for s in second]
    assert [s.source for s in second] == ["input", "loop", "loop", "loop"]
    assert [type(v).__name__ for v in kept] == ["float", "dict", "float", "dict"]
    assert isinstance(kept[0], float) and kept[0] >= 0
    head = usage_of((await app.get_state("t")).metadata)
    assert (head.thread.calls, head.run.calls) == (4, 2)


async def test_a_thread_continued_after_a_crash_mid_run_counts_on_in_a_fresh_app(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    first = crashing({"last": True}).compile(store=sqlite_files(db))
    await crashes(first.run({"log": []}, thread="t"))
    stopped = (await first.get_state("t")).metadata
    assert type(stopped["usage"]) is float  # the quiet step: only its running seconds

    other = crashing({}).compile(store=sqlite_files(db))  # a fresh App: the file is all it has
    done = await other.resume("t")
    assert done.status == "done" and done.values["log"] == ["call", "quiet", "last"]
    totals = usage_of((await other.get_state("t")).metadata)
    assert (totals.thread.calls, totals.run.calls) == (2, 2)  # the call before the crash counts
    assert totals.thread.input_tokens == 101
    assert totals.run_seconds >= stopped["usage"]


async def test_a_run_cut_short_after_its_input_counts_its_run_anew(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    crash: dict[str, bool] = {}
    first = crashing(crash).compile(store=sqlite_files(db))
    await first.run({"log": []}, thread="t")  # run one: two calls
    crash["call"] = True
    await crashes(first.run({"log": []}, thread="t"))  # run two stops right after its input
    assert (await first.get_state("t")).source == "input"

    other = crashing({}).compile(store=sqlite_files(db))
    await other.resume("t")
    totals = usage_of((await other.get_state("t")).metadata)
    assert totals.thread.calls == 4
    assert totals.run.calls == 2  # run two's calls only, though run one's totals were carried


async def test_a_failure_recorded_on_a_checkpoint_inside_a_run_holds_the_whole_totals(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    from interlock import CheckpointCorrupt

    db = tmp_path / "t.db"
    first = crashing({"last": True}).compile(store=sqlite_files(db))
    await crashes(first.run({"log": []}, thread="t"))
    other = crashing({}).compile(store=sqlite_files(db))
    failed = await other.record_failure("t", CheckpointCorrupt("found damaged"))
    state = await other.get_state("t")
    assert failed == state.checkpoint_id and state.status == "failed"
    totals = usage_of(state.metadata)  # the thread is at rest: its totals are whole
    assert (totals.thread.calls, totals.run.calls) == (1, 1)
    assert totals.thread.input_tokens == 100


async def test_a_resume_in_the_app_that_waited_reads_the_totals_it_wrote(
    sqlite_files: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The App that wrote a checkpoint holds its totals: resuming there does not read them
    back from the metadata, and sums exactly as an App that does (another process)."""
    parsed: list[Any] = []
    from_meta = _usage.UsageTotals.from_meta.__func__  # type: ignore[attr-defined]

    def counting(cls: type[UsageTotals], value: Any) -> UsageTotals:
        parsed.append(value)
        return from_meta(cls, value)  # type: ignore[no-any-return]

    monkeypatch.setattr(_usage.UsageTotals, "from_meta", classmethod(counting))
    sums = []
    for same_app in (True, False):
        db = tmp_path / f"{same_app}.db"
        first = graph(ask=True).compile(store=sqlite_files(db), prices=PRICES)
        result = await first.run({"log": []}, thread="t")
        app = first if same_app else graph(ask=True).compile(store=sqlite_files(db), prices=PRICES)
        parsed.clear()
        done = await app.resume("t", {result.interrupts[0].id: "yes"})
        assert done.status == "done"
        assert bool(parsed) is not same_app  # only another App reads the totals back
        meta = (await app.get_state("t")).metadata[_usage.USAGE]
        sums.append({k: v for k, v in meta.items() if k != "run_seconds"})
    assert sums[0] == sums[1]
    assert sums[0]["run"]["calls"] == 2 and sums[0]["models"]["small"]["input_tokens"] == 10


async def test_odd_reports_sum_alike_in_the_app_that_waited_and_in_another(
    sqlite_files: Opener, tmp_path: Path
) -> None:
    """A report the metadata cannot hold as given (a count that is no whole number, a model
    name that is no str) sums after a resume as it reads back in another App."""

    def call(state: S) -> dict[str, Any]:
        report_usage(Usage(input_tokens=-3, output_tokens=2), model=7)  # type: ignore[arg-type]
        return {"log": [f"answer {interrupt('go on?')}"]}

    sums = []
    for same_app in (True, False):
        g: Graph[S] = Graph(S)
        g.add_node("call", call).add_edge(START, "call").add_edge("call", END)
        db = tmp_path / f"odd-{same_app}.db"
        first = g.compile(store=sqlite_files(db))
        result = await first.run({"log": []}, thread="t")
        app = first if same_app else g.compile(store=sqlite_files(db))
        await app.resume("t", {result.interrupts[0].id: "yes"})
        meta = (await app.get_state("t")).metadata[_usage.USAGE]
        sums.append({k: v for k, v in meta.items() if k != "run_seconds"})
    assert sums[0] == sums[1]
