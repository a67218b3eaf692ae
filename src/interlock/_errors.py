"""The one error tree of interlock.

Every error interlock raises on purpose derives from `InterlockError`. Misuse of the API is
kept apart from failures of a run, and both apart from storage problems::

    InterlockError
    ├── GraphDefinitionError        the graph or an API call is malformed (a bug in the caller)
    ├── InvalidId                   an id or actor name is refused (also a ValueError)
    ├── ModelSpecError              a model's name is malformed (also a ValueError)
    ├── SerializationError          a value cannot be encoded
    │   ├── UnregisteredType        a type is not in the codec's registry
    │   └── PayloadTooLarge         an encoded value exceeds the size or depth limits
    ├── CheckpointCorrupt           a stored checkpoint cannot be decoded safely
    ├── StoreError                  the storage backend failed
    │   ├── StoreClosed             the store was used after `close()`
    │   ├── StoreUnavailable        the connection to the backend was lost or refused
    │   └── UnknownChannelMessage   no channel claimed a message for that interrupt
    ├── ResumeError                 a resume request was refused; nothing was changed
    │   ├── CheckpointNotFound      no such thread or checkpoint
    │   ├── UnknownInterrupt        a target names no pending interrupt of the thread
    │   ├── InterruptAlreadyResolved
    │   ├── InvalidResume           a resume value fails its schema or validator
    │   ├── NotAuthorized           the decider is outside the question's authority
    │   └── GraphChanged            the checkpoint was written by an incompatible graph
    ├── ThreadBusy                  another executor changed or holds the thread
    │   └── FencedOut               this executor lost its lease; its write was refused
    ├── ThreadInterrupted           new input for a thread that has pending interrupts
    ├── IdentityError               a principal or token cannot be added or changed as asked
    │   ├── PrincipalExists         another principal has that name (in normal form)
    │   ├── ContactTaken            another principal has that e-mail address or Slack user
    │   ├── UnknownPrincipal        no principal has that name
    │   └── UnknownToken            no token has that id
    └── RunError                    a run failed
        ├── NodeError               a node raised; the original exception is chained
        ├── InvalidUpdate           a node returned an update the state cannot take
        │   └── InvalidStateEdit    an edit of a fork does not fit the state's schema
        ├── RecursionLimit          the run took more supersteps than allowed
        ├── ModelError              a chat model's endpoint failed or answered nonsense
        │   └── ReplyCutShort       a reply ended on the token limit (an agent refuses it)
        └── ToolError               a tool failed (only when the agent is told to raise)

`interlock.agents` adds `MCPError` (an MCP server cannot be reached or broke the protocol)
and its leaf `MCPTimeout` (it did not start or answer within its limit), `InterlockError`s
defined beside the MCP client, which needs the ``mcp`` extra.
`interlock.a2a` adds `A2ACallError` (a remote A2A agent called as a tool failed) and its leaves
`RemoteTaskFailed`, `RemoteTaskLost` and `RemoteAgentUnreachable`, beside the A2A caller.
`interlock.server` adds `SignatureError` (a webhook's signature is malformed, wrong or too
old), raised by `verify_signature` on the receiving side.

Interrupt *signals* are not errors: they derive from `BaseException` (see
`interlock.runtime._signals`) so that `except Exception` in user code cannot swallow them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "CheckpointCorrupt",
    "CheckpointNotFound",
    "ContactTaken",
    "FencedOut",
    "GraphChanged",
    "GraphDefinitionError",
    "IdentityError",
    "InterlockError",
    "InterruptAlreadyResolved",
    "InvalidId",
    "InvalidResume",
    "InvalidStateEdit",
    "InvalidUpdate",
    "ModelError",
    "ModelSpecError",
    "NodeError",
    "NotAuthorized",
    "PayloadTooLarge",
    "PrincipalExists",
    "RecursionLimit",
    "ReplyCutShort",
    "ResumeError",
    "RunError",
    "SerializationError",
    "StoreClosed",
    "StoreError",
    "StoreUnavailable",
    "ThreadBusy",
    "ThreadInterrupted",
    "ToolError",
    "UnknownChannelMessage",
    "UnknownInterrupt",
    "UnknownPrincipal",
    "UnknownToken",
    "UnregisteredType",
]


class InterlockError(Exception):
    """Base class of every error interlock raises on purpose."""


class GraphDefinitionError(InterlockError):
    """Raised when a graph is malformed or the API is called in a way that cannot work."""


class ModelSpecError(InterlockError, ValueError):
    """Raised when a model's name (``"provider:model"``) is malformed or names no provider.

    It is a `ValueError` too, as every refusal of a caller's value is.

    Attributes:
        spec: The name refused (None when the environment variable read was not set).
        variable: The environment variable it was read from, if it was.
    """

    def __init__(self, message: str, *, spec: str | None, variable: str | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.variable = variable


class InvalidId(InterlockError, ValueError):
    """Raised when an id (a thread, an actor, a key...) passed to the API is refused.

    Empty, too long, not valid Unicode, or holding a character ids may not hold (see
    `interlock.App.run`: a new thread's id and an actor's name must be printable on one line).
    It is a `ValueError` too, as every refusal of a caller's value is.

    Attributes:
        argument: The argument refused (``"thread"``, ``"actor"``...).
        reason: What is wrong with it, in words.
    """

    def __init__(self, argument: str, reason: str) -> None:
        super().__init__(f"{argument} {reason}")
        self.argument = argument
        self.reason = reason


class SerializationError(InterlockError):
    """Raised when a value cannot be encoded for a checkpoint or payload."""


class UnregisteredType(SerializationError):
    """Raised when state or a payload holds a type the codec does not know.

    Attributes:
        path: Where the value sits, e.g. ``state.messages[3].payload``.
        type_name: The qualified name of the offending type.
    """

    def __init__(self, message: str, *, path: str, type_name: str) -> None:
        super().__init__(message)
        self.path = path
        self.type_name = type_name


class PayloadTooLarge(SerializationError):
    """Raised when an encoded value exceeds the configured size or nesting depth."""


class CheckpointCorrupt(InterlockError):
    """Raised when a stored checkpoint or record cannot be decoded safely.

    Attributes:
        thread: The thread whose record is damaged, when known.
        checkpoint_id: The damaged checkpoint, when known.
    """

    def __init__(
        self, message: str, *, thread: str | None = None, checkpoint_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.thread = thread
        self.checkpoint_id = checkpoint_id


class StoreError(InterlockError):
    """Raised when the storage backend fails; the driver's exception is chained."""


