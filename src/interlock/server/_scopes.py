"""What an identity may read: the parts of a thread that concern tools outside its scope, left out.

An identity's scopes (`Identity.tools`, `Identity.threads`) bound what it may see as well as
what it may decide. A thread outside its prefixes, and a question outside its scopes, do not
exist for it: the API answers for them exactly as for an unknown id. Within a thread it may
see, what is recorded as a tool's is left out when the tool is outside its tool patterns:

- a call to the tool in an assistant message's ``tool_calls``, the tool message that answers
  it, an assistant message left with neither text nor calls, and a conversation edit whose
  message is left out (`strip_calls`, on the JSON form of the state);
- an audit entry about a question of the tool (`interrupt_ids`), or about a dangerous call
  made within one of its calls (`effect_tool`);
- the events about its questions (`visible_event`), and the deliveries of those events.

A question that gates no tool counts as the tool ``""``, as in the inbox. Text that no record
ties to a tool (what a model writes, a state value of the graph's own) is shown to whoever
sees the thread; a run's failure reason is free text that a tool can write (a tool that
raises), so only an identity that sees every tool reads it (`reads_failures`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import msgspec

from ..runtime import Segment
from ..stores import InterruptRecord
from ._auth import Identity
from ._events import EventType
from ._views import AuditItem

__all__ = [
    "effect_tool",
    "interrupt_ids",
    "opaque",
    "reads_failures",
    "sees_every_tool",
    "strip_calls",
    "visible_audit",
    "visible_event",
]


class _Gone:
    """Marks a value left out of its list or object."""


_GONE: Final = _Gone()


def sees_every_tool(identity: Identity) -> bool:
    """Whether ``identity``'s tool scope is every tool (nothing of a thread is left out)."""
    return "*" in identity.tools


def reads_failures(identity: Identity) -> bool:
    """Whether ``identity`` reads why a run failed (the reason may quote any tool's call)."""
    return sees_every_tool(identity)


def visible_event(identity: Identity, type: EventType, thread: str, tool: str | None) -> bool:
    """Whether an event (or a delivery of one) is within ``identity``'s scopes: a run's events
    go with its thread, a question's with its thread and its tool."""
    if not identity.sees_thread(thread):
        return False
    return type.startswith("run.") or identity.sees_tool(tool)


def strip_calls(identity: Identity, value: Any) -> Any:
    """``value`` (JSON builtins, e.g. a thread's state) without what concerns the tools outside
    ``identity``'s scope.

    Calls are found by shape, in the messages of `interlock.agents` and the OpenAI chat form:
    an object with a ``tool_calls`` list names each call's tool (``name``, or
    ``function.name``) and id; an object with ``role`` ``"tool"`` answers the call its
    ``tool_call_id`` names (and names the tool in ``name``). Everything else is kept.
    """
    if sees_every_tool(identity):
        return value
    hidden = _hidden_call_ids(identity, value)
    kept = _strip(identity, value, hidden)
    return None if kept is _GONE else kept


def _call_name(call: Any) -> str | None:
    if not isinstance(call, dict):
        return None
    name = call.get("name")
    function = call.get("function")
    if name is None and isinstance(function, dict):
        name = function.get("name")
    return name if isinstance(name, str) else None


def _hidden_call(identity: Identity, call: Any) -> bool:
    # A call that names no tool cannot be told apart from one outside the scope: left out,
    # as a question that gates no tool is from an identity whose patterns do not match "".
    return not identity.sees_tool(_call_name(call))


