"""Chat messages: the OpenAI shape both ways, conversation edits, chunks, and checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock import SqliteStore
from interlock.agents import (
    AssistantMessage,
    RemoveMessage,
    ReplaceMessage,
    ScriptedModel,
    SystemMessage,
    ToolAgent,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    conversation,
    from_openai,
    to_messages,
    to_openai,
)
from interlock.agents._agent import AGENT_TYPES
from interlock.agents._messages import message_from_chunks
from interlock.graph._chunks import MessageChunk, ToolCallChunk
from interlock.serde import Codec

pytestmark = pytest.mark.anyio

MESSAGES = [
    SystemMessage(content="be brief"),
    UserMessage(content="hi", name="ann"),
    AssistantMessage(
        content=None,
        tool_calls=(ToolCall(id="c1", name="add", arguments={"a": 1, "b": [2, 3]}),),
    ),
    ToolMessage(content="6", tool_call_id="c1"),
    AssistantMessage(content="six"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_survives_the_openai_shape(message: object) -> None:
    wire = to_openai(message)  # type: ignore[arg-type]
    assert wire["role"] in ("system", "user", "assistant", "tool")
    assert from_openai(wire) == message


def test_tool_call_arguments_go_out_as_a_json_string() -> None:
    wire = to_openai(MESSAGES[2])
    (call,) = wire["tool_calls"]
    assert call == {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a":1,"b":[2,3]}'},
    }


def test_arguments_that_are_no_json_object_are_kept_raw() -> None:
    wire = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1, 2"}}],
    }
    (call,) = from_openai(wire).tool_calls  # type: ignore[union-attr]
    assert call.arguments == {} and call.raw_arguments == "[1, 2"
    # Sent back as the model wrote it, not as "{}".
    assert to_openai(from_openai(wire))["tool_calls"][0]["function"]["arguments"] == "[1, 2"


def test_to_messages_reads_strings_dicts_messages_and_lists() -> None:
    assert to_messages("hello") == [UserMessage(content="hello")]
    assert to_messages({"role": "system", "content": "x"}) == [SystemMessage(content="x")]
    mixed = to_messages(["a", {"role": "user", "content": "b"}, UserMessage(content="c")])
    assert [m.content for m in mixed] == ["a", "b", "c"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ("", ValueError),
        (None, TypeError),
        (3, TypeError),
        ([1], TypeError),
        ({"role": "wizard", "content": "x"}, ValueError),
        ({"role": "user"}, ValueError),
        ({"role": "tool", "content": "x"}, ValueError),
        ({"role": "user", "content": 5}, ValueError),
    ],
)
def test_to_messages_refuses_what_is_no_message(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        to_messages(bad)  # type: ignore[arg-type]


def test_conversation_folds_replacements_and_removals() -> None:
    items = [
        UserMessage(content="first", id="u1"),
        AssistantMessage(content="reply", id="a1"),
        ReplaceMessage(id="u1", message=UserMessage(content="edited")),
        RemoveMessage(id="a1"),
        RemoveMessage(id="nobody"),  # names no message: ignored
        UserMessage(content="second", id="u2"),
    ]
    shown = conversation(items)
    assert [m.content for m in shown] == ["edited", "second"]  # type: ignore[union-attr]
    assert shown[0].id == "u1"  # a replacement keeps the id it replaces


def test_chunks_join_into_one_message_with_split_tool_calls() -> None:
    chunks = [
        MessageChunk(role="assistant", content="Let me "),
        MessageChunk(content="check."),
        MessageChunk(tool_calls=(ToolCallChunk(index=0, id="c1", name="add", arguments='{"a"'),)),
        MessageChunk(tool_calls=(ToolCallChunk(index=1, id="c2", name="echo", arguments="{"),)),
        MessageChunk(tool_calls=(ToolCallChunk(index=0, arguments=": 1}"),)),
        MessageChunk(tool_calls=(ToolCallChunk(index=1, arguments='"t": "x"}'),)),
    ]
    message = message_from_chunks(chunks)
    assert message.content == "Let me check."
    assert message.tool_calls == (
        ToolCall(id="c1", name="add", arguments={"a": 1}),
        ToolCall(id="c2", name="echo", arguments={"t": "x"}),
    )


def test_usage_reported_in_pieces_adds_up_and_survives_a_checkpoint() -> None:
    # A provider may report the request's tokens first and the reply's at the end.
    chunks = [
        MessageChunk(role="assistant", content="Hi", usage=Usage(input_tokens=12, cached_tokens=4)),
        MessageChunk(content="!", finish_reason="stop", usage=Usage(output_tokens=3)),
    ]
    message = message_from_chunks(chunks)
    assert message.usage == Usage(input_tokens=12, output_tokens=3, cached_tokens=4)
    assert message_from_chunks([MessageChunk(content="x")]).usage is None
    codec = Codec(types=AGENT_TYPES)
    assert codec.decode(codec.encode(message)) == message
    assert "usage" not in to_openai(message)  # not sent back to the model


async def test_a_conversation_checkpoints_as_deltas(tmp_path: Path) -> None:
    # Each turn's checkpoint holds the messages added since the last one, not the history.
    store = SqliteStore(tmp_path / "a.db")
    app = ToolAgent("chat", ScriptedModel(lambda messages, tools: "ok")).compile(store=store)
    # Past the size under which every checkpoint is a snapshot (one read to load).
    first = "the-very-first-message-" + "x" * 4000
    await app.run({"messages": [UserMessage(content=first)]}, thread="t")
    for n in range(5):
        await app.run({"messages": [UserMessage(content=f"turn {n}")]}, thread="t")
    history = await store.list_checkpoints("t", limit=3)
    assert len(history) == 3
    for record in history:
        assert first.encode() not in record.body
    state = await app.get_state("t")
    assert conversation(state.values["messages"])[0].content == first  # type: ignore[union-attr]
    await store.close()


# -- stored form -----------------------------------------------------------------------------

_WRITTEN_BEFORE = Path(__file__).parent / "data" / "messages-v1.ilk"
"""Every kind of message, encoded before messages were stored by position under short names
(each with its long name and its fields' names)."""

_THOSE_MESSAGES = [
    SystemMessage(content="Be brief."),
    SystemMessage(content="Named.", id="s1"),
    UserMessage(content="What is in build/?"),
    UserMessage(content="Me too.", name="bob", id="u2"),
    AssistantMessage(
        tool_calls=(
            ToolCall(id="call_1", name="lookup", arguments={"query": "build", "turn": 1}),
            ToolCall(id="call_2", name="broken", raw_arguments="{nope"),
        ),
        name="assistant",
        id="a1",
    ),
    ToolMessage(content="a.o b.o", tool_call_id="call_1", name="lookup", id="t1"),
    ToolMessage(
        content="Error: bad", tool_call_id="call_2", name="broken", status="error", id="t2"
    ),
    AssistantMessage(
        content="Two object files.",
        name="assistant",
        id="a2",
        finish_reason="stop",
        usage=Usage(input_tokens=12, output_tokens=5, cached_tokens=2),
    ),
    AssistantMessage(content="Cut", finish_reason="length"),
]


def test_messages_stored_before_the_positional_form_read_back_the_same() -> None:
    codec = Codec(types=AGENT_TYPES)
    assert codec.decode(_WRITTEN_BEFORE.read_bytes()) == {"messages": _THOSE_MESSAGES}


def test_messages_round_trip_and_store_smaller_than_before() -> None:
    codec = Codec(types=AGENT_TYPES)
    value = {"messages": _THOSE_MESSAGES}
    data = codec.encode(value)
    assert codec.decode(data) == value
    # No message's field names nor long type names are written any more.
    assert b"tool_call_id" not in data and b"interlock.UserMessage" not in data
    assert len(data) < 0.6 * len(_WRITTEN_BEFORE.read_bytes())