class StoreClosed(StoreError):
    """Raised when a store is used after it was closed."""


class StoreUnavailable(StoreError):
    """Raised when the connection to the storage backend was lost, refused or timed out.

    Nothing the call wrote is half-done (a write is one transaction), and the same call may
    succeed once the backend is back: a restart of the database server, a failover, a network
    cut. It is the error a job queue retries with backoff.
    """


class UnknownChannelMessage(StoreError):
    """Raised when a channel's message is changed before the channel claimed it.

    A channel claims the posting of its message for an interrupt first
    (`interlock.stores.Store.claim_channel_message`), then records what it posted.

    Attributes:
        channel: The channel's name.
        interrupt_id: The interrupt.
    """

    def __init__(self, channel: str, interrupt_id: str) -> None:
        super().__init__(
            f"channel {channel!r} has no message for interrupt {interrupt_id!r}: claim it "
            "with claim_channel_message before recording what was posted (or the thread was "
            "deleted, and its messages with it)"
        )
        self.channel = channel
        self.interrupt_id = interrupt_id


class ResumeError(InterlockError):
    """Raised when a resume request is refused. Nothing was changed in the store."""


class CheckpointNotFound(ResumeError):
    """Raised when a thread or checkpoint does not exist.

    Attributes:
        thread: The thread asked for.
        checkpoint_id: The checkpoint asked for, or None for the thread's latest.
    """

    def __init__(self, thread: str, checkpoint_id: str | None = None) -> None:
        if checkpoint_id is None:
            msg = (
                f"thread {thread!r} has no checkpoint; start it with app.run(input, thread=...) "
                "or check the thread id"
            )
        else:
            msg = (
                f"thread {thread!r} has no checkpoint {checkpoint_id!r}; "
                "list its checkpoints with app.history(thread)"
            )
        super().__init__(msg)
        self.thread = thread
        self.checkpoint_id = checkpoint_id


