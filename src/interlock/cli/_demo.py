"""``interlock demo``: an agent's shell command that really stops for a person, and resumes.

An ops agent is asked to ``run echo hello``. Its policy makes every ``execute`` call wait for
approval, so the run stops, and the question is committed to an SQLite file before anyone is
asked. Approved, the command runs (the tool really runs only ``echo``, ``ls``, ``pwd`` and
``date``, without a shell; anything else it only reports); rejected, the agent is told why and
apologises. The model is a scripted one: the demo never leaves the machine.

The command works in three phases, each a short event loop of its own: start the session (or
find the pending one), ask the person, then commit the answer and finish through a new store
connection and a new agent, as another process would. The question is asked with no event loop
running, so Ctrl-C there is a plain `KeyboardInterrupt` that commits nothing: inside a loop,
asyncio would turn the first Ctrl-C into a cancellation of whatever runs next, the very commit
the person meant to stop.

The agent is built here rather than shared with ``examples/shell_approval.py``: the package
cannot import the examples, and the example is meant to be read (and copied) on its own.
"""

from __future__ import annotations

import secrets
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from .._errors import InterlockError
from ..agents import (
    AgentEvent,
    AgentFinished,
    ApprovalPolicy,
    Approve,
    AssistantMessage,
    AssistantTurn,
    Message,
    Reject,
    Runner,
    ScriptedModel,
    ToolAgent,
    ToolCall,
    ToolDecision,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
    call,
    deny,
    matches,
    require_approval,
    tool,
)
from ..runtime import Interrupt
from ..stores import SqliteStore

__all__ = ["DEMO_REQUEST", "DEMO_TOOL", "build_demo_agent", "demo"]

DEMO_REQUEST: Final = "run echo hello"
"""What the user asks the agent."""
DEMO_TOOL: Final = "execute"
"""The gated tool."""
REALLY_RUN: Final = frozenset({"echo", "ls", "pwd", "date"})
"""The only programs the tool starts; any other command is reported as "would run"."""
INTERRUPTED: Final = 130
"""Exit status after Ctrl-C, as shells report a process ended by SIGINT."""
Choice = Literal["approve", "reject"]
OPTIONS: Final[tuple[Choice, ...]] = ("approve", "reject")
_WORDS: Final[dict[str, Choice]] = {
    "approve": "approve",
    "y": "approve",
    "yes": "approve",
    "reject": "reject",
    "n": "reject",
    "no": "reject",
}
"""What the prompt takes (in any case) for each decision."""


def _answer(text: str) -> Choice:
    """A person's answer at the prompt: approve or reject, y or n (yes, no), in any case."""
    choice = _WORDS.get(text.strip().lower())
    if choice is None:
        raise click.BadParameter(f"{text!r} is not an answer: type approve or reject (or y, n)")
    return choice


POLICY: Final = ApprovalPolicy(
    {
        DEMO_TOOL: [
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
        ]
    }
)


@tool(name=DEMO_TOOL)
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
        return f"would run: {command} (the demo runs only {', '.join(sorted(REALLY_RUN))})"
    with anyio.fail_after(10):
        done = await anyio.run_process(argv, check=False)  # a list: no shell involved
    out = (done.stdout + done.stderr).decode(errors="replace")
    return out if done.returncode == 0 else f"exit status {done.returncode}\n{out}"


def scripted_reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ToolCall:
    """The demo's model: "run X" becomes a call of execute; its result becomes the answer."""
    last = messages[-1]
    if isinstance(last, UserMessage):
        if last.content.startswith("run "):
            return call(DEMO_TOOL, {"command": last.content.removeprefix("run ")})
        return "Ask me to run a command: 'run ls'."
    if not isinstance(last, ToolMessage):
        return "How can I help?"
    asked = next(m for m in reversed(messages) if isinstance(m, AssistantMessage))
    command = asked.tool_calls[0].arguments.get("command") if asked.tool_calls else None
    if last.status == "ok":
        return f"Done. `{command}` printed: {last.content.strip()}"
    if last.status == "rejected":
        return f"Sorry, I did not run `{command}`: {last.content.rstrip('.')}. I won't retry it."
    if last.status == "denied":
        return f"I can't run `{command}`: {last.content}"
    return f"`{command}` failed: {last.content}"


