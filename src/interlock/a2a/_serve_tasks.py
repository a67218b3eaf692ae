"""A2A tasks as views of interlock threads: their status, their questions, their store.

A task's id is its thread's id, and the run that starts it records the task's context id in
its metadata (``a2a_context``): the thread is the durable record, and a server that restarts
rebuilds a task it has not seen from its thread. The SDK's task store (`ThreadTasks`) keeps
the tasks this process has seen, with their history, and rebuilds the others.

Status mapping (invariant: a thread with a pending question is never shown ``working``):

- a pending approval of a tool call (``info["type"] == APPROVAL``) → ``auth-required``;
- any other pending question, or an external pause → ``input-required``;
- ``done`` → ``completed``, the answer as an artifact and as the status message;
- ``failed`` → ``failed``, with why, written for a person;
- ``ready`` (being continued) → ``working``.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec
from a2a.helpers.proto_helpers import get_data_parts, new_data_part
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

from .._errors import CheckpointNotFound
from ..agents import APPROVAL
from ..runtime import App, Interrupt
from ..server import Identity

__all__ = [
    "CONTEXT_KEY",
    "IDENTITY_KEY",
    "ThreadTasks",
    "agent_message",
    "answer_of",
    "asked_in",
    "identity_of",
    "is_approval",
    "json_value",
    "question_message",
    "question_state",
]

CONTEXT_KEY: Final = "a2a_context"
"""The run metadata key that records a task's context id with its thread."""

IDENTITY_KEY: Final = "interlock.identity"
"""Where a call's `Identity` is kept in the SDK's ``ServerCallContext.state``."""

_CACHED: Final = 1000
"""How many tasks a store keeps in memory; the others are rebuilt from their threads."""


def identity_of(context: ServerCallContext) -> Identity | None:
    """The identity the server authenticated for a call (None: the server checks no tokens)."""
    found = context.state.get(IDENTITY_KEY)
    return found if isinstance(found, Identity) else None


def json_value(value: Any) -> Any:
    """``value`` as plain JSON data (what a protobuf ``Struct`` holds)."""
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=repr))


