"""What the observability tests share: spans kept in memory, and the graphs they watch."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

import interlock
from interlock import END, START, App, Graph, approve, effect
from interlock.agents import (
    ApprovalPolicy,
    ScriptedModel,
    ToolAgent,
    UserMessage,
    call,
    require_approval,
    tool,
)
from interlock.observability import use_tracer_provider


@contextmanager
def recording(sampler: Sampler | None = None) -> Iterator[InMemorySpanExporter]:
    """interlock's spans go to memory (a provider of their own, never the global one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        use_tracer_provider(None)
        provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans called ``name``, in the order they ended."""
    return [s for s in exporter.get_finished_spans() if s.name == name]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


class Order(TypedDict, total=False):
    n: int
    approved: bool
    done: bool


def order_graph() -> Graph[Order]:
    """prepare → review (a person approves) → finish."""

    def prepare(state: Order) -> Order:
        return {"n": state.get("n", 0) + 1}

    def review(state: Order) -> Order:
        return {"approved": approve(f"Ship order {state['n']}?")}

    def finish(state: Order) -> Order:
        return {"done": True}

    g = Graph(Order, name="orders")
    g.add_node("prepare", prepare).add_node("review", review).add_node("finish", finish)
    g.add_edge(START, "prepare").add_edge("prepare", "review")
    g.add_edge("review", "finish").add_edge("finish", END)
    return g


@tool
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: The address.
        body: The text.
    """
    return f"sent to {to}"


def mail_agent() -> ToolAgent:
    """An agent whose every send_email call waits for a person (its interrupts gate a tool)."""

    def script(messages: Any, tools: Any) -> Any:
        if isinstance(messages[-1], UserMessage):
            return call("send_email", {"to": "cfo@example.com", "body": messages[-1].content})
        return f"finished: {messages[-1].content}"

    policy = ApprovalPolicy({"send_email": [require_approval(name="mail")]})
    return ToolAgent("mailer", ScriptedModel(script, name="mailer"), [send_email], policy=policy)


MAIL = {"messages": [{"role": "user", "content": "hi"}]}
"""The mail agent's input: one message, one call of send_email."""


class Broken(TypedDict, total=False):
    x: int


def broken_graph() -> Graph[Broken]:
    """One node, ``broken``, that raises ``ValueError("no stock")``."""

    def broken(s: Broken) -> Broken:
        raise ValueError("no stock")

    g = Graph(Broken)
    g.add_node("broken", broken).add_edge(START, "broken").add_edge("broken", END)
    return g


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this checkout's interlock; it must pass."""
    src = str(Path(interlock.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out


class Receipt(TypedDict, total=False):
    receipt: str


def failing_charge_app() -> App[Receipt]:
    """A dangerous call that fails after it started: resuming asks to reconcile it."""

    def charge() -> str:
        raise ConnectionError("the bank hung up")

    async def pay(s: Receipt) -> Receipt:
        return {"receipt": await effect("charge", charge)}

    g = Graph(Receipt)
    g.add_node("pay", pay).add_edge(START, "pay").add_edge("pay", END)
    return g.compile()
