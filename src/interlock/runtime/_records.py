"""Public records of the runtime: addresses, interrupts, commands and run results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Generic, Literal, TypeVar, get_args

import msgspec

from ..stores import InterruptKind
from ._authority import Authority

__all__ = [
    "Address",
    "Command",
    "Decision",
    "Interrupt",
    "InterruptKind",
    "OnTimeout",
    "RunResult",
    "RunStatus",
    "Segment",
    "SegmentKind",
    "Send",
    "StateSnapshot",
    "TimeoutDefault",
    "decision_dict",
]

StateT = TypeVar("StateT")

SegmentKind = Literal["graph", "node", "subgraph", "tool", "agent", "a2a"]
"""What one level of an address is (``a2a``: a task of a remote A2A agent a tool waits on)."""
RunStatus = Literal["done", "interrupted", "paused", "failed"]
"""How a call ended: finished, waiting on answers, paused, or failed in a node."""

ANSWERABLE: Final[frozenset[InterruptKind]] = frozenset({"dynamic", "reconcile"})
"""The interrupt kinds that wait for an answer; the others (breakpoints, external pauses) are
continued with ``app.resume(thread)`` and take none."""


class TimeoutDefault(msgspec.Struct, frozen=True):
    """An ``on_timeout`` policy: once the deadline passed, answer ``value`` (`timeout_default`)."""

    value: Any
    """The answer the sweeper records."""


OnTimeout = Literal["reject", "escalate"] | TimeoutDefault
"""What `App.sweep` does with an interrupt whose deadline passed: answer False (``reject``),
ask again without a deadline (``escalate``), or answer a given value (`timeout_default`)."""

_SEGMENT_KINDS: Final[dict[str, SegmentKind]] = {k: k for k in get_args(SegmentKind)}


class Segment(msgspec.Struct, frozen=True):
    """One level of an address: a node, a subgraph, a tool call, an agent."""

    kind: SegmentKind
    """What the level is."""
    name: str
    """Its name (node name, tool name...)."""
    sub_id: str = ""
    """Tells apart instances of the same name (a Send index, a tool call id)."""

    def __str__(self) -> str:
        return (
            f"{self.kind}:{self.name}:{self.sub_id}" if self.sub_id else f"{self.kind}:{self.name}"
        )

    @classmethod
    def parse(cls, text: str) -> Segment:
        """Parse ``kind:name[:sub_id]`` back into a segment."""
        kind, _, rest = text.partition(":")
        name, _, sub = rest.partition(":")
        known = _SEGMENT_KINDS.get(kind)
        if known is None or not name:
            raise ValueError(f"not an address segment: {text!r}")
        return cls(known, name, sub)


class Address(tuple[Segment, ...]):
    """Where in the graph tree something happened, outermost level first.

    Rendered as ``node:review/tool:execute:call_1``.
    """

    __slots__ = ()

    def __str__(self) -> str:
        # One address is rendered by each runtime call that names it (a step, its question,
        # its effect, its child scopes): the text is kept for the addresses seen lately.
        text = _RENDERED.get(self)
        if text is None:
            text = "/".join(map(str, self))
            if len(_RENDERED) >= _RENDERED_KEPT:
                _RENDERED.clear()
            _RENDERED[self] = text
        return text

    def child(self, segment: Segment) -> Address:
        """Return this address extended by one level."""
        return Address((*self, segment))

    def is_within(self, other: Address) -> bool:
        """True when ``other`` is this address or one of its ancestors."""
        return len(other) <= len(self) and self[: len(other)] == other

    @classmethod
    def parse(cls, text: str) -> Address:
        """Parse a rendered address (parsed addresses are cached: they repeat a lot)."""
        found = _PARSED.get(text)
        if found is None:
            found = cls(Segment.parse(p) for p in text.split("/")) if text else cls()
            if len(_PARSED) < 4096:
                _PARSED[text] = found
        return found


_PARSED: dict[str, Address] = {}
_RENDERED: dict[Address, str] = {}
_RENDERED_KEPT: Final = 4096


class Interrupt(msgspec.Struct, frozen=True, kw_only=True):
    """A question the run is waiting on.

    ``repr`` shows its live state and its whole id, which `App.resume` takes:
    ``<Interrupt 7f3a91c2e08d4b6a1f55 pending dynamic node:review/tool:execute thread='t'>``.
    """

    id: str
    """Opaque, unique id. Resume by this id (or by `key`)."""
    thread: str = ""
    """The thread that waits on it."""
    key: str | None
    """Optional key chosen by the code that raised it."""
    address: Address
    """Where it was raised."""
    kind: InterruptKind
    """``dynamic`` (raised by code), ``before``/``after`` (static breakpoints), ``external``."""
    info: Any
    """Payload for the person (JSON-able data or registered types)."""
    schema: Mapping[str, Any] | None = None
    """JSON Schema the answer must satisfy, if any."""
    created_at: float
    """Unix time it was raised."""
    deadline: float | None = None
    """Unix time after which it expires, if any."""
    status: Literal["pending", "resolved", "expired", "cancelled"] = "pending"
    """Lifecycle state."""
    approvals: int = 1
    """How many distinct people must approve it (a quorum); 1: the first answer decides."""
    approved_by: tuple[str, ...] = ()
    """Who approved it so far, in order, while fewer than `approvals` have (a quorum's
    progress: an inbox shows ``len(approved_by)`` of `approvals`)."""
    authority: Authority | None = None
    """Who may decide it (None: anyone), as the code that asked said; `App.decide` checks it."""
    started_by: str | None = None
    """Who started the run that asked (the run's ``started_by``), for separation of duties."""

    @property
    def needs_answer(self) -> bool:
        """True for a question (``dynamic``, ``reconcile``); False for a pause."""
        return self.kind in ANSWERABLE

    def __repr__(self) -> str:
        quorum = f" approved={len(self.approved_by)}/{self.approvals}" if self.approvals > 1 else ""
        return (
            f"<Interrupt {self.id} {self.status} {self.kind} {self.address or 'graph'} "
            f"thread={self.thread!r}{quorum}>"
        )


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A person's answer to an interrupt, as recorded when it left ``pending``.

    An approval of an interrupt that needs several (``approvals`` > 1) is recorded as a vote
    (``final`` False) until the last one needed arrives.
    """

    interrupt_id: str
    """The interrupt answered."""
    thread: str
    """Its thread."""
    answer: Any
    """The answer."""
    actor: str | None = None
    """Who decided."""
    reason: str | None = None
    """Why, in their words."""
    nonce: str | None = None
    """The caller's idempotency key: the same decision sent again with it is not an error."""
    payload_hash: str
    """Hash of the question as stored (what the person was shown)."""
    decided_at: float
    """Unix time of the decision."""
    details: Any = None
    """What the answer changes, as its interrupt's kind describes it (for an edited tool call:
    the arguments before and after, and their diff); None for most answers."""
    approvals: int = 1
    """How many distinct approvals its interrupt needs (`Interrupt.approvals`)."""
    approved_by: tuple[str, ...] = ()
    """For an interrupt that needs several approvals: who has approved it, this decision's
    actor included when it is an approval. Empty for an interrupt that needs one answer."""
    final: bool = True
    """False for a vote: an approval that is recorded but leaves the interrupt pending, because
    fewer than `approvals` distinct people have approved it yet. True when the decision
    resolved the interrupt (the last approval of a quorum, a rejection, any other answer)."""
    override: str | None = None
    """Set when an admin decided outside the question's authority: their reason for it."""


def decision_dict(d: Decision) -> dict[str, Any]:
    """A decision as plain data to store: every field, ``override`` only when set (a decision
    without one is stored as it was before the field existed)."""
    out = msgspec.structs.asdict(d)
    if out["override"] is None:
        del out["override"]
    return out


class Send(msgspec.Struct, frozen=True):
    """Fan-out: run ``node`` as its own task with ``arg`` as its input instead of the state."""

    node: str
    """The node to run."""
    arg: Any
    """The task's input."""


class Command(msgspec.Struct, frozen=True, kw_only=True):
    """A node's or a caller's instruction beyond a plain state update.

    Returned by a node: ``update`` is its state update and ``goto`` adds successors. Passed to
    `App.resume`: ``resume`` answers the single pending interrupt (or maps ids/keys to answers),
    ``update`` edits the state first, ``goto`` schedules extra nodes.
    ``Command(resume=None)`` means "targeted, no data" and is valid.
    """

    resume: Any = None
    """The answer, or a mapping ``{id_or_key: answer}``."""
    update: Mapping[str, Any] | None = None
    """A state update applied before continuing."""
    goto: str | Send | Sequence[str | Send] = ()
    """Nodes (or `Send`s) to run next."""


class RunResult(msgspec.Struct, Generic[StateT], frozen=True, kw_only=True):
    """What `App.run` and `App.resume` return."""

    thread: str
    """The thread that ran."""
    status: RunStatus
    """``done``, ``interrupted`` (answers needed) or ``paused`` (no answer needed). A failed
    run raises instead (`NodeError`); its thread's status is then ``failed``."""
    state: StateT
    """The state at the last checkpoint, as the schema's type."""
    values: dict[str, Any]
    """The same state as a plain dict."""
    interrupts: list[Interrupt] = msgspec.field(default_factory=list)
    """Pending interrupts, in raise order."""
    checkpoint_id: str | None = None
    """The last checkpoint committed (None only with durability that wrote nothing)."""

    def interrupt(self, key: str | None = None) -> Interrupt:
        """Return the single pending interrupt, or the one with ``key``."""
        found = [i for i in self.interrupts if key is None or i.key == key]
        if len(found) != 1:
            raise LookupError(
                f"expected exactly one pending interrupt{f' with key {key!r}' if key else ''}, "
                f"found {len(found)}: {[i.id for i in found]}"
            )
        return found[0]


class StateSnapshot(msgspec.Struct, Generic[StateT], frozen=True, kw_only=True):
    """A thread's state at one checkpoint, as `App.get_state` and `App.history` return it."""

    thread: str
    """The thread."""
    checkpoint_id: str
    """The checkpoint."""
    parent_id: str | None
    """The checkpoint it follows."""
    step: int
    """Supersteps completed when it was written."""
    status: str
    """``ready``, ``interrupted``, ``paused``, ``done`` or ``failed``."""
    source: str
    """Why it was written: ``input``, ``loop``, ``resume``, ``update`` or ``fork``."""
    created_at: float
    """Unix time of the commit."""
    state: StateT
    """The state, as the schema's type."""
    values: dict[str, Any]
    """The state as a plain dict."""
    next: tuple[str, ...]
    """Nodes that run next (with their pending interrupts, if any)."""
    interrupts: list[Interrupt]
    """Pending interrupts at this checkpoint."""
    metadata: dict[str, Any]
    """Free-form metadata written with the checkpoint."""