class UnknownInterrupt(ResumeError):
    """Raised when a resume target names no interrupt of the thread.

    Attributes:
        target: The id or key that matched nothing.
        pending: The ids of the interrupts that are pending, for the message.
    """

    def __init__(self, target: str, pending: Sequence[str], *, thread: str) -> None:
        shown = ", ".join(pending) if pending else "none"
        super().__init__(
            f"thread {thread!r} has no pending interrupt with id or key {target!r} "
            f"(pending: {shown}); list them with app.get_state(thread).interrupts"
        )
        self.target = target
        self.pending = tuple(pending)
        self.thread = thread


class InterruptAlreadyResolved(ResumeError):
    """Raised when a resume targets an interrupt that was already answered.

    Attributes:
        interrupt_id: The interrupt targeted.
        status: Its recorded status (``resolved``, ``expired`` or ``cancelled``).
        resolved_value: The value it was resolved with, when recorded.
    """

    def __init__(
        self, interrupt_id: str, *, status: str = "resolved", resolved_value: Any = None
    ) -> None:
        super().__init__(
            f"interrupt {interrupt_id} is already {status}; it cannot be answered twice. "
            "Read the thread's state to see what happened next"
        )
        self.interrupt_id = interrupt_id
        self.status = status
        self.resolved_value = resolved_value


class InvalidResume(ResumeError):
    """Raised when a resume value or request does not fit the interrupt it targets.

    Attributes:
        interrupt_id: The interrupt the value was meant for, if any.
    """

    def __init__(self, message: str, *, interrupt_id: str | None = None) -> None:
        super().__init__(message)
        self.interrupt_id = interrupt_id


class NotAuthorized(ResumeError):
    """Raised when a principal is outside the authority of what it does (decide, fork).

    A decision is checked against the question's authority; a fork needs the admin role.
    Nothing was recorded. The message says which rule refused and who may decide instead.

    Attributes:
        interrupt_id: The question (None for an act that decides none, such as a fork).
        rule: Which rule refused: ``who`` (not one of the principals, groups or roles it names),
            ``starter`` (the run's starter may not decide it), ``approver`` (someone who
            approved an earlier question of the thread may not), ``principal`` (the question
            names who may decide, and the decision named nobody), ``override`` (an override
            by someone who is not an admin, or without a reason), or ``admin`` (an act only an
            admin may do, such as forking a thread, by someone who is not one).
        principal: The principal's normalised name, if one was given.
    """

    def __init__(
        self, message: str, *, interrupt_id: str | None, rule: str, principal: str | None = None
    ) -> None:
        super().__init__(message)
        self.interrupt_id = interrupt_id
        self.rule = rule
        self.principal = principal


class GraphChanged(ResumeError):
    """Raised when a checkpoint was written by a graph with a different structure.

    Attributes:
        stored: The fingerprint recorded in the checkpoint.
        current: The fingerprint of the graph asked to resume it.
    """

    def __init__(self, *, thread: str, stored: str, current: str, detail: str = "") -> None:
        if detail:
            message = (
                f"thread {thread!r} was checkpointed by a different graph (fingerprint {stored}, "
                f"now {current}) and {detail}; fix the migration or resume it with the graph "
                "that wrote it"
            )
        else:
            message = (
                f"thread {thread!r} was checkpointed by a different graph (fingerprint {stored}, "
                f"now {current}); resume it with the graph that wrote it, or register a "
                f"migration: graph.compile(migrations={{{stored!r}: fn}}) with fn(values) -> "
                "values"
            )
        super().__init__(message)
        self.thread = thread
        self.stored = stored
        self.current = current


