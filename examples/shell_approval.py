"""An ops agent whose shell commands wait for a person, answered from a fresh Runner.

Run it::

    python examples/shell_approval.py --auto   # answers each approval itself
    python examples/shell_approval.py          # asks you at each approval

It writes ./shell-approval.db (``--db PATH`` to change it). The agent has two tools, under one
policy: ``read_file`` runs at once; every ``execute`` waits for a person (destructive commands
such as ``rm`` or ``sudo`` under a rule of their own); ``rm -rf /`` is refused without asking.
The walkthrough asks the agent four things: run ``echo hello`` (approved: it runs), read a file
(allowed: no question), delete ``/tmp/x`` (rejected with a reason: the agent apologises), and
wipe the disk (denied by the policy).

Every answer is given through a new store connection and a new `Runner`, as another process
would: what the run needs to continue is on disk, not in the objects that started it.

The tool never runs anything dangerous: it really runs only ``echo``, ``ls``, ``pwd`` and
``date`` (without a shell); any other command comes back as "would run: ...".

Offline by default, with a `ScriptedModel` playing the model. With ``INTERLOCK_MODEL`` set to a
model's name, that model drives the same agent, whichever its provider (install its extra:
``pip install 'interlock[anthropic]'`` for Claude)::

    INTERLOCK_MODEL=openai:gpt-4o-mini python examples/shell_approval.py --auto
    INTERLOCK_MODEL=anthropic:claude-sonnet-4-5 python examples/shell_approval.py --auto
    INTERLOCK_MODEL=gemini:gemini-2.5-flash python examples/shell_approval.py --auto
    INTERLOCK_MODEL=langchain:ollama:llama3.1 python examples/shell_approval.py --auto

Each provider's SDK reads its key and endpoint from its own variables (``OPENAI_API_KEY`` and
``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY`` and
``GOOGLE_GEMINI_BASE_URL``). Without ``INTERLOCK_MODEL``, ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` alone still selects an OpenAI-compatible model (``OPENAI_MODEL``, default
``gpt-4o-mini``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import anyio

from interlock import InterlockError, Interrupt, SqliteStore
from interlock.agents import (
    AgentEvent,
    AgentInterrupt,
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    AssistantTurn,
    ChatModel,
    Edit,
    Message,
    Reject,
    Runner,
    ScriptedModel,
    Tool,
    ToolAgent,
    ToolCall,
    ToolDecision,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
    call,
    chat_model_from_env,
    deny,
    matches,
    require_approval,
    tool,
)

REALLY_RUN: Final = frozenset({"echo", "ls", "pwd", "date"})
"""The only programs the tool starts; it reports any other command as "would run"."""

POLICY: Final = ApprovalPolicy(
    {
        "read_file": "allow",
        "execute": [
            deny(
                "Wiping the filesystem is never allowed.",
                when=matches("command", r"\brm\s+-\w+\s+/\*?\s*$|\bmkfs\b"),
                name="catastrophic",
            ),
            require_approval(
                when=matches("command", r"\b(rm|sudo|chmod|chown|dd|kill|mv)\b"),
                name="destructive",
            ),
            require_approval(name="every command"),
        ],
    }
)

SYSTEM: Final = (
    "You are an ops assistant. Run shell commands with execute and read files with read_file. "
    "A person approves each command; when one is rejected, apologise, say why it was not run, "
    "and do not try it again."
)

REJECT_REASON: Final = "The backup of /tmp/x has not finished; keep it."
"""What --auto answers a destructive command with."""


# -- the tools ---------------------------------------------------------------------------------


def make_tools(log: Path | None) -> list[Tool]:
    """The agent's tools; ``execute`` appends each command it runs or simulates to ``log``."""

    def record(line: str) -> None:
        if log is not None:
            with log.open("a", encoding="utf-8") as f:
                f.write(line + "\n")

    @tool
    async def execute(command: str) -> str:
        """Run a shell command and return what it printed.

        Args:
            command: The command line, such as "ls -l".
        """
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return f"cannot parse {command!r}: {exc}"
        if not argv or argv[0] not in REALLY_RUN:
            record(f"simulated: {command}")
            return f"would run: {command} (this example runs only {', '.join(sorted(REALLY_RUN))})"
        record(f"ran: {command}")
        with anyio.fail_after(10):
            done = await anyio.run_process(argv, check=False)  # a list: no shell involved
        out = (done.stdout + done.stderr).decode(errors="replace")
        return out if done.returncode == 0 else f"exit status {done.returncode}\n{out}"

    @tool
    async def read_file(path: str) -> str:
        """Read a text file (its first 2000 characters).

        Args:
            path: The file's path.
        """
        text = await anyio.Path(path).read_text(encoding="utf-8", errors="replace")
        return text[:2000]

    return [execute, read_file]


# -- the model ---------------------------------------------------------------------------------


def scripted_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    """What the offline model says: a request becomes a tool call, a result becomes an answer."""
    last = messages[-1]
    if isinstance(last, UserMessage):
        request = last.content.strip()
        if request.startswith("run "):
            return call("execute", {"command": request.removeprefix("run ")})
        if request.startswith("read "):
            return call("read_file", {"path": request.removeprefix("read ")})
        return "I can run a command ('run ls -l') or read a file ('read notes.txt')."
    if not isinstance(last, ToolMessage):
        return "How can I help?"
    asked = next(m for m in reversed(messages) if isinstance(m, AssistantMessage))
    arguments = asked.tool_calls[0].arguments
    what = arguments.get("command") or arguments.get("path")
    if last.status == "ok":
        said = "says" if last.name == "read_file" else "printed"
        return f"Done. `{what}` {said}:\n{last.content.rstrip()}"
    if last.status == "rejected":
        return f"Sorry, I did not run `{what}`: {last.content.rstrip('.')}. I won't try it again."
    if last.status == "denied":
        return f"I can't run `{what}`: {last.content}"
    return f"That failed: {last.content}"


