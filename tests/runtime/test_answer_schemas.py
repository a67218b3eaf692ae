"""Answers are checked against their interrupt's schema, every keyword of it, before any change.

A refused answer leaves the store as it was and the interrupt answerable; the answer that passes
reaches the node as the type the node asked for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import msgspec
import pydantic
import pytest

from interlock import (
    START,
    Graph,
    GraphDefinitionError,
    InvalidResume,
    NodeError,
    Store,
    interrupt,
    timeout_default,
)
from interlock.runtime import _jsonschema
from interlock.stores import PendingFilter

pytestmark = pytest.mark.anyio


class S(TypedDict, total=False):
    answer: Any


def asking(schema: Any, **kwargs: Any) -> Graph[S]:
    """One node that asks with ``schema`` and keeps the answer."""
    g = Graph(S, types=[Refund, Payee])
    g.add_node("ask", lambda s: {"answer": interrupt("q", key="q", schema=schema, **kwargs)})
    g.add_edge(START, "ask")
    return g


async def snapshot(store: Store, iid: str) -> tuple[Any, ...]:
    """Everything a refused answer must leave untouched."""
    return (
        await store.get_checkpoint("t"),
        await store.get_thread("t"),
        await store.get_interrupt(iid),
        await store.audit_log(thread="t"),
        await store.pending(PendingFilter(thread="t")),
    )


# (schema, an answer it refuses, an answer it accepts)
CASES: dict[str, tuple[dict[str, Any], Any, Any]] = {
    "pattern": ({"type": "string", "pattern": "^[0-9]+$"}, "abc", "123"),
    "format-email": ({"type": "string", "format": "email"}, "ada.example.com", "ada@example.com"),
    "format-date": ({"type": "string", "format": "date"}, "2024-02-30", "2024-02-29"),
    "format-ipv4": ({"type": "string", "format": "ipv4"}, "10.0.0.256", "10.0.0.255"),
    "exclusiveMinimum": ({"type": "number", "exclusiveMinimum": 0}, 0, 0.5),
    "exclusiveMaximum": ({"type": "integer", "exclusiveMaximum": 10}, 10, 9),
    "minimum": ({"type": "integer", "minimum": 1}, 0, 1),
    "multipleOf": ({"type": "integer", "multipleOf": 5}, 7, 15),
    "uniqueItems": ({"type": "array", "uniqueItems": True}, ["a", "a"], ["a", "b"]),
    # 12 fits both branches, and oneOf means exactly one.
    "oneOf": ({"oneOf": [{"type": "integer"}, {"minimum": 10}]}, 12, 5),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "1", None),
    "allOf": ({"allOf": [{"type": "string"}, {"minLength": 3}]}, "ab", "abc"),
    "not": ({"type": "string", "not": {"enum": ["root", "admin"]}}, "root", "ada"),
    "const": ({"const": "confirm"}, "confirmed", "confirm"),
    "enum": ({"enum": [1, 2, 3]}, 4, 3),
    "if-then-else": (
        {
            "type": "object",
            "if": {"properties": {"kind": {"const": "wire"}}, "required": ["kind"]},
            "then": {"required": ["iban"]},
            "else": {"required": ["email"]},
        },
        {"kind": "wire", "email": "a@b.c"},
        {"kind": "wire", "iban": "DE89370400440532013000"},
    ),
    "$ref-$defs": (
        {
            "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            "type": "object",
            "properties": {"from": {"$ref": "#/$defs/code"}, "to": {"$ref": "#/$defs/code"}},
        },
        {"from": "EUR", "to": "yen"},
        {"from": "EUR", "to": "JPY"},
    ),
    "additionalProperties": (
        {"type": "object", "properties": {"note": {}}, "additionalProperties": {"type": "integer"}},
        {"note": "x", "amount": "5"},
        {"note": "x", "amount": 5},
    ),
    "additionalProperties-false": (
        {"type": "object", "properties": {"ok": {}}, "additionalProperties": False},
        {"ok": True, "extra": 1},
        {"ok": True},
    ),
    "minItems": ({"type": "array", "minItems": 2}, [1], [1, 2]),
    "maxItems": ({"type": "array", "maxItems": 1}, [1, 2], [1]),
    "minLength": ({"type": "string", "minLength": 2}, "a", "ab"),
    "maxLength": ({"type": "string", "maxLength": 2}, "abc", "ab"),
    "required": ({"type": "object", "required": ["reason"]}, {}, {"reason": "ok"}),
    "dependentRequired": (
        {"type": "object", "dependentRequired": {"refund": ["amount"]}},
        {"refund": True},
        {"refund": True, "amount": 5},
    ),
    "propertyNames": (
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        {"A": 1},
        {"a": 1},
    ),
    "prefixItems": (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        ["a", "b"],
        ["a", 1],
    ),
    "contains": ({"type": "array", "contains": {"const": "yes"}}, ["no"], ["no", "yes"]),
    "type-integer-not-bool": ({"type": "integer"}, True, 1),
    # The draft a schema names is the draft it is checked by: here items as a list is a tuple.
    "$schema-draft-07": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array",
            "items": [{"type": "string"}],
            "additionalItems": False,
        },
        ["a", 1],
        ["a"],
    ),
}


@pytest.mark.parametrize("via", ["resume", "decide"])
@pytest.mark.parametrize("case", list(CASES))
async def test_a_refused_answer_changes_nothing_and_a_valid_one_passes(
    store: Store, case: str, via: str
) -> None:
    schema, bad, good = CASES[case]
    app = asking(schema).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    before = await snapshot(store, iid)
    attempt = app.resume("t", {iid: bad}) if via == "resume" else app.decide("t", {"q": bad})
    with pytest.raises(InvalidResume) as refused:
        await attempt
    assert refused.value.interrupt_id == iid
    assert iid in str(refused.value)
    assert await snapshot(store, iid) == before
    # Still answerable: nothing was committed.
    if via == "resume":
        done = await app.resume("t", {iid: good})
    else:
        (decision,) = await app.decide("t", {"q": good}, actor="ana")
        assert decision.answer == good
        done = await app.resume("t")
    assert done.status == "done"
    assert done.values["answer"] == good


async def test_a_message_names_where_the_answer_is_wrong(store: Store) -> None:
    schema = {
        "type": "object",
        "properties": {"lines": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
    }
    app = asking(schema).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    with pytest.raises(
        InvalidResume, match=r"answer\.lines\[1\]: -3 is less than the minimum of 0"
    ):
        await app.resume("t", {iid: {"lines": [1, -3]}})


class Refund(msgspec.Struct):
    order: Annotated[str, msgspec.Meta(pattern="^ord-[0-9]+$")]
    amount: Annotated[int, msgspec.Meta(gt=0, le=10_000)]
    when: datetime | None = None


async def test_a_struct_schema_refuses_before_committing_and_converts_after(store: Store) -> None:
    """The bad answer used to be committed; the node then failed and the thread was stuck."""
    app = asking(Refund).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    assert iid
    before = await snapshot(store, iid)
    for bad in (
        {"order": "42", "amount": 5},  # Meta(pattern=)
        {"order": "ord-42", "amount": 0},  # Meta(gt=)
        {"order": "ord-42"},  # a required field
        {"order": "ord-42", "amount": 5, "when": "yesterday"},  # not a datetime
    ):
        with pytest.raises(InvalidResume):
            await app.decide("t", {iid: bad})
        with pytest.raises(InvalidResume):
            await app.resume("t", {iid: bad})
    assert await snapshot(store, iid) == before
    done = await app.resume(
        "t", {iid: {"order": "ord-42", "amount": 5, "when": "2026-01-02T03:04:05Z"}}
    )
    assert done.status == "done"
    assert done.values["answer"] == Refund(
        order="ord-42", amount=5, when=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    )


class Payee(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=1)
    iban: str = pydantic.Field(pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$")
    amount: float = pydantic.Field(gt=0)

    @pydantic.field_validator("name")
    @classmethod
    def no_shouting(cls, v: str) -> str:
        if v.isupper():
            raise ValueError("write the name as the person writes it")
        return v


async def test_a_pydantic_model_is_a_schema(store: Store) -> None:
    app = asking(Payee).compile(store=store)
    r = await app.run({}, thread="t")
    question = r.interrupt()
    assert question.schema is not None
    assert question.schema["properties"]["iban"]["pattern"].startswith("^[A-Z]{2}")
    iid = question.id
    before = await snapshot(store, iid)
    for bad, why in (
        ({"name": "Ada", "iban": "not an iban", "amount": 5}, "does not match"),
        ({"name": "Ada", "iban": "DE89370400440532013000", "amount": 0}, "less than or equal"),
        ({"name": "Ada", "iban": "DE89370400440532013000"}, "'amount' is a required property"),
        # A check the JSON Schema cannot carry: the model's own validator runs too.
        ({"name": "ADA", "iban": "DE89370400440532013000", "amount": 5}, "as the person writes"),
    ):
        with pytest.raises(InvalidResume, match=why):
            await app.resume("t", {iid: bad})
    assert await snapshot(store, iid) == before
    good = Payee(name="Ada", iban="DE89370400440532013000", amount=5)
    with pytest.raises(InvalidResume, match="does not match"):
        await app.resume("t", {iid: good.model_copy(update={"iban": "DE"})})  # not re-validated
    done = await app.resume("t", {iid: good.model_dump()})
    assert done.values["answer"] == good

    # An instance of the model is an answer too.
    iid = (await app.run({}, thread="t2")).interrupt().id
    assert (await app.resume("t2", {iid: good})).values["answer"] == good


async def test_a_type_schema_is_stored_as_json(store: Store) -> None:
    app = asking(Refund).compile(store=store)
    iid = (await app.run({}, thread="t")).interrupt().id
    (record,) = await store.pending(PendingFilter(thread="t"))
    (shown,) = await app.inbox()
    assert shown.schema is not None
    assert msgspec.json.decode(msgspec.json.encode(shown.schema)) == shown.schema
    assert shown.schema["$defs"]["Refund"]["properties"]["order"]["pattern"] == "^ord-[0-9]+$"
    assert record.id == iid


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": "string", "pattern": "[unclosed"},
        {"type": "integer", "minimum": "5"},
        {"type": "array", "minItems": -1},
        {"$ref": "#/$defs/missing"},
        {"$ref": "https://example.com/answer.json"},
        {"enum": [object()]},
    ],
    ids=["type", "pattern", "minimum", "minItems", "local-ref", "remote-ref", "not-json"],
)
async def test_an_invalid_schema_is_refused_where_interrupt_is_called(
    store: Store, schema: dict[str, Any]
) -> None:
    app = asking(schema).compile(store=store)
    with pytest.raises(NodeError) as failed:
        await app.run({}, thread="t")
    assert isinstance(failed.value.__cause__, GraphDefinitionError)
    assert "schema" in str(failed.value.__cause__)
    assert await store.pending(PendingFilter(thread="t")) == []


async def test_a_type_msgspec_cannot_describe_is_refused(store: Store) -> None:
    app = asking(object()).compile(store=store)
    with pytest.raises(NodeError) as failed:
        await app.run({}, thread="t")
    assert isinstance(failed.value.__cause__, GraphDefinitionError)


def test_one_validator_per_distinct_schema() -> None:
    """Compiling a schema costs far more than checking an answer; equal schemas share one."""
    a = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}
    b = {"properties": {"n": {"multipleOf": 3, "type": "integer"}}, "type": "object"}
    assert _jsonschema.compiled(a) is _jsonschema.compiled(b)
    assert _jsonschema.compiled(a) is not _jsonschema.compiled({"type": "string"})
    assert _jsonschema.check({"n": 4}, a) is not None
    assert _jsonschema.check({"n": 6}, b) is None


def test_a_stored_schema_is_a_fresh_copy_of_what_it_was_given_each_time() -> None:
    """Schemas are checked once per distinct JSON and copied from a kept form: each copy
    equals the schema as given then (a dict changed in place is a new schema), shares no
    dict or list with another, and keeps an int over 64 bits."""
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"enum": [1, 2.5, None]}}}
    first = _jsonschema.stored_schema(schema)
    second = _jsonschema.stored_schema(schema)
    assert first == second == schema
    assert first is not second and first["properties"] is not second["properties"]
    first["properties"]["n"]["enum"].append(3)
    assert _jsonschema.stored_schema(schema) == schema  # the kept form was not touched
    schema["properties"]["n"] = {"type": "integer", "maximum": 2**70}
    big = _jsonschema.stored_schema(schema)
    assert big == schema and big["properties"]["n"]["maximum"] == 2**70
    schema["properties"]["n"] = {"type": "nonsense"}
    with pytest.raises(GraphDefinitionError):
        _jsonschema.stored_schema(schema)  # refused every time, not only the first
    with pytest.raises(GraphDefinitionError):
        _jsonschema.stored_schema(schema)
    assert _jsonschema.check(3, {"maximum": 2}) is not None
    assert _jsonschema.check(3, {"maximum": 2**70}) is None


async def test_a_naive_deadline_is_refused(store: Store) -> None:
    app = asking({"type": "string"}, deadline=datetime(2030, 1, 1)).compile(store=store)
    with pytest.raises(NodeError) as failed:
        await app.run({}, thread="t")
    cause = failed.value.__cause__
    assert isinstance(cause, ValueError)
    assert "deadline" in str(cause) and "aware" in str(cause)
    assert await store.pending(PendingFilter(thread="t")) == []


async def test_an_aware_deadline_is_kept_as_given(store: Store) -> None:
    due = datetime(2030, 1, 1, 9, 0, tzinfo=UTC) + timedelta(minutes=30)
    app = asking({"type": "string"}, deadline=due).compile(store=store)
    r = await app.run({}, thread="t")
    assert r.interrupt().deadline == due.timestamp()


async def test_a_timeout_default_the_schema_refuses_is_refused(store: Store) -> None:
    """The sweep commits the default as the decision: it must satisfy the schema too."""
    refused = asking({"type": "integer"}, deadline=60, on_timeout=timeout_default("late"))
    with pytest.raises(NodeError) as failed:
        await refused.compile(store=store).run({}, thread="t")
    assert isinstance(failed.value.__cause__, GraphDefinitionError)
    assert "timeout_default('late')" in str(failed.value.__cause__)

    app = asking({"type": "integer"}, deadline=60, on_timeout=timeout_default(0)).compile(
        store=store
    )
    question = (await app.run({}, thread="t2")).interrupt()
    assert question.deadline is not None
    (done,) = await app.sweep(now=question.deadline + 1)
    assert done.status == "done" and done.values["answer"] == 0