class ThreadBusy(InterlockError):
    """Raised when another executor changed or holds the thread while this one worked on it.

    Attributes:
        thread: The contended thread.
    """

    def __init__(self, thread: str, detail: str = "", *, holder: str | None = None) -> None:
        if holder is not None:
            message = (
                f"thread {thread!r} is being run by {holder}{f' ({detail})' if detail else ''}; "
                "wait until that run stops (or pause it with app.request_pause(thread)) and try "
                "again"
            )
        else:
            extra = f" ({detail})" if detail else ""
            message = (
                f"thread {thread!r} was changed by another executor{extra}; "
                "reload it with app.get_state(thread) and try again"
            )
        super().__init__(message)
        self.thread = thread
        self.holder = holder


class FencedOut(ThreadBusy):
    """Raised when an executor writes under a lease another executor has since taken over.

    The lease expired (the executor stalled longer than its time to live) and someone else
    acquired the thread; nothing of the refused write was stored. The other executor now owns
    the thread: stop working on it.

    Attributes:
        thread: The thread.
        token: The fencing token the refused write carried.
        current: The thread's current token.
    """

    def __init__(self, thread: str, *, token: int, current: int) -> None:
        InterlockError.__init__(
            self,
            f"thread {thread!r}: this executor's lease (fencing token {token}) was taken over by "
            f"another executor (token {current}); its write was refused. Stop working on the "
            "thread; the other executor continues it",
        )
        self.thread = thread
        self.holder = None
        self.token = token
        self.current = current


class ThreadInterrupted(InterlockError):
    """Raised when new input is sent to a thread that waits on pending or decided interrupts.

    Attributes:
        thread: The thread.
        interrupt_ids: The interrupts waited on: pending ones, then decided ones.
        decided: Those among them already decided, whose tasks have not run since.
    """

    def __init__(
        self, thread: str, interrupt_ids: Sequence[str], *, decided: Sequence[str] = ()
    ) -> None:
        waiting = [i for i in interrupt_ids if i not in decided]
        parts = []
        if waiting:
            parts.append(f"{len(waiting)} pending interrupt(s) ({', '.join(waiting)})")
        if decided:
            parts.append(
                f"{len(decided)} decided interrupt(s) whose tasks have not run yet "
                f"({', '.join(decided)})"
            )
        super().__init__(
            f"thread {thread!r} is waiting on {' and '.join(parts) or 'nothing'}; "
            f"{'answer and ' if waiting else ''}continue them with app.resume(thread, ...) or "
            "pass on_pending='cancel' to drop them on the record and start over with the new "
            "input"
        )
        self.thread = thread
        self.interrupt_ids = tuple(interrupt_ids)
        self.decided = tuple(decided)


class IdentityError(InterlockError):
    """Raised when a principal or a token cannot be added or changed as asked; nothing was."""


class PrincipalExists(IdentityError):
    """Raised when a principal is added under a name another one has (in normal form).

    Attributes:
        name: The name asked for.
        existing: The name the store has, which compares equal to it.
    """

    def __init__(self, name: str, existing: str) -> None:
        same = "" if name == existing else f" as {existing!r} (names are compared case-folded)"
        super().__init__(
            f"principal {name!r} exists already{same}; pick another name, or change that "
            "principal instead"
        )
        self.name = name
        self.existing = existing