def build_demo_agent() -> ToolAgent:
    """The demo's agent: ``ops``, with the gated ``execute`` tool and a scripted model."""
    return ToolAgent("ops", ScriptedModel(scripted_reply, name="ops"), [execute], policy=POLICY)


@click.command()
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("interlock-demo.db"),
    show_default=True,
    help="SQLite file that holds the sessions.",
)
@click.option("--no-wait", is_flag=True, help="Stop at the approval and leave it pending.")
@click.option(
    "--resume", "resume_", is_flag=True, help="Finish a pending approval from an earlier run."
)
@click.option(
    "--decide",
    type=click.Choice(OPTIONS),
    help="Answer without asking (for scripts); not with --no-wait.",
)
def demo(db_path: Path, no_wait: bool, resume_: bool, decide: Choice | None) -> None:
    """Run an agent whose shell command stops for a person's approval.

    The agent is asked to `run echo hello`; its policy makes the command wait for approval,
    and the question is committed to the SQLite file before you are asked. With --no-wait the
    question stays pending, and `interlock demo --resume` (in a new process, or on another day)
    finishes it. Ctrl-C at the question decides nothing: it stays pending for --resume. The
    model is scripted: nothing leaves the machine.
    """
    # Options that would be ignored are refused: a script that passes them means something.
    if no_wait and decide is not None:
        raise click.UsageError(
            "--decide answers the approval and --no-wait leaves it pending: pass one of them."
        )
    demo_run = _Demo(
        out=Console(highlight=False, soft_wrap=True),
        err=Console(stderr=True, highlight=False, soft_wrap=True),
        db_path=db_path,
    )
    sys.exit(demo_run.main(no_wait=no_wait, resume_=resume_, decide=decide))


