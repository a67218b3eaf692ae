"""OpenTelemetry spans of runs, steps, nodes, interrupts, decisions and effects; the link that
carries a thread's trace across an interrupt, from one process (App, store) to the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from _observed import (
    MAIL,
    attributes,
    broken_graph,
    mail_agent,
    named,
    order_graph,
    recording,
    run_python,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NonRecordingSpan, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from interlock import END, START, Graph, NodeError, SqliteStore, approve, effect
from interlock.observability import _otel, _tracing

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recording() as exporter:
        yield exporter


async def test_a_run_is_a_span_of_steps_of_nodes(spans: InMemorySpanExporter) -> None:
    app = order_graph().compile()
    result = await app.run({"n": 1}, thread="t1")
    assert result.status == "interrupted"

    (run,) = named(spans, "interlock.run")
    assert attributes(run) == {
        "interlock.thread": "t1",
        "interlock.graph": "orders",
        "interlock.resumed": False,
        "interlock.run.id": attributes(run)["interlock.run.id"],
        "interlock.status": "interrupted",
        "interlock.checkpoint.id": result.checkpoint_id,
    }
    steps = named(spans, "interlock.step")
    assert [attributes(s)["interlock.step"] for s in steps] == [0, 1]
    assert [attributes(s)["interlock.nodes"] for s in steps] == [("prepare",), ("review",)]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in steps)
    prepare, review = named(spans, "interlock.node")
    assert attributes(prepare)["interlock.node"] == "prepare"
    assert attributes(prepare)["interlock.address"] == "node:prepare"
    assert attributes(prepare)["interlock.task.id"]
    assert prepare.parent is not None and prepare.parent.span_id == steps[0].context.span_id
    assert review.parent is not None and review.parent.span_id == steps[1].context.span_id
    # Asking a question is not a failure of the node.
    assert attributes(review)["interlock.node.interrupted"] is True
    assert review.status.status_code is StatusCode.UNSET
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {run.context.trace_id}


async def test_an_interrupt_is_an_event_of_the_run_that_raised_it(
    spans: InMemorySpanExporter,
) -> None:
    app = mail_agent().compile()
    result = await app.run(MAIL, thread="m1")
    (question,) = result.interrupts
    (run,) = named(spans, "interlock.run")
    (event,) = [e for e in run.events if e.name == "interlock.interrupt"]
    assert dict(event.attributes or {}) == {
        "interlock.interrupt.id": question.id,
        "interlock.interrupt.kind": "dynamic",
        "interlock.interrupt.address": str(question.address),
        "interlock.interrupt.tool": "send_email",
    }


class Go(TypedDict, total=False):
    ok: bool


def go_graph(**ask: Any) -> Graph[Go]:
    g = Graph(Go)
    g.add_node("ask", lambda s: {"ok": approve("Go?", **ask)})
    g.add_edge(START, "ask").add_edge("ask", END)
    return g


async def test_an_interrupt_with_a_key_names_it(spans: InMemorySpanExporter) -> None:
    await go_graph(key="go").compile().run({}, thread="t")
    (run,) = named(spans, "interlock.run")
    (event,) = run.events
    assert dict(event.attributes or {})["interlock.interrupt.key"] == "go"
    assert "interlock.interrupt.tool" not in dict(event.attributes or {})


async def test_a_node_that_raises_fails_its_span_and_the_run(spans: InMemorySpanExporter) -> None:
    g = broken_graph()
    with pytest.raises(NodeError):
        await g.compile().run({}, thread="t")
    (node,) = named(spans, "interlock.node")
    assert node.status.status_code is StatusCode.ERROR
    assert [e.name for e in node.events] == ["exception"]
    (run,) = named(spans, "interlock.run")
    assert run.status.status_code is StatusCode.ERROR
    assert attributes(run)["interlock.status"] == "failed"


async def test_a_subgraphs_nodes_are_spans_inside_its_node(spans: InMemorySpanExporter) -> None:
    class S(TypedDict, total=False):
        n: int

    inner = Graph(S, name="inner")
    inner.add_node("deep", lambda s: {"n": s.get("n", 0) + 1})
    inner.add_edge(START, "deep").add_edge("deep", END)
    outer = Graph(S, name="outer")
    outer.add_node("sub", inner.compile()).add_edge(START, "sub").add_edge("sub", END)
    await outer.compile().run({}, thread="t")
    by_name = {attributes(s)["interlock.node"]: s for s in named(spans, "interlock.node")}
    inner_step = next(
        s for s in named(spans, "interlock.step") if "interlock.address" in attributes(s)
    )
    assert inner_step.parent is not None
    assert inner_step.parent.span_id == by_name["sub"].context.span_id
    assert attributes(by_name["deep"])["interlock.address"] == "subgraph:sub/node:deep"


async def test_resume_and_decide_make_decision_spans(spans: InMemorySpanExporter) -> None:
    app = order_graph().compile()
    asked = await app.run({"n": 1}, thread="t1")
    (first_run,) = named(spans, "interlock.run")
    spans.clear()
    (question,) = asked.interrupts
    await app.decide("t1", {question.id: True}, actor="ana", reason="fine")
    (decision,) = named(spans, "interlock.decision")
    assert attributes(decision) == {
        "interlock.thread": "t1",
        "interlock.interrupt.ids": (question.id,),
        "interlock.interrupt.id": question.id,
        "interlock.decision.final": True,
        "interlock.actor": "ana",
    }
    # No span was current: the decision continues the trace of the run that asked.
    assert [link.context.span_id for link in decision.links] == [first_run.context.span_id]
    assert decision.parent is not None and decision.parent.span_id == first_run.context.span_id
    assert decision.context.trace_id == first_run.context.trace_id
    assert not named(spans, "interlock.run")  # deciding runs nothing

    spans.clear()
    other = await app.run({"n": 2}, thread="t2")
    await app.resume("t2", {other.interrupts[0].id: False}, actor="ben")
    resumed = named(spans, "interlock.run")[-1]
    (decision,) = named(spans, "interlock.decision")
    assert attributes(decision)["interlock.actor"] == "ben"
    assert decision.parent is not None and decision.parent.span_id == resumed.context.span_id


async def test_a_vote_toward_a_quorum_is_not_final(spans: InMemorySpanExporter) -> None:
    app = go_graph(approvals=2).compile()
    (question,) = (await app.run({}, thread="q")).interrupts
    await app.decide("q", {question.id: True}, actor="ana")
    (vote,) = named(spans, "interlock.decision")
    assert attributes(vote)["interlock.decision.final"] is False


async def test_effects_are_spans_with_their_outcome(spans: InMemorySpanExporter) -> None:
    class S(TypedDict, total=False):
        receipt: str
        note: str

    world: list[str] = []
    failing = [True]

    def charge() -> str:
        world.append("charged")
        if failing[0]:
            failing[0] = False
            raise ConnectionError("the bank hung up")
        return "receipt-1"

    def notify(*, effect_key: str) -> str:
        return "sent"

    async def pay(s: S) -> S:
        note = await effect("notify", notify, idempotent=True)
        return {"receipt": await effect("charge", charge), "note": note}

    g = Graph(S)
    g.add_node("pay", pay).add_edge(START, "pay").add_edge("pay", END)
    app = g.compile()
    with pytest.raises(NodeError):
        await app.run({}, thread="e")
    notified, charged = named(spans, "interlock.effect")
    assert attributes(notified)["interlock.effect.outcome"] == "called"
    assert attributes(notified)["interlock.effect.idempotent"] is True
    assert attributes(charged)["interlock.effect.name"] == "charge"
    assert attributes(charged)["interlock.effect.key"].startswith("e/")
    assert attributes(charged)["interlock.effect.outcome"] == "failed"
    assert charged.status.status_code is StatusCode.ERROR
    node = named(spans, "interlock.node")[0]
    assert charged.parent is not None and charged.parent.span_id == node.context.span_id

    # The charge may or may not have happened: a person is asked, never a silent retry.
    spans.clear()
    reconcile = (await app.resume("e")).interrupts[0]
    assert reconcile.kind == "reconcile"
    effects = {attributes(s)["interlock.effect.name"]: s for s in named(spans, "interlock.effect")}
    assert attributes(effects["charge"])["interlock.effect.outcome"] == "reconcile"

    spans.clear()
    done = await app.resume("e", {reconcile.id: "retry"}, actor="ana")
    assert done.values["receipt"] == "receipt-1" and world == ["charged", "charged"]
    effects = {attributes(s)["interlock.effect.name"]: s for s in named(spans, "interlock.effect")}
    assert attributes(effects["charge"])["interlock.effect.outcome"] == "retried"


async def _ask_in_one_process(path: Path) -> tuple[str, str]:
    """Process A: the run stops on a question; its store closes. The question's id and the
    traceparent stored with the thread come back."""
    app = order_graph().compile(store=SqliteStore(path))
    try:
        result = await app.run({"n": 1}, thread="t1")
        state = await app.get_state("t1")
    finally:
        await app.store.close()
    return result.interrupts[0].id, state.metadata["traceparent"]


async def test_a_resume_in_a_new_process_continues_the_trace_of_the_run_that_asked(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    question, stored = await _ask_in_one_process(tmp_path / "t.db")
    (asking,) = named(spans, "interlock.run")
    ctx = asking.context
    # What a W3C propagator would send for that span (its flags say it is sampled).
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(
        carrier, trace.set_span_in_context(NonRecordingSpan(ctx))
    )
    assert stored == carrier["traceparent"]
    assert stored.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    spans.clear()

    # Process B, a day later: a new App over the same file, no span current.
    app = order_graph().compile(store=SqliteStore(tmp_path / "t.db"))
    try:
        result = await app.resume("t1", {question: True}, actor="ana")
    finally:
        await app.store.close()
    assert result.status == "done"
    (resumed,) = named(spans, "interlock.run")
    assert attributes(resumed)["interlock.resumed"] is True
    assert [link.context.span_id for link in resumed.links] == [ctx.span_id]
    assert resumed.context.trace_id == ctx.trace_id
    assert resumed.parent is not None and resumed.parent.span_id == ctx.span_id
    assert resumed.parent.is_remote
    # Every span of the resume is in that one trace.
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {ctx.trace_id}


async def test_a_resume_under_a_current_span_is_its_child_and_linked_to_the_run_that_asked(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    question, _ = await _ask_in_one_process(tmp_path / "t.db")
    (asking,) = named(spans, "interlock.run")
    spans.clear()
    app = order_graph().compile(store=SqliteStore(tmp_path / "t.db"))
    job = _tracing.tracer()
    assert job is not None
    try:
        with job.tracer.start_as_current_span("worker job") as parent:
            await app.resume("t1", {question: True})
    finally:
        await app.store.close()
    (resumed,) = named(spans, "interlock.run")
    assert (
        resumed.parent is not None and resumed.parent.span_id == parent.get_span_context().span_id
    )
    assert resumed.context.trace_id == parent.get_span_context().trace_id != asking.context.trace_id
    assert [link.context.span_id for link in resumed.links] == [asking.context.span_id]


async def test_a_decision_then_a_plain_resume_still_links_to_the_run_that_asked(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    # As the server does it: decide (an HTTP request), then continue the thread elsewhere.
    question, stored = await _ask_in_one_process(tmp_path / "t.db")
    (asking,) = named(spans, "interlock.run")
    app = order_graph().compile(store=SqliteStore(tmp_path / "t.db"))
    try:
        await app.decide("t1", {question: True}, actor="ana")
        assert (await app.get_state("t1")).metadata["traceparent"] == stored
        spans.clear()
        await app.resume("t1")
    finally:
        await app.store.close()
    (resumed,) = named(spans, "interlock.run")
    assert [link.context.span_id for link in resumed.links] == [asking.context.span_id]
    assert resumed.context.trace_id == asking.context.trace_id


@pytest.mark.parametrize(
    "garbage",
    [
        "garbage",
        "00-00000000000000000000000000000000-0000000000000000-01",  # all zeros: invalid
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is forbidden
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "",
        42,
        ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ],
)
async def test_a_malformed_stored_traceparent_is_ignored(
    spans: InMemorySpanExporter, garbage: Any
) -> None:
    app = order_graph().compile()
    # A caller's own traceparent is kept as given, so a damaged one gets stored.
    asked = await app.run({"n": 1}, thread="t", metadata={"traceparent": garbage})
    assert (await app.get_state("t")).metadata["traceparent"] == garbage
    spans.clear()
    result = await app.resume("t", {asked.interrupts[0].id: True})
    assert result.status == "done"
    (resumed,) = named(spans, "interlock.run")
    assert resumed.links == () and resumed.parent is None


async def test_with_tracing_off_nothing_is_recorded_and_runs_work(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tracing, "ENABLED", False)
    app = mail_agent().compile()
    asked = await app.run(MAIL, thread="m")
    await app.decide("m", {asked.interrupts[0].id: True}, actor="ana")
    result = await app.resume("m")
    assert result.status == "done"
    assert spans.get_finished_spans() == ()
    assert "traceparent" not in (await app.get_state("m")).metadata


async def test_without_a_tracer_provider_nothing_is_stored() -> None:
    # No provider of interlock's own, none global: the API's no-op tracer.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert _tracing.tracer() is None
    app = order_graph().compile()
    asked = await app.run({"n": 1}, thread="t")
    await app.resume("t", {asked.interrupts[0].id: True})
    assert "traceparent" not in (await app.get_state("t")).metadata


async def test_a_run_that_is_not_sampled_stores_no_traceparent() -> None:
    with recording(sampler=ALWAYS_OFF) as exporter:
        app = order_graph().compile()
        asked = await app.run({"n": 1}, thread="t")
        await app.resume("t", {asked.interrupts[0].id: True})
        assert exporter.get_finished_spans() == ()
        assert "traceparent" not in (await app.get_state("t")).metadata


@pytest.fixture
def fresh_lookup() -> Iterator[None]:
    """interlock looks for a tracer provider afresh, and forgets what it found afterwards."""
    _tracing.use_tracer_provider(None)
    try:
        yield
    finally:
        _tracing.use_tracer_provider(None)


@pytest.mark.usefixtures("fresh_lookup")
def test_a_global_provider_set_later_is_found_within_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The global provider can be set once per process: stand in for the API's getter.
    now = [1000.0]
    found: list[trace.TracerProvider] = [trace.ProxyTracerProvider()]
    monkeypatch.setattr(_tracing, "_now", lambda: now[0])
    monkeypatch.setattr(_otel, "global_provider", lambda: found[0])
    assert _tracing.tracer() is None
    found[0] = TracerProvider()
    now[0] += _tracing.RECHECK / 2
    assert _tracing.tracer() is None  # not asked again yet: a run pays no lookup
    now[0] += _tracing.RECHECK
    assert _tracing.tracer() is not None
    found[0] = trace.ProxyTracerProvider()
    assert _tracing.tracer() is not None  # a provider, once set, stays


def test_interlock_imports_and_runs_without_opentelemetry(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from typing import TypedDict\n"
        "from interlock import END, START, Graph, approve\n"
        "from interlock.observability import _tracing\n"
        "assert not _tracing.INSTALLED and _tracing.tracer() is None\n"
        "class S(TypedDict, total=False):\n"
        "    ok: bool\n"
        "g = Graph(S)\n"
        "g.add_node('ask', lambda s: {'ok': approve('Go?')})\n"
        "g.add_edge(START, 'ask').add_edge('ask', END)\n"
        "app = g.compile()\n"
        "r = app.run_sync({}, thread='t')\n"
        "r = app.resume_sync('t', {r.interrupts[0].id: True})\n"
        "assert r.values == {'ok': True}, r\n"
        "assert 'traceparent' not in app.get_state_sync('t').metadata\n"
        "print('ok', sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = run_python(code)
    assert out.stdout.strip() == "ok ['opentelemetry']"


def test_the_api_is_imported_only_once_the_application_imported_it() -> None:
    # A program with the API installed that never traces does not load it; once it sets up
    # tracing (in this process: the global provider, which can be set once), runs record.
    code = (
        "import sys\n"
        "from typing import TypedDict\n"
        "from interlock import END, START, Graph\n"
        "from interlock.observability import use_tracer_provider\n"
        "class S(TypedDict, total=False):\n"
        "    n: int\n"
        "g = Graph(S)\n"
        "g.add_node('one', lambda s: {'n': 1}).add_edge(START, 'one').add_edge('one', END)\n"
        "app = g.compile()\n"
        "app.run_sync({}, thread='quiet')\n"
        # Only the namespace package, which finding the API imports: none of its modules.
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.')))\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "use_tracer_provider(None)  # look again now, not within the second\n"
        "app.run_sync({}, thread='traced')\n"
        "print([s.name for s in exporter.get_finished_spans()])\n"
    )
    out = run_python(code)
    assert out.stdout.splitlines() == [
        "[]",
        "['interlock.node', 'interlock.step', 'interlock.run']",
    ]
