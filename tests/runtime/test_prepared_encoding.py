"""A checkpoint body is encoded walking only what came from the graph: the same bytes as
walking all of it, for every kind of value a state, a task, a question or metadata holds."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, TypedDict

import pytest

from interlock import END, START, Graph, Send, append, interrupt
from interlock.runtime import _persist
from interlock.stores import MemoryStore

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: tuple[int, int]


class State(TypedDict, total=False):
    log: Annotated[list[Any], append]
    point: Point
    big: int


def graph() -> Graph[State]:
    def fan(s: State) -> dict[str, Any]:
        return {"log": [("fan", frozenset({1}))], "point": Point(1, (2, 3))}

    def route(s: State) -> list[Send]:
        return [Send("work", {"i": i, "t": (i, Color.RED), "s": {i}}) for i in range(2)]

    def work(arg: dict[str, Any]) -> dict[str, Any]:
        answer = interrupt({"ask": (arg["i"], "ok?"), "color": Color.RED})
        return {"log": [(arg["i"], answer)], **({"big": 2**70} if arg["i"] == 0 else {})}

    g = Graph(State, types=[Color])
    g.add_node("fan", fan).add_node("work", work)
    g.add_edge(START, "fan").add_conditional_edges("fan", route)
    g.add_edge("work", END)
    return g


async def test_a_body_walked_in_parts_is_the_body_walked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[tuple[dict[str, Any], bytes, bytes]] = []
    encode = _persist.ThreadIO._encode

    def spy(self: _persist.ThreadIO, body: dict[str, Any], level: Any) -> bytes:
        data = encode(self, body, level)
        written.append((body, data, self.codec.encode(body, path="checkpoint")))
        return data

    monkeypatch.setattr(_persist.ThreadIO, "_encode", spy)
    app = graph().compile(store=MemoryStore())
    # Metadata with a tuple, and a `ran` of the caller's (the engine's own is left unwalked).
    odd: dict[str, Any] = {"why": ("a", 1), "ran": [("mine",)]}
    result = await app.run({"log": [{"k": (1, 2)}]}, thread="t", metadata=odd)
    assert result.status == "interrupted"
    await app.resume("t", {i.id: ("yes", {2}) for i in result.interrupts})
    state = await app.get_state("t")
    assert state.values["big"] == 2**70 and state.values["point"] == Point(1, (2, 3))
    assert ("fan", frozenset({1})) in state.values["log"]
    assert len(written) >= 5
    for body, data, whole in written:
        assert data == whole, body
    # Parts the frame does not know were there to be walked: a task's input, a question, a
    # result, user metadata, and a value too large for msgpack (walked whole).
    parts = {key for body, _, _ in written for key in body}
    assert {"ch", "tasks", "pend", "meta"} <= parts


def schema_graph(schema: dict[str, Any]) -> Graph[State]:
    def ask(s: State) -> dict[str, Any]:
        answer = interrupt({"question": "how many?", "limits": [1, 2]}, schema=schema)
        return {"log": [answer]}

    g = Graph(State)
    g.add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    return g


DEEP_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}},
        {"allOf": [{"if": {"const": 1}, "then": {"enum": [1, 2]}}]},
        {"type": "boolean"},
    ]
}


@pytest.mark.parametrize(
    "schema",
    [DEEP_SCHEMA, {"type": "integer", "maximum": 2**70}],
    ids=["json-tree", "int-over-64-bits"],
)
async def test_a_question_and_its_schema_encode_as_walked_whole(
    monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any]
) -> None:
    """Questions and answer schemas skip the walk when a census finds them plain; the bytes
    (checkpoint and inbox row) are those of the whole walk, also for an int msgpack cannot hold."""
    bodies: list[tuple[bytes, bytes]] = []
    rows: list[tuple[bytes, bytes]] = []
    encode, row_bytes = _persist.ThreadIO._encode, _persist.ThreadIO._row_bytes

    def spy_body(self: _persist.ThreadIO, body: dict[str, Any], level: Any) -> bytes:
        data = encode(self, body, level)
        bodies.append((data, self.codec.encode(body, path="checkpoint")))
        return data

    def spy_row(self: _persist.ThreadIO, i: Any) -> bytes:
        data = row_bytes(self, i)
        rows.append((data, self.codec.encode(_persist._row_body(i), path="interrupt")))
        return data

    monkeypatch.setattr(_persist.ThreadIO, "_encode", spy_body)
    monkeypatch.setattr(_persist.ThreadIO, "_row_bytes", spy_row)
    store = MemoryStore()
    result = await schema_graph(schema).compile(store=store).run({}, thread="t")
    assert result.status == "interrupted"
    assert len(rows) == 1 and len(bodies) >= 1
    for data, whole in rows + bodies:
        assert data == whole
    # Read back by another App, as another process would: the same schema, big int included.
    again = schema_graph(schema).compile(store=store)
    [pending] = await again.inbox()
    assert pending.schema == schema and pending.info == {"question": "how many?", "limits": [1, 2]}
    (state_interrupt,) = (await again.get_state("t")).interrupts
    assert state_interrupt.schema == schema


@pytest.mark.parametrize(
    "info",
    [
        {"question": "Allow it?", "schema": DEEP_SCHEMA, "arguments": {"n": 1}},
        {"question": "how many?", "limit": 2**70},
        {"ask": ("a tuple", 1), "color": Color.RED},
        "just text",
    ],
    ids=["json-tree", "int-over-64-bits", "registered-types", "scalar"],
)
@pytest.mark.parametrize("decider", [None, "ops"], ids=["anyone", "with-authority"])
def test_a_payload_hash_is_that_of_the_question_walked_whole(
    info: Any, decider: str | None
) -> None:
    """A question's hash takes the census's path when it can, over the very bytes the whole
    walk gives: hashes stored or shown before stay valid."""
    import hashlib

    import msgspec

    from interlock.runtime import Authority, Interrupt
    from interlock.runtime._records import Address
    from interlock.runtime._resume import payload_hash
    from interlock.serde import Codec

    codec = Codec()
    codec.register(Color)
    authority = None if decider is None else Authority(groups=(decider,))
    record = Interrupt(
        id="i",
        key=None,
        address=Address(()),
        kind="dynamic",
        info=info,
        created_at=0.0,
        authority=authority,
    )
    value = info if authority is None else [info, msgspec.to_builtins(authority)]
    whole = codec.encode(value, path="info")
    assert payload_hash(codec, record) == hashlib.blake2b(whole, digest_size=16).hexdigest()


async def test_usage_totals_in_metadata_encode_as_walked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The usage totals in a checkpoint's metadata get a census, not a walk: the same bytes."""
    from interlock.graph import Usage
    from interlock.runtime import report_usage

    written: list[tuple[bytes, bytes, dict[str, Any]]] = []
    encode = _persist.ThreadIO._encode

    def spy(self: _persist.ThreadIO, body: dict[str, Any], level: Any) -> bytes:
        data = encode(self, body, level)
        written.append((data, self.codec.encode(body, path="checkpoint"), body["meta"]))
        return data

    def call(s: State) -> dict[str, Any]:
        report_usage(Usage(input_tokens=7, output_tokens=2), model="m")
        return {"log": [interrupt("go on?")]}

    monkeypatch.setattr(_persist.ThreadIO, "_encode", spy)
    g = Graph(State)
    g.add_node("call", call).add_edge(START, "call").add_edge("call", END)
    app = g.compile(store=MemoryStore())
    result = await app.run({}, thread="t", metadata={"who": ("a", 1)})
    await app.resume("t", {result.interrupts[0].id: "yes"})
    assert any(isinstance(meta.get("usage"), dict) for _, _, meta in written)
    for data, whole, _ in written:
        assert data == whole