@dataclass(frozen=True, kw_only=True)
class _Demo:
    """One invocation of the command: where it writes and where it reads."""

    out: Console
    """Progress and the question."""
    err: Console
    """What went wrong."""
    db_path: Path
    """The SQLite file, as given."""

    @property
    def resume_command(self) -> str:
        # The absolute path, so that the command works from any folder.
        return f"interlock demo --resume --db {shlex.quote(str(self.db_path.resolve()))}"

    def main(self, *, no_wait: bool, resume_: bool, decide: Choice | None) -> int:
        where = self.db_path.resolve()
        if resume_ and not self.db_path.exists():
            # SQLite would create an empty file here and report nothing pending in it.
            self.err.print(
                f"[red]error:[/red] no demo database at {escape(str(where))}, so nothing to "
                "resume. Run --resume in the folder where `interlock demo --no-wait` ran, or "
                "pass --db PATH."
            )
            return 1
        try:
            if resume_:
                pending = anyio.run(self._find)
                if pending is None:
                    self.out.print(
                        f"Nothing is pending in {escape(str(where))}. Start one with: "
                        "interlock demo --no-wait"
                    )
                    return 1
            else:
                pending = anyio.run(self._start)
        except InterlockError as exc:
            self.err.print(f"[red]error:[/red] {escape(str(exc))}")
            return 1
        except KeyboardInterrupt:
            self.err.print(f"\nInterrupted. What was committed stays in {escape(str(where))}.")
            return INTERRUPTED
        _show_request(self.out, pending)
        if no_wait:
            self.out.print(
                "The run is stopped and its state is on disk. Finish it later with:\n"
                f"  {escape(self.resume_command)}"
            )
            return 0
        reason: str | None = None
        if decide is None:
            try:
                # No default: a bare Enter must not run a command, so it asks again.
                decide = click.prompt(
                    "Your decision (approve, reject; or y, n)", value_proc=_answer
                )
                if decide == "reject":
                    reason = click.prompt(
                        "Why? (the agent is told; Enter for no reason)",
                        default="",
                        show_default=False,
                    ).strip()
            except click.Abort as stop:
                # click turns Ctrl-C and end of input into Abort; the cause tells them apart.
                by_signal = isinstance(stop.__context__, KeyboardInterrupt)
                self.err.print(
                    f"\n{'Interrupted' if by_signal else 'No answer'}: nothing was decided. "
                    f"Session {pending.thread} is still waiting for approval; finish it with:\n"
                    f"  {escape(self.resume_command)}"
                )
                return INTERRUPTED if by_signal else 1
        answer: ToolDecision = Approve() if decide == "approve" else _reject(reason)
        try:
            done = anyio.run(self._finish, pending, answer, reason)
        except InterlockError as exc:
            self.err.print(f"[red]error:[/red] {escape(str(exc))}")
            return 1
        except KeyboardInterrupt:
            self.err.print(
                "\nInterrupted while recording the decision. See whether it is still "
                f"pending with:\n  {escape(self.resume_command)}"
            )
            return INTERRUPTED
        _show_outcome(self.out, done)
        return 0

    def _show(self, event: AgentEvent) -> None:
        if isinstance(event, AssistantTurn):
            for c in event.message.tool_calls:
                command = escape(str(c.arguments.get("command", c.arguments)))
                self.out.print(f"  [cyan]{event.agent}[/cyan] wants to run: [bold]{command}[/bold]")
            if event.message.content:
                self.out.print(f"  [cyan]{event.agent}:[/cyan] {escape(event.message.content)}")
        elif isinstance(event, ToolResult):
            mark = "[green]✓[/green]" if event.status == "ok" else "[yellow]✗[/yellow]"
            self.out.print(f"  {mark} {event.tool} {event.status}: {escape(event.content.strip())}")

    async def _run(self, runner: Runner, session: str) -> AgentFinished:
        async with runner.run(DEMO_REQUEST, session=session) as events:
            async for event in events:
                self._show(event)
        assert events.finished is not None
        return events.finished

    async def _start(self) -> Interrupt:
        session = f"shell-{secrets.randbelow(90000) + 10000}"
        self.out.print(f"Starting session [bold]{session}[/bold] in {escape(str(self.db_path))}")
        self.out.print(f"  [magenta]user:[/magenta] {DEMO_REQUEST}")
        async with SqliteStore(self.db_path) as store:
            finished = await self._run(Runner(build_demo_agent(), store), session)
        (pending,) = finished.result.interrupts
        return pending

    async def _find(self) -> Interrupt | None:
        async with SqliteStore(self.db_path) as store:
            waiting = [i for i in await Runner(build_demo_agent(), store).app.inbox() if _gates(i)]
        if not waiting:
            return None
        self.out.print(
            f"Resuming session [bold]{waiting[0].thread}[/bold] from {escape(str(self.db_path))}"
        )
        return waiting[0]

    async def _finish(
        self, pending: Interrupt, answer: ToolDecision, reason: str | None
    ) -> AgentFinished:
        # A new connection and a new agent: all the run needs to go on is in the file.
        async with SqliteStore(self.db_path) as store:
            runner = Runner(build_demo_agent(), store)
            decisions = {pending.id: answer}
            async with runner.resume(
                pending.thread, decisions, actor="demo-user", reason=reason or None
            ) as events:
                async for event in events:
                    self._show(event)
        assert events.finished is not None
        return events.finished


def _reject(reason: str | None) -> Reject:
    return Reject(message=reason) if reason else Reject()


def _gates(interrupt: Interrupt) -> bool:
    """Whether a pending interrupt is the demo's question: a call of execute, waiting."""
    return any(seg.kind == "tool" and seg.name == DEMO_TOOL for seg in interrupt.address)


def _show_request(console: Console, interrupt: Interrupt) -> None:
    info = interrupt.info
    console.print(
        Panel(
            f"{escape(info['question'])}\nrule: {escape(info['rule'])}\n"
            f"options: {', '.join(OPTIONS)}\ninterrupt id: {interrupt.id}",
            title=f"approval needed at {escape(str(interrupt.address))}",
            expand=False,
        )
    )


def _show_outcome(console: Console, finished: AgentFinished) -> None:
    ran = next((m.status for m in reversed(finished.messages) if isinstance(m, ToolMessage)), None)
    session, status = finished.result.thread, finished.result.status
    if ran == "ok":
        console.print(f"[green]The command ran.[/green] Session {session} is {status}.")
    else:
        console.print(f"[yellow]The command did not run.[/yellow] Session {session} is {status}.")
