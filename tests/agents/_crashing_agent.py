"""An agent whose approved tool call is cut short by the death of its process.

``python _crashing_agent.py DB LEDGER`` starts thread ``s`` on the SQLite file DB, prints the
gated call's approval question (its ``info``, as JSON, on one line), approves it, and the
tool writes its line to LEDGER and ends the process at once (``os._exit(9)``): the outside
system acted, and the call's outcome was never recorded. The test builds the same agent with
`build` in its own process to see what a person is asked next.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

from interlock import SqliteStore
from interlock.agents import (
    Agent,
    ApprovalPolicy,
    Approve,
    ScriptedModel,
    ToolAgent,
    ToolMessage,
    call,
    sequential,
    tool,
)

ARGUMENTS = {"path": "/srv/report.txt", "text": "quarterly numbers"}


def build(ledger: str, *, crash: bool) -> Agent:
    """The agent: ``writer`` (a gated `write_file`) inside a sequential ``office``."""

    @tool
    def write_file(path: str, text: str) -> str:
        """Write text to a file."""
        with open(ledger, "a") as f:
            f.write(f"{path}: {text}\n")
        if crash:
            os._exit(9)  # the process dies in the middle of the call
        return f"wrote {len(text)} characters"

    def script(messages: list[object], tools: object) -> object:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"done: {last.content}"
        return call("write_file", ARGUMENTS)

    writer = ToolAgent(
        "writer",
        ScriptedModel(script, name="writer"),
        [write_file],
        policy=ApprovalPolicy({"write_file": "require_approval"}),
    )
    return sequential([writer], name="office")


async def main(path: str, ledger: str) -> None:
    async with SqliteStore(path) as store:
        app = build(ledger, crash=True).compile(store=store)
        first = await app.run({"messages": ["file the report"]}, thread="s")
        (question,) = first.interrupts
        print(json.dumps(question.info), flush=True)
        await app.resume("s", {question.id: Approve()})
    raise AssertionError("the tool call should have ended the process")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
