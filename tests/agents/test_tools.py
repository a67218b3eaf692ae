"""@tool: schemas from annotations and docstrings, argument checks, the three kinds of tool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import msgspec
import pytest

from interlock import GraphDefinitionError
from interlock.agents import Tool, ToolCall, current_tool_call, tool
from interlock.agents._tools import ArgumentsError, result_text

pytestmark = pytest.mark.anyio

CALL = ToolCall(id="c1", name="t", arguments={})


class Point(msgspec.Struct):
    x: int
    y: int


@tool
def execute(command: str, timeout: float = 10.0, mode: Literal["fast", "safe"] = "safe") -> str:
    """Run a shell command.

    Longer text that is not the summary.

    Args:
        command: The command line,
            which may go on.
        timeout: Seconds before it is stopped.
        mode: How.
    """
    return command


def test_the_schema_comes_from_annotations_and_the_docstring() -> None:
    assert execute.name == "execute"
    assert execute.description == "Run a shell command."
    assert execute.parameters == {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line, which may go on."},
            "timeout": {
                "type": "number",
                "default": 10.0,
                "description": "Seconds before it is stopped.",
            },
            "mode": {"enum": ["fast", "safe"], "default": "safe", "description": "How."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    assert execute.spec.to_openai()["function"]["name"] == "execute"


def test_rest_docstrings_and_nested_types() -> None:
    @tool(name="plot", description="Plot points.")
    def draw(points: list[Point], label: str | None = None) -> int:
        """Ignored summary.

        :param points: Where.
        :param label: A caption.
        """
        return len(points)

    assert draw.name == "plot" and draw.description == "Plot points."
    props = draw.parameters["properties"]
    assert props["points"]["description"] == "Where."
    assert props["points"]["items"] == {"$ref": "#/$defs/Point"}
    assert draw.parameters["$defs"]["Point"]["required"] == ["x", "y"]
    # Checked, then converted to the annotated types.
    kwargs = draw.check({"points": [{"x": 1, "y": 2}]})
    assert kwargs == {"points": [Point(1, 2)], "label": None}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"command": 3}, "arguments.command: 3 is not of type 'string'"),
        ({}, "'command' is a required property"),
        ({"command": "ls", "extra": 1}, "Additional properties"),
        ({"command": "ls", "mode": "slow"}, "'slow' is not one of"),
        ([1], "must be a JSON object"),
    ],
)
def test_arguments_are_checked_before_the_call(arguments: object, message: str) -> None:
    with pytest.raises(ArgumentsError, match=message.replace("(", r"\(").replace("[", r"\[")):
        execute.check(arguments)


def test_checked_arguments_are_converted_with_defaults() -> None:
    assert execute.check({"command": "ls", "timeout": 3}) == {
        "command": "ls",
        "timeout": 3.0,
        "mode": "safe",
    }


async def test_sync_async_and_streaming_tools_run() -> None:
    @tool
    async def slow(n: int) -> dict[str, int]:
        """Async."""
        return {"n": n, "id": len(current_tool_call().id)}

    @tool
    async def talk(words: list[str]) -> AsyncIterator[str]:
        """Streams."""
        for w in words:
            yield w + " "

    assert await execute.run({"command": "ls"}, CALL, None) == "ls"
    assert await slow.run({"n": 2}, CALL, None) == {"n": 2, "id": 2}
    seen: list[str] = []
    assert talk.streaming and not slow.streaming
    assert await talk.run({"words": ["a", "b"]}, CALL, seen.append) == "a b "
    assert seen == ["a ", "b "]


def test_results_become_text_for_the_model() -> None:
    assert result_text("as is") == "as is"
    assert result_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert result_text(Point(1, 2)) == '{"x":1,"y":2}'
    assert result_text(object()).startswith('"<object')  # unknown types: their str, as JSON


def test_current_tool_call_outside_a_tool_says_so() -> None:
    with pytest.raises(GraphDefinitionError, match="inside a tool"):
        current_tool_call()


def test_functions_that_cannot_be_described_are_refused() -> None:
    def star(*args: int) -> None: ...

    def bare(x) -> None:  # type: ignore[no-untyped-def]
        ...

    def positional(x: int, /) -> None: ...

    for fn, message in (
        (star, r"\*args"),
        (bare, "no type annotation"),
        (positional, "positional"),
    ):
        with pytest.raises(GraphDefinitionError, match=message):
            tool(fn)
    with pytest.raises(ValueError, match="not valid"):
        tool(name="has space")(lambda: None)
    with pytest.raises(TypeError):
        tool(3)  # type: ignore[call-overload]


def test_tool_checks_its_own_arguments() -> None:
    schema = {"type": "object", "properties": {}}
    with pytest.raises(ValueError, match="not valid"):
        Tool("", "d", schema, print)
    with pytest.raises(ValueError, match="object"):
        Tool("t", "d", {"type": "string"}, print)
    with pytest.raises(ValueError, match="usable JSON Schema"):
        Tool("t", "d", {"type": "object", "properties": {"a": {"type": "nope"}}}, print)
    with pytest.raises(TypeError, match="callable"):
        Tool("t", "d", schema, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both"):
        Tool("t", "d", schema, print, dangerous=True, idempotent=True)
