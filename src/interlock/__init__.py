"""interlock: agent graphs that stop for a person's decision, persist exactly, and resume anywhere.

The rule to remember: a task that was interrupted re-runs from its first line when it is
resumed; `interrupt()` then returns the answer. Wrap work that must not repeat in `step()`.
"""

from typing import TYPE_CHECKING, Any

from ._public import publish

# isort: split
# Building graphs
from .graph import END as END
from .graph import START as START
from .graph import Reducer as Reducer
from .graph import append as append
from .graph import merge as merge
from .runtime import Graph as Graph

# isort: split
# Running them
from .runtime import Address as Address
from .runtime import App as App
from .runtime import Authority as Authority
from .runtime import Command as Command
from .runtime import Decision as Decision
from .runtime import GracefulShutdown as GracefulShutdown
from .runtime import Interrupt as Interrupt
from .runtime import InterruptHandler as InterruptHandler
from .runtime import Price as Price
from .runtime import Principal as Principal
from .runtime import RunHandle as RunHandle
from .runtime import RunResult as RunResult
from .runtime import Segment as Segment
from .runtime import Send as Send
from .runtime import StateSnapshot as StateSnapshot
from .runtime import Targets as Targets

# isort: split
# Comparing states (a thread's timeline)
from .runtime import Change as Change
from .runtime import diff_values as diff_values

# isort: split
# Events of a streamed run
from .graph import MessageChunk as MessageChunk
from .graph import ToolCallChunk as ToolCallChunk
from .graph import register_concat as register_concat
from .runtime import CheckpointEvent as CheckpointEvent
from .runtime import ChunkEvent as ChunkEvent
from .runtime import CustomEvent as CustomEvent
from .runtime import Event as Event
from .runtime import EventStream as EventStream
from .runtime import InterruptEvent as InterruptEvent
from .runtime import NodeOutputEvent as NodeOutputEvent
from .runtime import RunFinishedEvent as RunFinishedEvent
from .runtime import RunStartedEvent as RunStartedEvent
from .runtime import StepEvent as StepEvent
from .runtime import StepFinishedEvent as StepFinishedEvent
from .runtime import StreamMode as StreamMode

# isort: split
# Asking people, inside nodes
from .runtime import Child as Child
from .runtime import InterruptSignal as InterruptSignal
from .runtime import approve as approve
from .runtime import ask as ask
from .runtime import child_scope as child_scope
from .runtime import choose as choose
from .runtime import composite_interrupt as composite_interrupt
from .runtime import emit_event as emit_event
from .runtime import gather_children as gather_children
from .runtime import interrupt as interrupt
from .runtime import interrupt_state as interrupt_state
from .runtime import resume_context as resume_context
from .runtime import step as step

# isort: split
# Deadlines and answer checks
from .runtime import OnTimeout as OnTimeout
from .runtime import TimeoutDefault as TimeoutDefault
from .runtime import timeout_default as timeout_default
from .runtime import validator as validator

# isort: split
# Side effects
from .runtime import RETRY as RETRY
from .runtime import effect as effect
from .runtime import effect_key as effect_key

# isort: split
# Storage, encoding and audit
from .serde import Codec as Codec
from .stores import AuditReport as AuditReport
from .stores import Fence as Fence
from .stores import MemoryStore as MemoryStore
from .stores import SqliteStore as SqliteStore
from .stores import Store as Store
from .stores import verify_audit as verify_audit

# isort: split
# Errors
from ._errors import CheckpointCorrupt as CheckpointCorrupt
from ._errors import CheckpointNotFound as CheckpointNotFound
from ._errors import ContactTaken as ContactTaken
from ._errors import FencedOut as FencedOut
from ._errors import GraphChanged as GraphChanged
from ._errors import GraphDefinitionError as GraphDefinitionError
from ._errors import IdentityError as IdentityError
from ._errors import InterlockError as InterlockError
from ._errors import InterruptAlreadyResolved as InterruptAlreadyResolved
from ._errors import InvalidId as InvalidId
from ._errors import InvalidResume as InvalidResume
from ._errors import InvalidStateEdit as InvalidStateEdit
from ._errors import InvalidUpdate as InvalidUpdate
from ._errors import ModelError as ModelError
from ._errors import ModelSpecError as ModelSpecError
from ._errors import NodeError as NodeError
from ._errors import NotAuthorized as NotAuthorized
from ._errors import PayloadTooLarge as PayloadTooLarge
from ._errors import PrincipalExists as PrincipalExists
from ._errors import RecursionLimit as RecursionLimit
from ._errors import ReplyCutShort as ReplyCutShort
from ._errors import ResumeError as ResumeError
from ._errors import RunError as RunError
from ._errors import SerializationError as SerializationError
from ._errors import StoreClosed as StoreClosed
from ._errors import StoreError as StoreError
from ._errors import StoreUnavailable as StoreUnavailable
from ._errors import ThreadBusy as ThreadBusy
from ._errors import ThreadInterrupted as ThreadInterrupted
from ._errors import ToolError as ToolError
from ._errors import UnknownChannelMessage as UnknownChannelMessage
from ._errors import UnknownInterrupt as UnknownInterrupt
from ._errors import UnknownPrincipal as UnknownPrincipal
from ._errors import UnknownToken as UnknownToken
from ._errors import UnregisteredType as UnregisteredType

if TYPE_CHECKING:
    from .stores._postgres import PostgresStore as PostgresStore

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # PostgresStore needs psycopg (the ``postgres`` extra), so it is imported on first use:
    # `import interlock` works without it, and `interlock.stores` raises the ImportError that
    # names the extra. It stays out of `__all__` so that `from interlock import *` does too.
    if name == "PostgresStore":
        from .stores import PostgresStore

        publish(__name__, {name: PostgresStore}, [name])
        globals()[name] = PostgresStore
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "PostgresStore"})


__all__ = [
    # building
    "END",
    "START",
    "Graph",
    "Reducer",
    "append",
    "merge",
    # running
    "Address",
    "App",
    "Authority",
    "Command",
    "Decision",
    "GracefulShutdown",
    "Interrupt",
    "InterruptHandler",
    "Price",
    "Principal",
    "RunHandle",
    "RunResult",
    "Segment",
    "Send",
    "StateSnapshot",
    "Targets",
    # comparing states
    "Change",
    "diff_values",
    # events and streaming
    "CheckpointEvent",
    "ChunkEvent",
    "CustomEvent",
    "Event",
    "EventStream",
    "InterruptEvent",
    "NodeOutputEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "StepEvent",
    "StepFinishedEvent",
    "MessageChunk",
    "StreamMode",
    "ToolCallChunk",
    "register_concat",
    # asking people
    "Child",
    "InterruptSignal",
    "approve",
    "ask",
    "child_scope",
    "choose",
    "composite_interrupt",
    "emit_event",
    "gather_children",
    "interrupt",
    "interrupt_state",
    "resume_context",
    "step",
    # side effects
    "RETRY",
    "effect",
    "effect_key",
    # deadlines and answer checks
    "OnTimeout",
    "TimeoutDefault",
    "timeout_default",
    "validator",
    # storage, encoding and audit
    "AuditReport",
    "Codec",
    "Fence",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "verify_audit",
    # errors
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
    "ModelSpecError",
    "InvalidResume",
    "InvalidStateEdit",
    "InvalidUpdate",
    "ModelError",
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

publish(__name__, globals(), __all__)
