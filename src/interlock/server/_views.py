"""The JSON the HTTP API speaks: one Struct per body, which also gives the OpenAPI schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .._args import MAX_TEXT
from .._plain import plain
from ..runtime import Authority, Decision, Interrupt

__all__ = [
    "AuditItem",
    "CheckpointItem",
    "DecisionBody",
    "DecisionRequest",
    "DecisionResult",
    "DeliveryItem",
    "DeliveryPage",
    "ErrorBody",
    "IdentityView",
    "InterruptCounts",
    "InterruptDetail",
    "InterruptPage",
    "InterruptView",
    "PauseRequest",
    "RunAccepted",
    "RunRequest",
    "StateProblem",
    "Status",
    "ThreadItem",
    "ThreadPage",
    "ThreadView",
    "ToolCount",
    "asks_confirmation",
    "decision_body",
    "interrupt_view",
    "plain",
    "summary_of",
]


class InterruptView(msgspec.Struct, kw_only=True):
    """A question as the inbox lists it."""

    id: str
    app: str
    thread: str
    key: str | None
    kind: str
    status: str
    address: str
    tool: str | None
    summary: str
    info: Any
    answer_schema: Any
    created_at: float
    deadline: float | None
    payload_hash: str
    approvals: int = 1
    """Distinct approvals the question needs (more than 1: a quorum)."""
    approved_by: list[str] = []
    """Who has approved it so far."""
    authority: AuthorityView | None = None
    """Who may decide it (None: anyone with the approver role in scope)."""
    confirm: bool = False
    """Approving it takes a confirmation step: show what will run, and send the decision
    with ``confirmed`` once the person confirms."""


class AuthorityView(msgspec.Struct, kw_only=True):
    """Who may decide a question: the rules, and the same in words."""

    principals: list[str] = []
    groups: list[str] = []
    roles: list[str] = []
    not_starter: bool = False
    """The run's starter may not decide it."""
    not_approvers: bool = False
    """Nobody who approved an earlier question of the thread may decide it."""
    started_by: str | None = None
    """Who started the run that asked."""
    text: str
    """In words: ``needs a member of group finance; not ana``."""


class DecisionBody(msgspec.Struct, kw_only=True):
    """A recorded decision."""

    interrupt_id: str
    thread: str
    answer: Any
    actor: str | None
    reason: str | None
    payload_hash: str
    decided_at: float
    details: Any
    final: bool = True
    """False for one approval of several needed: the question is still pending."""
    approved_by: list[str] = []
    """Who has approved so far (for a quorum)."""


class AuditItem(msgspec.Struct, kw_only=True):
    """One entry of a thread's audit log."""

    seq: int
    at: float
    kind: str
    actor: str | None
    data: Any


class InterruptDetail(msgspec.Struct, kw_only=True):
    """One question with its context: the thread's recent state and who did what."""

    interrupt: InterruptView
    decision: DecisionBody | None
    thread_status: str | None
    messages: list[Any]
    values: Any
    audit: list[AuditItem]
    started_by: str | None = None
    """Who started the run that asks (its ``started_by`` metadata), if recorded."""


class InterruptPage(msgspec.Struct, kw_only=True):
    """A page of the inbox; pass ``next`` as ``after`` for the following one."""

    items: list[InterruptView]
    next: str | None


class ToolCount(msgspec.Struct, kw_only=True):
    """How many interrupts wait on one tool."""

    tool: str | None
    """The tool (None: interrupts that gate no tool)."""
    pending: int
    """How many of its interrupts are pending."""


class InterruptCounts(msgspec.Struct, kw_only=True):
    """``GET /v1/interrupts/counts``: the pending interrupts counted per tool."""

    by_tool: list[ToolCount]
    """One entry per tool with something pending, by tool name (None last)."""
    total: int
    """The sum of the entries."""


class DecisionRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/interrupts/{id}/decision``: the answer and the question it answers."""

    answer: Any
    payload_hash: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    reason: Annotated[str, msgspec.Meta(max_length=MAX_TEXT)] | None = None
    wait: bool = False
    """Continue the thread before answering, and include its view (``thread_view``)."""
    override: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TEXT)] | None = None
    """An admin's reason for deciding outside the question's authority (admin tokens only;
    recorded with the decision and in the audit log)."""
    confirmed: bool = False
    """The person went through the question's confirmation step (needed to approve a
    question whose view has ``confirm``)."""


class DecisionResult(msgspec.Struct, kw_only=True):
    """What a decision did: recorded (``final`` False for one approval of several needed)."""

    decision: DecisionBody
    replayed: bool
    continued: bool
    thread_view: ThreadView | None = None


class StateProblem(msgspec.Struct, kw_only=True):
    """One way an edit of a state does not fit its schema."""

    path: str
    """Where, as a JSON pointer into the values sent (``/messages/3/role``)."""
    message: str


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every refusal: a stable ``error`` code and a message that says what to do."""

    error: str
    message: str
    decision: DecisionBody | None = None
    error_id: str | None = None
    """For a failure of the server (500): the id its log has the details under."""
    problems: list[StateProblem] | msgspec.UnsetType = msgspec.UNSET
    """For ``invalid_state``: every problem of the edit (absent from other refusals)."""


class TallyView(msgspec.Struct, kw_only=True):
    """Sums of model calls: tokens, calls and, with prices, cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Of ``input_tokens``, those read from a provider's prompt cache."""
    calls: int = 0
    cost: float | None = None
    """At the App's prices (None: no call had a price)."""


class UsageView(msgspec.Struct, kw_only=True):
    """What a thread's model calls used: its whole life, its current run, and by model."""

    thread: TallyView
    run: TallyView
    run_seconds: float
    """How long the current run has been running (time waiting on a person left out)."""
    models: dict[str, TallyView]


class ThreadView(msgspec.Struct, kw_only=True):
    """A thread's latest state, summarised."""

    thread: str
    app: str
    status: str
    checkpoint_id: str
    step: int
    updated_at: float
    next: list[str]
    interrupts: list[InterruptView]
    values: Any
    messages: list[Any]
    error: str | None = None
    """Why the thread failed (status ``failed``): a node's error, or why its continuation
    could not run."""
    continue_with: str | None = None
    """For a thread whose continuation could not run: the command that continues it once
    the cause is fixed."""
    usage: UsageView | None = None
    """What its model calls used (None: it reported none, or the identity reading has a tool
    scope: the sums count the work of every tool)."""


class ThreadItem(msgspec.Struct, kw_only=True):
    """A thread as the thread listing shows it."""

    thread: str
    app: str
    status: str
    checkpoint_id: str
    updated_at: float
    error: str | None = None
    """Why it failed (status ``failed``)."""
    continue_with: str | None = None
    """The command that continues it once the cause is fixed, when its continuation failed."""


class ThreadPage(msgspec.Struct, kw_only=True):
    """A page of threads by app and id; pass ``next`` as ``after`` for the following one."""

    items: list[ThreadItem]
    next: str | None


class CheckpointFields(msgspec.Struct, kw_only=True):
    """What every view of one checkpoint shows (`checkpoint_fields` reads it from a snapshot)."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    status: str
    source: str
    """Why it was written: ``input``, ``loop``, ``resume``, ``update`` or ``fork``."""
    created_at: float
    next: list[str]
    """The nodes planned next."""


class CheckpointItem(CheckpointFields, kw_only=True):
    """One checkpoint of a thread's history."""

    metadata: Any


class HistoryPage(msgspec.Struct, kw_only=True):
    """A page of history, newest first; pass ``next`` as ``before`` for older ones."""

    items: list[CheckpointItem]
    next: str | None


class AuditPage(msgspec.Struct, kw_only=True):
    """A page of a thread's audit log; pass ``next`` as ``after`` for later entries."""

    items: list[AuditItem]
    next: int | None


class RunRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/threads/{thread}/runs``: new input starts a turn; no input continues."""

    input: Any = None
    app: str | None = None
    wait: bool = False


class RunAccepted(msgspec.Struct, kw_only=True):
    """A run accepted (202) — or, with ``wait``, finished (200) with the thread's view."""

    thread: str
    app: str
    action: Literal["run", "continue"]
    thread_view: ThreadView | None = None


class PauseRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/threads/{thread}/pause``."""

    forced: bool = False


class PauseAccepted(msgspec.Struct, kw_only=True):
    """A pause request stored for whichever process runs the thread."""

    thread: str
    forced: bool


class Status(msgspec.Struct, kw_only=True):
    """``/healthz`` and ``/readyz``."""

    status: str


class DeliveryItem(msgspec.Struct, kw_only=True):
    """One notification attempt (or a delivery dropped before it was sent)."""

    event_id: str
    event_type: str
    channel: str
    attempt: int
    at: float
    outcome: str
    status: int | None
    error: str | None
    elapsed_ms: float | None


class DeliveryPage(msgspec.Struct, kw_only=True):
    """The notifier's latest delivery attempts, oldest first (empty without a notifier)."""

    items: list[DeliveryItem]


class IdentityView(msgspec.Struct, kw_only=True):
    """Who the caller is."""

    name: str
    role: str
    tools: list[str]
    threads: list[str]
    four_eyes: bool


def summary_of(info: Any) -> str:
    """One line for a person: the question's text, or its start."""
    if isinstance(info, dict):
        for field in ("question", "summary", "message", "title"):
            text = info.get(field)
            if isinstance(text, str) and text:
                return _line(text)
    if isinstance(info, str):
        return _line(info)
    return _line(str(plain(info))) if info is not None else ""


def _line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:199] + "…"


def authority_view(authority: Authority | None, started_by: str | None) -> AuthorityView | None:
    """The API's view of who may decide a question (None: no rule)."""
    if authority is None:
        return None
    return AuthorityView(
        principals=list(authority.principals),
        groups=list(authority.groups),
        roles=list(authority.roles),
        not_starter=authority.not_starter,
        not_approvers=authority.not_approvers,
        started_by=started_by,
        text=authority.describe(started_by),
    )


def interrupt_view(
    app: str,
    interrupt: Interrupt,
    payload_hash: str,
    tool: str | None,
    authority: Authority | None = None,
) -> InterruptView:
    """The inbox's view of one interrupt (``authority``: the rules its decision must meet)."""
    return InterruptView(
        id=interrupt.id,
        app=app,
        thread=interrupt.thread,
        key=interrupt.key,
        kind=interrupt.kind,
        status=interrupt.status,
        address=str(interrupt.address),
        tool=tool,
        summary=summary_of(interrupt.info),
        info=plain(interrupt.info),
        answer_schema=plain(interrupt.schema) if interrupt.schema is not None else None,
        created_at=interrupt.created_at,
        deadline=interrupt.deadline,
        payload_hash=payload_hash,
        approvals=interrupt.approvals,
        approved_by=list(interrupt.approved_by),
        authority=authority_view(authority, interrupt.started_by),
        confirm=asks_confirmation(interrupt.info),
    )


def asks_confirmation(info: Any) -> bool:
    """Whether a question's info asks for a confirmation step before it is let through."""
    return isinstance(info, dict) and info.get("confirm") is True


def decision_body(decision: Decision) -> DecisionBody:
    """The API's view of a recorded decision."""
    return DecisionBody(
        interrupt_id=decision.interrupt_id,
        thread=decision.thread,
        answer=plain(decision.answer),
        actor=decision.actor,
        reason=decision.reason,
        payload_hash=decision.payload_hash,
        decided_at=decision.decided_at,
        details=plain(decision.details),
        final=decision.final,
        approved_by=list(decision.approved_by),
    )