def _hidden_call_ids(identity: Identity, value: Any) -> set[str]:
    """The ids of the calls to tools outside the scope, anywhere in ``value``."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            calls = item.get("tool_calls")
            if isinstance(calls, list | tuple):
                for call in calls:
                    call_id = call.get("id") if isinstance(call, dict) else None
                    if isinstance(call_id, str) and _hidden_call(identity, call):
                        found.add(call_id)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def _hidden_answer(identity: Identity, item: dict[str, Any], hidden: set[str]) -> bool:
    """Whether ``item`` is a tool message answering a call left out (or naming its tool)."""
    if item.get("role") != "tool":
        return False
    name = item.get("name")
    return item.get("tool_call_id") in hidden or (
        isinstance(name, str) and not identity.sees_tool(name)
    )


def _strip(identity: Identity, value: Any, hidden: set[str]) -> Any:
    if isinstance(value, list | tuple):  # `plain` keeps a tuple a tuple
        items = (_strip(identity, item, hidden) for item in value)
        return [item for item in items if item is not _GONE]
    if not isinstance(value, dict):
        return value
    if _hidden_answer(identity, value, hidden):
        return _GONE
    out: dict[str, Any] = {}
    emptied = False
    for key, child in value.items():
        if key == "tool_calls" and isinstance(child, list | tuple):
            calls = [c for c in child if not _hidden_call(identity, c)]
            emptied = bool(child) and not calls
            out[key] = calls
            continue
        kept = _strip(identity, child, hidden)
        if kept is _GONE:
            if key == "message":  # a conversation edit of a message left out goes with it
                return _GONE
            continue
        out[key] = kept
    if emptied and not out.get("content"):
        return _GONE  # an assistant message whose every call was left out, and no text
    return out


def interrupt_ids(data: Any) -> list[str]:
    """The interrupts an audit entry's data is about (``interrupt``, or ``interrupts``)."""
    if not isinstance(data, dict):
        return []
    one = data.get("interrupt")
    many = data.get("interrupts")
    found = [one] if isinstance(one, str) else []
    if isinstance(many, list | tuple):
        found += [i for i in many if isinstance(i, str)]
    return found


def effect_tool(data: Any) -> str | None:
    """The tool within whose call an ``effect_*`` audit entry's call was made, if any.

    Invariant: an effect's key is ``LINEAGE/TASK/ADDRESS|NAME`` (the runtime's
    ``effect_key``): the address, rendered ``node:tools/agent:ops/tool:refund:CALL``, ends at
    the innermost tool call, as a question's tool is the innermost tool of its address.
    """
    key = data.get("effect") if isinstance(data, dict) else None
    if not isinstance(key, str):
        return None
    where = key.partition("|")[0]
    for part in reversed(where.split("/")):
        if part.startswith("tool:"):
            try:
                return Segment.parse(part).name
            except ValueError:
                return None
    return None


async def visible_audit(
    identity: Identity,
    items: Sequence[AuditItem],
    question: Callable[[str], Awaitable[InterruptRecord | None]],
) -> list[AuditItem]:
    """The audit entries of a thread ``identity`` sees that are within its tool scope.

    ``question`` reads an interrupt's record (its tool); each is read once. An entry about
    several questions (``dropped``) keeps those in scope, and goes when none is.
    """
    if sees_every_tool(identity):
        return list(items)
    known: dict[str, bool] = {}

    async def sees(interrupt_id: str) -> bool:
        if interrupt_id not in known:
            row = await question(interrupt_id)
            # A question whose record is gone cannot be placed: it is left out.
            known[interrupt_id] = row is not None and identity.sees_tool(row.tool)
        return known[interrupt_id]

    out: list[AuditItem] = []
    for item in items:
        ids = interrupt_ids(item.data)
        if ids:
            shown = [i for i in ids if await sees(i)]
            if not shown:
                continue
            if len(shown) < len(ids):
                item = msgspec.structs.replace(item, data={**item.data, "interrupts": shown})
        elif item.kind.startswith("effect_"):
            tool = effect_tool(item.data)
            if tool is not None and not identity.sees_tool(tool):
                continue
        out.append(item)
    return out


def opaque(value: Any) -> str:
    """What an identity limited to some tools reads in place of a value that is not JSON (its
    text could hold anything, and cannot be filtered)."""
    return "(not shown)"
