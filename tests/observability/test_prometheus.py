"""`PrometheusMetrics`: runs, interrupts, decisions and reconcile questions counted through the
runtime's hooks; the pending gauge from the apps' inboxes; prometheus_client stays optional."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import pytest
from _observed import MAIL, broken_graph, failing_charge_app, mail_agent, order_graph
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import interlock
from interlock import END, START, Graph, NodeError
from interlock.observability import PrometheusMetrics, _hooks

pytestmark = pytest.mark.anyio


@pytest.fixture
def metrics() -> Iterator[PrometheusMetrics]:
    m = PrometheusMetrics(CollectorRegistry())
    m.attach()
    try:
        yield m
    finally:
        m.detach()


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry's exposition (what a scrape reads), by name and labels."""
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_runs_interrupts_and_decisions_are_counted(metrics: PrometheusMetrics) -> None:
    orders, mail = order_graph().compile(), mail_agent().compile()
    asked = await orders.run({"n": 1}, thread="o1")
    await orders.resume("o1", {asked.interrupts[0].id: True}, actor="ana")
    mailed = await mail.run(MAIL, thread="m1")
    await mail.decide("m1", {mailed.interrupts[0].id: False}, actor="ben")
    await mail.resume("m1")
    found = samples(metrics.registry)
    assert found[("interlock_runs_total", (("status", "interrupted"),))] == 2
    assert found[("interlock_runs_total", (("status", "done"),))] == 2
    assert found[("interlock_run_seconds_count", ())] == 4
    assert found[("interlock_run_seconds_sum", ())] > 0
    raised = "interlock_interrupts_raised_total"
    assert found[(raised, (("kind", "dynamic"), ("tool", "")))] == 1
    assert found[(raised, (("kind", "dynamic"), ("tool", "send_email")))] == 1
    assert found[("interlock_decision_seconds_count", (("tool", ""),))] == 1
    assert found[("interlock_decision_seconds_count", (("tool", "send_email"),))] == 1
    assert found[("interlock_reconciles_total", ())] == 0


async def test_failures_and_refusals_have_their_status(metrics: PrometheusMetrics) -> None:
    g = broken_graph()
    app = g.compile()
    with pytest.raises(NodeError):
        await app.run({}, thread="t")
    with pytest.raises(interlock.CheckpointNotFound):
        await app.resume("nobody")
    runs = metrics.registry.get_sample_value
    assert runs("interlock_runs_total", {"status": "failed"}) == 1
    assert runs("interlock_runs_total", {"status": "error"}) == 1


async def test_a_vote_is_not_a_decision_yet(metrics: PrometheusMetrics) -> None:
    class S(TypedDict, total=False):
        ok: bool

    g = Graph(S)
    g.add_node("pay", lambda s: {"ok": interlock.approve("Pay?", approvals=2)})
    g.add_edge(START, "pay").add_edge("pay", END)
    app = g.compile()
    (question,) = (await app.run({}, thread="q")).interrupts
    await app.decide("q", {question.id: True}, actor="ana")
    count = "interlock_decision_seconds_count"
    assert metrics.registry.get_sample_value(count, {"tool": ""}) is None
    await app.decide("q", {question.id: True}, actor="ben")
    assert metrics.registry.get_sample_value(count, {"tool": ""}) == 1


async def test_reconcile_questions_are_counted(metrics: PrometheusMetrics) -> None:
    app = failing_charge_app()
    with pytest.raises(NodeError):
        await app.run({}, thread="e")
    await app.resume("e")
    value = metrics.registry.get_sample_value
    assert value("interlock_reconciles_total") == 1
    assert value("interlock_interrupts_raised_total", {"tool": "", "kind": "reconcile"}) == 1


async def test_the_pending_gauge_follows_the_inboxes(metrics: PrometheusMetrics) -> None:
    orders, mail = order_graph().compile(), mail_agent().compile()
    for thread in ("o1", "o2"):
        await orders.run({"n": 1}, thread=thread)
    mailed = await mail.run(MAIL, thread="m1")
    pending = "interlock_interrupts_pending"
    assert metrics.registry.get_sample_value(pending, {"tool": ""}) is None  # not refreshed yet
    await metrics.refresh(orders, mail)
    assert samples(metrics.registry)[(pending, (("tool", ""),))] == 2
    assert samples(metrics.registry)[(pending, (("tool", "send_email"),))] == 1

    await mail.decide("m1", {mailed.interrupts[0].id: True}, actor="ana")
    await metrics.refresh(orders, mail)
    assert metrics.registry.get_sample_value(pending, {"tool": ""}) == 2
    # Nothing waits on send_email any more: its series is gone, not stuck at its last value.
    assert metrics.registry.get_sample_value(pending, {"tool": "send_email"}) is None


async def test_detached_metrics_count_nothing_and_several_may_be_attached() -> None:
    first, second = PrometheusMetrics(CollectorRegistry()), PrometheusMetrics(CollectorRegistry())
    app = order_graph().compile()
    first.attach()
    first.attach()  # attaching again changes nothing
    second.attach()
    try:
        assert first.attached and second.attached and repr(first) == "<PrometheusMetrics attached>"
        await app.run({"n": 1}, thread="a")
        first.detach()
        await app.run({"n": 1}, thread="b")
    finally:
        first.detach()
        second.detach()
    await app.run({"n": 1}, thread="c")
    interrupted = {"status": "interrupted"}
    assert first.registry.get_sample_value("interlock_runs_total", interrupted) == 1
    assert second.registry.get_sample_value("interlock_runs_total", interrupted) == 2
    assert not _hooks.OBSERVERS


async def test_an_observer_that_raises_fails_no_run() -> None:
    class Broken:
        def run_ended(self, status: str, seconds: float) -> None:
            raise RuntimeError("observer bug")

        def interrupt_raised(self, tool: str | None, kind: str) -> None:
            raise RuntimeError("observer bug")

        def decision_recorded(self, tool: str | None, seconds: float, final: bool) -> None:
            raise RuntimeError("observer bug")

        def reconcile_raised(self) -> None:
            raise RuntimeError("observer bug")

    broken = Broken()
    _hooks.subscribe(broken)
    try:
        app = order_graph().compile()
        asked = await app.run({"n": 1}, thread="t")
        result = await app.resume("t", {asked.interrupts[0].id: True})
    finally:
        _hooks.unsubscribe(broken)
    assert result.status == "done"


def python(code: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(interlock.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_runtime_does_not_load_prometheus_client() -> None:
    out = python(
        "import sys, interlock, interlock.observability\n"
        "from interlock import START, Graph\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_metrics_without_prometheus_client_name_the_extra() -> None:
    out = python(
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from interlock.observability import PrometheusMetrics\n"
        "PrometheusMetrics()\n"
    )
    assert out.returncode == 1
    assert "ImportError: interlock.observability.PrometheusMetrics needs prometheus_client" in (
        out.stderr
    )
    assert "pip install 'interlock[server]'" in out.stderr