class ContactTaken(IdentityError):
    """Raised when a principal is given an e-mail address or a Slack user another one has.

    Attributes:
        field: What is taken: ``email`` or ``slack_user``.
        value: The value asked for.
        holder: The name of the principal that has it.
    """

    def __init__(self, field: str, value: str, holder: str) -> None:
        what = "e-mail address" if field == "email" else "Slack user"
        same = " (e-mail addresses are compared case-insensitively)" if field == "email" else ""
        super().__init__(
            f"the {what} {value!r} belongs to principal {holder!r} already{same}, and it "
            f"may name one principal only: clear it there first (update_principal("
            f'{holder!r}, {field}="")), or give another'
        )
        self.field = field
        self.value = value
        self.holder = holder


class UnknownPrincipal(IdentityError):
    """Raised when no principal has the name given.

    Attributes:
        name: The name asked for.
    """

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no principal {name!r}; list them with `interlock principal list`, or add it "
            "with `interlock principal add`"
        )
        self.name = name


class UnknownToken(IdentityError):
    """Raised when no token has the id given.

    Attributes:
        id: The id asked for.
    """

    def __init__(self, id: str) -> None:
        super().__init__(f"no token {id!r}; list them with `interlock token list`")
        self.id = id


class RunError(InterlockError):
    """Raised when a run fails."""


class NodeError(RunError):
    """Raised when a node raises an exception; the original is chained as ``__cause__``.

    Attributes:
        node: The node that failed.
        thread: The thread it ran in.
    """

    def __init__(self, node: str, thread: str, exc: BaseException) -> None:
        super().__init__(f"node {node!r} failed in thread {thread!r}: {type(exc).__name__}: {exc}")
        self.node = node
        self.thread = thread


class InvalidUpdate(RunError):
    """Raised when a node's update cannot be applied to the state."""


class InvalidStateEdit(InvalidUpdate):
    """Raised when values given to edit a state do not fit the state's schema.

    Nothing was written. The message lists every problem found and says what to do.

    Attributes:
        problems: ``(path, message)`` per problem; ``path`` points into the values given, as
            a JSON pointer (``/messages/3/role``; ``/notes`` for a whole key).
    """

    def __init__(self, problems: Sequence[tuple[str, str]], *, schema: str) -> None:
        listed = "; ".join(f"{path}: {message}" for path, message in problems)
        super().__init__(
            f"the edit does not fit state schema {schema}: {listed}. Fix these values (the "
            "state's JSON Schema, app.state_schema(), says what each key holds) and fork again"
        )
        self.problems = list(problems)


class RecursionLimit(RunError):
    """Raised when a run exceeds its superstep limit.

    Attributes:
        limit: The limit that was hit.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the run took more than {limit} supersteps without finishing; a conditional edge "
            f"probably loops forever. Raise the limit with recursion_limit= if the loop is intended"
        )
        self.limit = limit


class ModelError(RunError):
    """Raised when a chat model cannot give a reply: its endpoint failed, or the reply is malformed.

    Attributes:
        endpoint: Where the model lives (a base URL, or the model's name for local models).
        status: The HTTP status the endpoint answered, if it answered one.
        retry_after: The seconds the endpoint asked to wait before trying again (its
            ``Retry-After``), if it asked.
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.status = status
        self.retry_after = retry_after


class ReplyCutShort(ModelError):
    """Raised when a model's reply ended on its token limit and its agent refuses such replies.

    A reply cut short (``finish_reason="length"``) is half an answer, or a tool call with half
    its arguments; an agent set to keep such replies (``cut_replies="keep"``) records it,
    marked, instead.

    Attributes:
        agent: The agent whose model replied.
        content: The text the model wrote before it was cut (None if none).
    """

    def __init__(
        self, message: str, *, endpoint: str, agent: str, content: str | None = None
    ) -> None:
        super().__init__(message, endpoint=endpoint)
        self.agent = agent
        self.content = content


class ToolError(RunError):
    """Raised when a tool call fails and its agent was told to raise (``tool_errors="raise"``).

    By default a failing tool call is answered to the model as an error message instead.

    Attributes:
        tool: The tool's name.
        call_id: The id of the model's tool call.
    """

    def __init__(self, message: str, *, tool: str, call_id: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.call_id = call_id
