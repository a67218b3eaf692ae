"""Usage and budgets over HTTP: a thread's view says what its model calls used and cost, and
an agent's budget question is decided like any approval, with new limits as an edit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _serving import auth, budget_agent, serving
from _web_page import Api

from interlock.server import create_app

TURN_COST = (14_000 * 2.5 + 1_000 * 1.25 + 5_000 * 10.0) / 1e6


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    factory = lambda: create_app({"adder": budget_agent(tmp_path / "b.db")}, auth=auth())  # noqa: E731
    with serving(factory) as served:
        yield Api(served.url)


def start(api: Api, thread: str) -> dict[str, object]:
    body = {"input": {"messages": ["add"]}, "app": "adder", "wait": True}
    status, started = api.call("POST", f"/v1/threads/{thread}/runs", "ana", body)
    assert status == 200, started
    view: dict[str, object] = started["thread_view"]
    return view


def test_a_thread_view_says_what_its_model_calls_used(api: Api) -> None:
    view = start(api, "b-1")
    usage = view["usage"]
    assert isinstance(usage, dict)
    assert usage["run"] == usage["thread"]
    assert usage["thread"]["input_tokens"] == 30_000
    assert usage["thread"]["output_tokens"] == 10_000
    assert usage["thread"]["cached_tokens"] == 2_000
    assert usage["thread"]["calls"] == 2
    assert usage["thread"]["cost"] == pytest.approx(2 * TURN_COST)
    assert set(usage["models"]) == {"gpt-4o"}
    assert api.get("/v1/threads/b-1")["usage"] == usage  # the same on a plain read


def test_a_budget_question_is_in_the_inbox_and_an_edit_sets_the_new_limit(api: Api) -> None:
    start(api, "b-2")
    (question,) = api.pending("b-2")
    assert question["tool"] == "budget"
    assert question["info"]["question"] == (
        f"This run has used 40,000 tokens (${2 * TURN_COST:.2f}) of 40,000 tokens; "
        "continue with another 20,000 tokens?"
    )
    # A limit that is not a positive integer is refused before anything is recorded.
    body = {"answer": {"action": "edit", "arguments": {"tokens": -5}}, "wait": True}
    key = {"Idempotency-Key": "ben-negative"}
    status, refused = api.call(
        "POST", f"/v1/interrupts/{question['id']}/decision", "ben", body, key
    )
    assert status == 422, refused
    assert api.pending("b-2")

    view = api.decide(question, {"action": "edit", "arguments": {"tokens": 100_000}})
    assert view["status"] == "done"
    assert view["messages"][-1]["content"] == "added 3 times"
    assert view["usage"]["run"]["calls"] == 4


def test_a_viewer_reads_the_usage_but_cannot_raise_the_budget(api: Api) -> None:
    start(api, "b-3")
    assert api.get("/v1/threads/b-3", "vic")["usage"]["thread"]["calls"] == 2
    (question,) = api.pending("b-3")
    body = {"answer": {"action": "approve"}, "payload_hash": question["payload_hash"]}
    key = {"Idempotency-Key": "vic-approve"}
    status, refused = api.call(
        "POST", f"/v1/interrupts/{question['id']}/decision", "vic", body, key
    )
    assert status == 403, refused
    assert api.pending("b-3")


def test_an_identity_with_a_tool_scope_reads_no_usage_on_any_path(api: Api) -> None:
    start(api, "b-4")
    # The sums count the work of every tool, those outside the scope too: the thread's view
    # and its history leave them out, and the budget question (tool "budget") is not shown.
    view = api.get("/v1/threads/b-4", "clerk")
    assert view["usage"] is None and view["interrupts"] == []
    history = api.get("/v1/threads/b-4/history", "clerk")["items"]
    assert history and all("usage" not in item["metadata"] for item in history)
    assert api.get("/v1/interrupts?thread=b-4", "clerk")["items"] == []
    # Who sees every tool reads them on both paths.
    assert api.get("/v1/threads/b-4", "vic")["usage"]["thread"]["calls"] == 2
    full = api.get("/v1/threads/b-4/history", "vic")["items"]
    assert full[0]["metadata"]["usage"]["thread"]["calls"] == 2


def test_a_checkpoint_holding_only_a_running_time_shows_no_usage() -> None:
    from interlock.server._api import usage_view

    # In the middle of a run, a checkpoint whose totals did not change holds only the seconds.
    assert usage_view({"usage": 1.25}) is None
    assert usage_view({}) is None
    whole = usage_view({"usage": {"thread": {"calls": 2}, "run": {"calls": 1}, "run_seconds": 2}})
    assert whole is not None and whole.thread.calls == 2 and whole.run_seconds == 2.0