def agent_message(
    task_id: str,
    context_id: str,
    text: str,
    data: Sequence[Any] = (),
    *,
    message_id: str | None = None,
) -> Message:
    """A message from the agent: a text part, then a data part for each of ``data``
    (``message_id``: a fresh one unless given)."""
    parts = [Part(text=text)] + [new_data_part(json_value(d)) for d in data]
    return Message(
        message_id=message_id or uuid.uuid4().hex,
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def is_approval(interrupt: Interrupt) -> bool:
    return isinstance(interrupt.info, Mapping) and interrupt.info.get("type") == APPROVAL


def question_state(interrupts: Sequence[Interrupt]) -> TaskState:
    """``auth-required`` when an approval waits, else ``input-required``."""
    if any(is_approval(i) for i in interrupts):
        return TaskState.TASK_STATE_AUTH_REQUIRED
    return TaskState.TASK_STATE_INPUT_REQUIRED


def _question_data(app: App[Any], interrupt: Interrupt) -> dict[str, Any]:
    """What a caller needs to answer one question (the web inbox shows the same)."""
    info = interrupt.info if isinstance(interrupt.info, Mapping) else {"question": interrupt.info}
    authority = app.who_decides(interrupt)
    data: dict[str, Any] = {
        "interrupt": interrupt.id,
        "kind": "approval" if is_approval(interrupt) else "question",
        "thread": interrupt.thread,
        "address": str(interrupt.address),
        "question": info.get("question"),
        "answer_schema": interrupt.schema,
        "who": authority.describe(interrupt.started_by) if authority else "anyone",
        "approvals": interrupt.approvals,
        "approved_by": list(interrupt.approved_by),
    }
    for key in ("agent", "tool", "arguments", "schema", "description", "call_id", "rule"):
        if key in info:
            data[key] = info[key]
    return {k: v for k, v in data.items() if v is not None}


def _question_text(data: Mapping[str, Any]) -> str:
    if data["kind"] == "approval":
        call = f"{data.get('tool')}({json_value(data.get('arguments'))})"
        asks = data.get("question") or f"May the agent call {call}?"
        how = (
            'answer "approve" or "reject", or a data part {"interrupt": id, "decision": '
            '"approve" | "edit" | "reject", ...}'
        )
    else:
        asks = str(data.get("question") or "The agent asks a question.")
        how = 'answer with text, or a data part {"interrupt": id, "answer": ...}'
    votes = f" ({len(data['approved_by'])} of {data['approvals']} approvals)"
    quorum = votes if data["approvals"] > 1 else ""
    return f"{asks}{quorum} Who may decide: {data['who']}. Interrupt {data['interrupt']}: {how}."


def question_message(
    app: App[Any], task_id: str, context_id: str, interrupts: Sequence[Interrupt], notes: str = ""
) -> Message:
    """The status message of a task that waits: each question in words and as data."""
    asked = [_question_data(app, i) for i in interrupts if i.needs_answer]
    if not asked:
        text = "The run is paused: send any message to continue it."
        return agent_message(task_id, context_id, f"{notes}{text}")
    text = " ".join(_question_text(d) for d in asked)
    # Named by the questions it asks, so that a server restarted on the same store, which
    # rebuilds the task from its thread, asks with the same message: a caller that keys
    # what it was asked by the status message's id sees one question, not a second one.
    asking = "question:" + "+".join(d["interrupt"] for d in asked)
    return agent_message(task_id, context_id, f"{notes}{text}", asked, message_id=asking)


def asked_in(task: Task) -> list[str]:
    """The ids of the questions a task's status message shows."""
    return [
        item["interrupt"]
        for item in get_data_parts(list(task.status.message.parts))
        if isinstance(item, Mapping) and isinstance(item.get("interrupt"), str)
    ]


def answer_of(values: Mapping[str, Any]) -> str:
    """The agent's answer in a finished thread: its last message's text (or the state)."""
    messages = values.get("messages")
    if isinstance(messages, Sequence) and messages:
        content = getattr(messages[-1], "content", None)
        if isinstance(content, str):
            return content
    return msgspec.json.encode(json_value(dict(values))).decode()


def _copy(task: Task) -> Task:
    """A copy the SDK may change (it clears fields of what it lists) without changing ours."""
    copied = Task()
    copied.CopyFrom(task)
    return copied


class ThreadTasks(TaskStore):
    """The SDK's task store over an App's threads.

    The tasks this process saw are kept in memory (the last 1000); any other task is rebuilt
    from its thread, so a server that restarts finds every task a run started over A2A. A
    call whose identity's thread scope leaves a task's thread out does not see the task.
    """

    def __init__(self, app: App[Any]) -> None:
        self._app = app
        self._tasks: OrderedDict[str, Task] = OrderedDict()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Keep the task as the SDK last wrote it."""
        self._tasks[task.id] = _copy(task)
        self._tasks.move_to_end(task.id)
        while len(self._tasks) > _CACHED:
            self._tasks.popitem(last=False)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, from memory or rebuilt from its thread; None if there is none to see."""
        identity = identity_of(context)
        if identity is not None and not identity.sees_thread(task_id):
            return None
        kept = self._tasks.get(task_id)
        if kept is None:
            kept = await self.rebuild(task_id)
            if kept is None:
                return None
            self._tasks[task_id] = kept
        return _copy(kept)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The tasks this process keeps in memory that the call may see."""
        identity = identity_of(context)
        tasks = [
            _copy(t)
            for t in self._tasks.values()
            if (identity is None or identity.sees_thread(t.id))
            and (not params.context_id or t.context_id == params.context_id)
        ]
        return ListTasksResponse(tasks=tasks, total_size=len(tasks), page_size=len(tasks))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the task here; its thread stays (threads are deleted by their own means)."""
        self._tasks.pop(task_id, None)

    async def context_of(self, thread: str) -> str | None:
        """The context id the run that started ``thread`` recorded; None for a thread no A2A
        call started."""
        try:
            snapshot = await self._app.get_state(thread)
        except CheckpointNotFound:
            return None
        found = snapshot.metadata.get(CONTEXT_KEY)
        if isinstance(found, str):
            return found
        # Another surface continued the thread since: its first run recorded the context.
        before: str | None = None
        while True:
            page = await self._app.history(thread, limit=50, before=before)
            for older in page:
                found = older.metadata.get(CONTEXT_KEY)
                if isinstance(found, str):
                    return found
            if len(page) < 50:
                return None
            before = page[-1].checkpoint_id

    async def rebuild(self, task_id: str) -> Task | None:
        """The task of thread ``task_id`` as its latest checkpoint shows it."""
        context_id = await self.context_of(task_id)
        if context_id is None:
            return None
        snapshot = await self._app.get_state(task_id)
        task = Task(id=task_id, context_id=context_id)
        if snapshot.status in ("interrupted", "paused"):
            state = question_state(snapshot.interrupts)
            message = question_message(self._app, task_id, context_id, snapshot.interrupts)
        elif snapshot.status == "done":
            state = TaskState.TASK_STATE_COMPLETED
            answer = answer_of(snapshot.values)
            message = agent_message(task_id, context_id, answer)
            task.artifacts.append(
                Artifact(artifact_id="answer", name="answer", parts=message.parts)
            )
        elif snapshot.status == "failed":
            state = TaskState.TASK_STATE_FAILED
            why = snapshot.metadata.get("error") or "the run failed"
            message = agent_message(task_id, context_id, f"The agent failed: {why}")
        else:
            state = TaskState.TASK_STATE_WORKING
            message = agent_message(task_id, context_id, "The agent is working.")
        task.status.CopyFrom(TaskStatus(state=state, message=message))
        return task
