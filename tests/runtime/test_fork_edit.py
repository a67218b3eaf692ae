"""Forking a thread from any checkpoint with an edit of its state, as a node, by an admin."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pydantic
import pytest

from interlock import (
    END,
    START,
    App,
    GraphDefinitionError,
    InvalidStateEdit,
    InvalidUpdate,
    NotAuthorized,
    Principal,
    SqliteStore,
    append,
    interrupt,
)
from interlock import Graph as Graph
from interlock.agents import AssistantMessage, ConversationItem, ToolCall, UserMessage
from interlock.stores import verify_audit

pytestmark = pytest.mark.anyio

ADMIN = Principal(name="Ana", roles=("admin",))


class Order(TypedDict):
    sku: str
    amount: int


class Chat(TypedDict, total=False):
    messages: Annotated[list[ConversationItem], append]
    order: Order
    log: Annotated[list[str], append]


def chat_app(store: SqliteStore, ran: Counter[str]) -> App[Any]:
    """``draft`` replies to the conversation, ``review`` asks a person, ``send`` logs."""

    def draft(s: Chat) -> dict[str, Any]:
        ran["draft"] += 1
        said = [m.content for m in s["messages"] if isinstance(m, UserMessage)]
        return {"messages": [AssistantMessage(content=f"re: {' / '.join(said)}")], "log": ["d"]}

    def review(s: Chat) -> dict[str, Any]:
        ran["review"] += 1
        return {"log": [f"review {interrupt('ok?', key='ok')}"]}

    def send(s: Chat) -> dict[str, Any]:
        ran["send"] += 1
        return {"log": [f"send {s['order']['amount']}"]}

    g = Graph(Chat)
    g.add_node("draft", draft).add_node("review", review).add_node("send", send)
    g.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", "send")
    g.add_edge("send", END)
    return g.compile(store=store)


@pytest.fixture
def store(tmp_path: Path, sqlite_files: Callable[[Path], SqliteStore]) -> SqliteStore:
    return sqlite_files(tmp_path / "fork.db")


async def started(app: App[Any]) -> tuple[str, str]:
    """Run thread ``t`` to its question; return its first checkpoint and the paused one."""
    r = await app.run(
        {"messages": [UserMessage(content="hi")], "order": {"sku": "a", "amount": 5}}, thread="t"
    )
    assert r.status == "interrupted"
    first = (await app.history("t"))[-1].checkpoint_id
    return first, r.checkpoint_id


async def test_values_replace_keys_as_typed_values_and_leave_the_source_as_it_was(
    store: SqliteStore,
) -> None:
    ran: Counter[str] = Counter()
    app = chat_app(store, ran)
    first, paused = await started(app)
    before = [c.id for c in await store.list_checkpoints("t")]
    source_state = (await app.get_state("t")).values
    branch_id = await app.fork(
        "t",
        first,
        "b",
        values={
            "messages": [
                {"role": "user", "content": "hello"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"q": 1}}],
                },
                {"role": "user", "content": "again"},
            ],
            "order": {"sku": "b", "amount": "12"},  # JSON from a form: converted, not kept
        },
        actor="ana",
    )
    branch = await app.get_state("b")
    assert branch.checkpoint_id == branch_id and branch.source == "fork"
    # Replaced whole, not appended through the reducer; dicts became the typed messages.
    assert branch.values["messages"] == [
        UserMessage(content="hello"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="lookup", arguments={"q": 1}),)),
        UserMessage(content="again"),
    ]
    assert branch.values["order"] == {"sku": "b", "amount": 12}
    r = await app.resume("b")
    assert r.status == "interrupted" and ran["draft"] == 2
    assert r.values["messages"][-1] == AssistantMessage(content="re: hello / again")
    r = await app.resume("b", {"ok": "yes"})
    assert r.values["log"] == ["d", "review yes", "send 12"]
    # The source thread keeps its checkpoints, its head and its state.
    assert [c.id for c in await store.list_checkpoints("t")] == before
    head = await store.get_thread("t")
    assert head is not None and head.head_id == paused
    assert (await app.get_state("t")).values == source_state


async def test_an_edit_that_breaks_the_schema_is_refused_and_writes_nothing(
    store: SqliteStore,
) -> None:
    app = chat_app(store, Counter())
    first, _ = await started(app)
    log = await store.audit_log()
    with pytest.raises(InvalidStateEdit) as info:
        await app.fork(
            "t",
            first,
            "b",
            values={
                "messages": [{"role": "user", "content": "x"}, {"role": "user", "content": 3}],
                "order": {"sku": "b"},
                "colour": "red",
            },
        )
    err = info.value
    assert isinstance(err, InvalidUpdate)
    assert sorted(err.problems) == [
        ("/colour", "not a key of the state; its keys: ['log', 'messages', 'order']"),
        ("/messages/1/content", "Expected `str`, got `int`"),
        ("/order", "Object missing required field `amount`"),
    ]
    assert "/messages/1/content" in str(err) and "fork again" in str(err)
    with pytest.raises(InvalidStateEdit, match="fits none of"):
        await app.fork("t", first, "b", values={"messages": [{"role": "robot", "content": "x"}]})
    assert await store.get_thread("b") is None
    assert await store.audit_log() == log


async def test_as_node_plans_that_nodes_successors_and_drops_replaced_questions(
    store: SqliteStore,
) -> None:
    ran: Counter[str] = Counter()
    app = chat_app(store, ran)
    first, paused = await started(app)
    (question,) = (await app.get_state("t")).interrupts
    # From the first checkpoint, as if draft had run: the branch runs review next.
    await app.fork("t", first, "b1", as_node="draft")
    assert (await app.get_state("b1")).next == ("review",)
    r = await app.resume("b1")
    assert r.status == "interrupted" and ran["draft"] == 1
    # From the paused checkpoint, as if review had run: its question is not copied.
    await app.fork("t", paused, "b2", values={"log": ["edited"]}, as_node="review")
    b2 = await app.get_state("b2")
    assert b2.next == ("send",) and b2.interrupts == []
    assert sorted(i.thread for i in await store.pending(limit=10)) == ["b1", "t"]
    r = await app.resume("b2")
    assert r.status == "done" and r.values["log"] == ["edited", "send 5"]
    assert ran["review"] == 2  # thread t's, and b1's; none for b2
    # Without as_node the question is copied under a new id.
    await app.fork("t", paused, "b3")
    (copied,) = (await app.get_state("b3")).interrupts
    assert copied.key == "ok" and copied.id != question.id
    with pytest.raises(GraphDefinitionError, match="'nope' is not a node"):
        await app.fork("t", paused, "b4", as_node="nope")
    assert await store.get_thread("b4") is None


async def test_only_an_admin_principal_forks(store: SqliteStore) -> None:
    app = chat_app(store, Counter())
    first, _ = await started(app)
    log = await store.audit_log()
    for who in (Principal(name="vic"), Principal(name="val", roles=("approver",))):
        with pytest.raises(NotAuthorized, match="needs the 'admin' role") as info:
            await app.fork("t", first, "b", values={"log": ["x"]}, principal=who)
        assert info.value.rule == "admin" and info.value.interrupt_id is None
    assert await store.get_thread("b") is None and await store.audit_log() == log
    await app.fork("t", first, "b", principal=ADMIN)
    assert (await app.get_state("b")).metadata["actor"] == "Ana"


async def test_the_branch_says_where_it_came_from_and_both_logs_record_the_fork(
    store: SqliteStore,
) -> None:
    app = chat_app(store, Counter())
    _, paused = await started(app)
    step = (await app.get_state("t")).step
    branch_id = await app.fork(
        "t", paused, "b", values={"log": ["x"]}, as_node="review", actor="ana", principal=ADMIN
    )
    meta = (await app.get_state("b")).metadata
    assert {k: meta[k] for k in ("forked_from", "actor", "as_node", "edited")} == {
        "forked_from": {"thread": "t", "checkpoint": paused, "step": step},
        "actor": "ana",
        "as_node": "review",
        "edited": ["log"],
    }
    expected = {
        "source": {"thread": "t", "checkpoint": paused},
        "branch": {"thread": "b", "checkpoint": branch_id},
        "as_node": "review",
        "edited": ["log"],
    }
    branch_log = await store.audit_log(thread="b")
    assert branch_log[0].kind == "fork" and branch_log[0].actor == "ana"
    assert json.loads(branch_log[0].data) == expected
    source_last = (await store.audit_log(thread="t"))[-1]
    assert (source_last.kind, source_last.actor) == ("fork", "ana")
    assert json.loads(source_last.data) == expected
    # A plain fork (no edit, no node) is recorded too; Nones are left out of its metadata.
    plain = await app.fork("t", paused, "c")
    meta = (await app.get_state("c")).metadata
    assert "actor" not in meta and "as_node" not in meta and meta["edited"] == []
    assert json.loads((await store.audit_log(thread="t"))[-1].data)["branch"] == {
        "thread": "c",
        "checkpoint": plain,
    }
    assert (await verify_audit(store)).ok


async def test_the_state_schema_describes_every_key(store: SqliteStore) -> None:
    app = chat_app(store, Counter())
    schema = app.state_schema()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"messages", "order", "log"}
    assert schema["properties"]["log"] == {"type": "array", "items": {"type": "string"}}
    assert schema["properties"]["order"] == {"$ref": "#/$defs/Order"}
    assert sorted(schema["$defs"]["Order"]["required"]) == ["amount", "sku"]
    roles = {
        ref["$ref"].rsplit("/", 1)[1] for ref in schema["properties"]["messages"]["items"]["anyOf"]
    }
    assert {"UserMessage", "AssistantMessage", "ToolMessage"} <= roles
    assert schema["$defs"]["UserMessage"]["properties"]["role"] == {"enum": ["user"]}


class Item(pydantic.BaseModel):
    name: str
    qty: int


class Basket(pydantic.BaseModel):
    items: Annotated[list[Item], append] = []
    note: str = ""


async def test_a_pydantic_state_is_checked_and_converted_by_pydantic(store: SqliteStore) -> None:
    g = Graph(Basket)
    g.add_node("count", lambda s: {"note": f"{sum(i.qty for i in s.items)} items"})
    g.add_edge(START, "count").add_edge("count", END)
    app = g.compile(store=store)
    await app.run({"items": [Item(name="a", qty=1)]}, thread="t")
    first = (await app.history("t"))[-1].checkpoint_id
    with pytest.raises(InvalidStateEdit) as info:
        await app.fork("t", first, "b", values={"items": [{"name": "a", "qty": "many"}]})
    ((path, _),) = info.value.problems
    assert path == "/items/0/qty"
    await app.fork(
        "t", first, "b", values={"items": [{"name": "b", "qty": "3"}, Item(name="c", qty=4)]}
    )
    assert (await app.get_state("b")).values["items"] == [
        Item(name="b", qty=3),
        Item(name="c", qty=4),
    ]
    assert (await app.resume("b")).values["note"] == "7 items"
    schema = app.state_schema()
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert schema["$defs"]["Item"]["properties"]["qty"]["type"] == "integer"