def openai_model() -> str | None:
    """The OpenAI-compatible model ``OPENAI_*`` asks for, if they name an endpoint or a key."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return f"openai:{os.environ.get('OPENAI_MODEL', 'gpt-4o-mini')}"
    return None


def ops_model() -> ChatModel:
    """A real model when the environment names one, else the scripted one."""
    fallback = openai_model()
    if os.environ.get("INTERLOCK_MODEL", "").strip() or fallback is not None:
        # INTERLOCK_MODEL, else the OPENAI_* model; the provider's package is imported only now.
        return chat_model_from_env(fallback)
    return ScriptedModel(scripted_reply, name="ops")


@asynccontextmanager
async def open_runner(db: Path, log: Path | None) -> AsyncIterator[Runner]:
    """A new connection to the store and a new agent on it (what a new process would build)."""
    model = ops_model()
    agent = ToolAgent("ops", model, make_tools(log), policy=POLICY, system=SYSTEM)
    try:
        async with SqliteStore(db) as store:
            yield Runner(agent, store)
    finally:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await aclose()


# -- the walkthrough ---------------------------------------------------------------------------


def show(event: AgentEvent) -> None:
    """Print one event of the run, readably."""
    if isinstance(event, AssistantTurn):
        for c in event.message.tool_calls:
            shown = ", ".join(f"{k}={v!r}" for k, v in c.arguments.items())
            print(f"  {event.agent} calls {c.name}({shown})")
        if event.message.content:
            print(indent(f"{event.agent}: {event.message.content}"))
    elif isinstance(event, ToolResult):
        print(indent(f"{event.tool} -> {event.status}: {event.content.rstrip()}"))
    elif isinstance(event, AgentInterrupt):
        i = event.interrupt
        print(f"  ? {i.info['question']} (rule: {i.info['rule']})")
        print(f"    interrupt {i.id} at {i.address}")


def indent(text: str) -> str:
    return "\n".join(
        f"  {line}" if n == 0 else f"      {line}" for n, line in enumerate(text.splitlines())
    )


async def say(db: Path, log: Path | None, session: str, text: str) -> list[Interrupt]:
    """Send the user's message; return the questions the run stopped on."""
    async with open_runner(db, log) as runner, runner.run(text, session=session) as events:
        async for event in events:
            show(event)
    assert events.finished is not None
    return events.finished.result.interrupts


async def answer(
    db: Path, log: Path | None, session: str, decisions: dict[str, ToolDecision]
) -> list[Interrupt]:
    """Answer from a fresh Runner; return the questions the run stopped on next."""
    async with open_runner(db, log) as runner:
        print(f"  (answering through a new Runner on {db})")
        async with runner.resume(session, decisions, actor="operator") as events:
            async for event in events:
                show(event)
    assert events.finished is not None
    return events.finished.result.interrupts


def decide_auto(interrupt: Interrupt) -> ToolDecision:
    """--auto: approve ordinary commands, reject destructive ones with a reason."""
    if interrupt.info["rule"] == "destructive":
        print(f"  [auto] reject: {REJECT_REASON}")
        return Reject(message=REJECT_REASON)
    print("  [auto] approve")
    return Approve()


def decide_by_asking(interrupt: Interrupt) -> ToolDecision:
    """Ask at the terminal (no event loop runs meanwhile, so Ctrl-C simply stops)."""
    command = interrupt.info["arguments"].get("command", "")
    while True:
        choice = input(f"  run `{command}`? [y]es / [n]o / [e]dit: ").strip().lower()
        if choice in ("y", "yes"):
            return Approve()
        if choice in ("n", "no"):
            return Reject(message=input("  why not? ").strip() or "The operator said no.")
        if choice in ("e", "edit"):
            return Edit(arguments={"command": input("  command to run instead: ").strip()})


WALKTHROUGH: Final = ("run echo hello", "read {notes}", "run rm -rf /tmp/x", "run rm -rf /")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=Path("shell-approval.db"))
    parser.add_argument("--auto", action="store_true", help="answer the approvals without asking")
    parser.add_argument("--log", type=Path, help="append each command the tool runs to this file")
    args = parser.parse_args(argv)
    decide = decide_auto if args.auto else decide_by_asking
    notes = args.db.resolve().parent / "notes.txt"
    notes.write_text("Old build output lives in /tmp/x; delete it once the backup is done.\n")
    session = f"ops-{secrets.token_hex(3)}"
    named = os.environ.get("INTERLOCK_MODEL", "").strip() or openai_model()
    print(f"session {session} in {args.db}; model: {named or 'offline'}")
    try:
        for request in WALKTHROUGH:
            text = request.format(notes=notes)
            print(f"\nuser: {text}")
            pending = anyio.run(say, args.db, args.log, session, text)
            while pending:
                decisions = {i.id: decide(i) for i in pending}
                pending = anyio.run(answer, args.db, args.log, session, decisions)
    except (InterlockError, ImportError) as exc:  # ImportError: the model's extra is missing
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, EOFError) as stop:
        print(f"\nstopped; session {session} keeps its state in {args.db}", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
