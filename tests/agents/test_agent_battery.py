"""The agents API called with arbitrary arguments: typed errors only, and nothing is broken after.

Each example builds an agent on a real SQLite file with one session waiting on an approval,
then makes calls whose arguments are drawn from odd values (None, bools, huge ints, NaN, bytes,
containers, empty, huge or lone-surrogate strings, unserialisable objects), with the real
session and interrupt ids mixed in. Every call must return, or raise an `InterlockError`, or a
plain `TypeError`/`ValueError`. Then the waiting approval must still be answerable, the tool
must run exactly once, and the audit chain must verify.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import pytest
from _agents import SHELL_POLICY, Shell, replies_to_tool_results
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock import InterlockError, SqliteStore, verify_audit
from interlock.agents import (
    ApprovalPolicy,
    Approve,
    Runner,
    ScriptedModel,
    ToolAgent,
    call,
    from_openai,
    to_messages,
    tool,
)

surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
text = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", " ", "x" * 600, "y" * 70_000, "a\x00b", "ops", "execute", "*"]),
    st.tuples(st.text(max_size=3), surrogates).map("".join),
)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**70, 10**400]),
    st.floats(),
    st.binary(max_size=4),
    text,
)
junk = st.one_of(
    scalar,
    st.lists(scalar, max_size=3),
    st.dictionaries(st.text(max_size=4) | st.integers(0, 3), scalar, max_size=3),
    st.builds(object),
    st.sampled_from(
        [
            {"role": "user", "content": "hi"},
            {"action": "edit", "arguments": {"command": 3}},
            {"action": "edit", "arguments": {"command": "rm -rf /"}},
            {"action": "respond"},
            {"action": "approve", "extra": 1},
            [{"role": "tool", "content": "x"}],
        ]
    ),
)
SESSION, IID = object(), object()  # stand for the real session and interrupt ids

CALLS = st.sampled_from(
    ["agent", "tool", "policy", "to_messages", "from_openai", "model", "run", "resume", "decide"]
)


def pick(value: Any, session: str, iid: str) -> Any:
    return session if value is SESSION else iid if value is IID else value


async def attempt(name: str, args: list[Any], runner: Runner, session: str, iid: str) -> None:
    a = [pick(x, session, iid) for x in args]
    if name == "agent":
        ToolAgent(a[0], ScriptedModel(["x"]), a[1], policy=a[2], max_turns=a[3], system=a[4])
    elif name == "tool":
        tool(name=a[0])(lambda: None)
    elif name == "policy":
        ApprovalPolicy(a[0], default=a[1]).verdict("execute", {"command": a[2]})
    elif name == "to_messages":
        to_messages(a[0])
    elif name == "from_openai":
        from_openai(a[0])
    elif name == "model":
        await ScriptedModel(a[0], name=a[1], chunk_size=a[2]).generate([], [])
    elif name == "run":
        await runner.invoke(a[0], session=a[1])
    elif name == "resume":
        await runner.decide(a[0], {a[1]: a[2]})
    else:
        await runner.decide(session, {iid: a[0]}, edits=a[1])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    calls=st.lists(
        st.tuples(
            CALLS,
            st.lists(st.one_of(junk, st.sampled_from([SESSION, IID])), min_size=5, max_size=5),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_odd_arguments_get_typed_errors_and_break_nothing(
    tmp_path: Path, calls: list[tuple[str, list[Any]]]
) -> None:
    async def main() -> None:
        path = tmp_path / f"b{id(calls)}.db"
        store = SqliteStore(path)
        shell = Shell()
        model = ScriptedModel(
            replies_to_tool_results(call("execute", {"command": "rm -rf /tmp/x"}))
        )
        runner = Runner(ToolAgent("ops", model, shell.tools, policy=SHELL_POLICY), store)
        session = "s"
        waiting = await runner.invoke("clean up", session=session)
        (question,) = waiting.result.interrupts
        iid = question.id
        for name, args in calls:
            with contextlib.suppress(InterlockError, TypeError, ValueError):
                await attempt(name, args, runner, session, iid)
        state = await runner.app.get_state(session)
        if question.id in {i.id for i in await runner.app.inbox(thread=session)}:
            assert shell.entered == {}
            done = await runner.decide(session, {iid: Approve()})
            assert done.result.status == "done"
        assert shell.entered["execute"] <= 1  # at most once, whatever was thrown at it
        assert state.checkpoint_id is not None
        report = await verify_audit(store)
        assert report.ok, report
        await store.close()
        path.unlink(missing_ok=True)

    anyio.run(main)


@pytest.mark.parametrize("answer", [Approve(), True, {"action": "approve"}])
def test_the_battery_drives_a_real_approval(tmp_path: Path, answer: Any) -> None:
    async def main() -> None:
        async with SqliteStore(tmp_path / "a.db") as store:
            shell = Shell()
            model = ScriptedModel(replies_to_tool_results(call("execute", {"command": "rm x"})))
            runner = Runner(ToolAgent("ops", model, shell.tools, policy=SHELL_POLICY), store)
            waiting = await runner.invoke("go", session="s")
            await runner.decide("s", {waiting.result.interrupts[0].id: answer})
            assert shell.commands == ["rm x"]

    anyio.run(main)
