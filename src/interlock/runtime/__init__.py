"""The runtime: the superstep engine, interrupts, resume and checkpoints.

This namespace is the runtime's one door: the layers above it (the agents, the approval
server, the command line, the workers) import from here, never from its private modules
(``tests/test_layers.py`` holds them to it). Most names are also in the top-level
`interlock` namespace; the rest are for the layers built on the runtime:

- reading for people: `Question`, `Reader` (`App.question`, `App.reader`), and `Continuer`
  (`App.continued_by`: who continues a thread after a recorded decision);
- deciding: `needs_confirmation` (a question's confirmation step);
- comparing states: `diff_values` and its `Change` records (a thread's timeline);
- counting what models used: `report_usage`, `current_usage`, `keep_limits`, `usage_of`, `Price`,
  `UsageTotals`, `Tally`;
- building agents: `approval_interrupt`, `check_approvals`, `current_address`, `new_id`,
  `register_answer_details`, `run_graph`, `schema_problem`, `stored_schema`.
"""

from .._public import publish
from ._app import App as App
from ._app import InterruptHandler as InterruptHandler
from ._app import Targets as Targets
from ._authority import Authority as Authority
from ._authority import Principal as Principal
from ._context import child_scope as child_scope
from ._context import current_address as current_address
from ._continuation import Continuer as Continuer
from ._control import GracefulShutdown as GracefulShutdown
from ._control import RunHandle as RunHandle
from ._diff import Change as Change
from ._diff import ChangeOp as ChangeOp
from ._diff import diff_values as diff_values
from ._effects import RETRY as RETRY
from ._effects import effect as effect
from ._effects import effect_key as effect_key
from ._events import CheckpointEvent as CheckpointEvent
from ._events import ChunkEvent as ChunkEvent
from ._events import CustomEvent as CustomEvent
from ._events import Event as Event
from ._events import EventStream as EventStream
from ._events import InterruptEvent as InterruptEvent
from ._events import NodeOutputEvent as NodeOutputEvent
from ._events import RunFinishedEvent as RunFinishedEvent
from ._events import RunStartedEvent as RunStartedEvent
from ._events import StepEvent as StepEvent
from ._events import StepFinishedEvent as StepFinishedEvent
from ._events import StreamMode as StreamMode
from ._events import listening as listening
from ._graph import Graph as Graph
from ._interrupts import Child as Child
from ._interrupts import approval_interrupt as approval_interrupt
from ._interrupts import approve as approve
from ._interrupts import ask as ask
from ._interrupts import check_approvals as check_approvals
from ._interrupts import choose as choose
from ._interrupts import composite_interrupt as composite_interrupt
from ._interrupts import emit_event as emit_event
from ._interrupts import gather_children as gather_children
from ._interrupts import interrupt as interrupt
from ._interrupts import interrupt_state as interrupt_state
from ._interrupts import needs_confirmation as needs_confirmation
from ._interrupts import resume_context as resume_context
from ._interrupts import run_graph as run_graph
from ._interrupts import step as step
from ._interrupts import timeout_default as timeout_default
from ._interrupts import validator as validator
from ._jsonschema import check as schema_problem
from ._jsonschema import stored_schema as stored_schema
from ._level import new_id as new_id
from ._metering import current_usage as current_usage
from ._metering import keep_limits as keep_limits
from ._metering import report_usage as report_usage
from ._reader import Question as Question
from ._reader import Reader as Reader
from ._reader import ThreadSummary as ThreadSummary
from ._records import Address as Address
from ._records import Command as Command
from ._records import Decision as Decision
from ._records import Interrupt as Interrupt
from ._records import OnTimeout as OnTimeout
from ._records import RunResult as RunResult
from ._records import Segment as Segment
from ._records import Send as Send
from ._records import StateSnapshot as StateSnapshot
from ._records import TimeoutDefault as TimeoutDefault
from ._resume import register_answer_details as register_answer_details
from ._signals import InterruptSignal as InterruptSignal
from ._usage import Price as Price
from ._usage import Tally as Tally
from ._usage import UsageTotals as UsageTotals
from ._usage import usage_of as usage_of

__all__ = [
    "RETRY",
    "Address",
    "App",
    "Authority",
    "Change",
    "ChangeOp",
    "CheckpointEvent",
    "Child",
    "ChunkEvent",
    "Command",
    "Continuer",
    "CustomEvent",
    "Decision",
    "Event",
    "EventStream",
    "GracefulShutdown",
    "Graph",
    "Interrupt",
    "InterruptEvent",
    "InterruptHandler",
    "InterruptSignal",
    "NodeOutputEvent",
    "OnTimeout",
    "Price",
    "Principal",
    "Question",
    "Reader",
    "RunFinishedEvent",
    "RunHandle",
    "RunResult",
    "RunStartedEvent",
    "Segment",
    "Send",
    "StateSnapshot",
    "StepEvent",
    "StepFinishedEvent",
    "StreamMode",
    "Tally",
    "Targets",
    "ThreadSummary",
    "TimeoutDefault",
    "UsageTotals",
    "approval_interrupt",
    "approve",
    "ask",
    "check_approvals",
    "child_scope",
    "choose",
    "composite_interrupt",
    "current_address",
    "current_usage",
    "diff_values",
    "effect",
    "effect_key",
    "emit_event",
    "gather_children",
    "interrupt",
    "interrupt_state",
    "keep_limits",
    "listening",
    "needs_confirmation",
    "new_id",
    "register_answer_details",
    "report_usage",
    "resume_context",
    "run_graph",
    "schema_problem",
    "step",
    "stored_schema",
    "timeout_default",
    "usage_of",
    "validator",
]

publish(__name__, globals(), __all__)
