"""Answer schemas: JSON Schema checked by the `jsonschema` library, and types that describe one.

An interrupt stores its answer schema as plain JSON, so that whatever process resumes the thread
checks answers from stored data alone, *before* anything is committed. The check is the whole
standard — Draft 2020-12 unless the schema's ``$schema`` names another draft — with ``format``
enforced for every format `jsonschema` can check in this process (``date``, ``email``,
``ipv4``/``ipv6``, ``uuid``, ``regex``..., more with ``jsonschema[format]`` installed). A
hand-written subset would silently accept what it does not know.

A type given as the schema (a msgspec Struct or any type msgspec can describe, or a pydantic
model) is stored as its JSON Schema, marked with `TYPE_KEYWORD`. The answer must also convert to
that type wherever the type is known (a registry by name, like validators): checks the JSON
Schema cannot carry — a datetime string, a pydantic field validator — refuse the answer instead
of failing the node after the answer was committed.

Invariant: a validator is built once per distinct schema (cached by its canonical JSON), and the
schema itself is checked once, where `interrupt()` is called.

`jsonschema` and `referencing` are imported on first use, not with this module: together they
are most of what `import interlock` would otherwise cost, and a graph without answer schemas
never needs them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

from .._errors import GraphDefinitionError

__all__ = ["TYPE_KEYWORD", "check", "compiled", "convert", "stored_schema"]

TYPE_KEYWORD: Final = "x-interlock-type"
"""The annotation naming the type an answer converts to (JSON Schema ignores it)."""

_CACHED: Final = 512  # distinct schemas kept compiled; a graph has a handful
_SHOWN: Final = 300  # characters of a refusal message, so a huge answer is not echoed whole

_Converter = Callable[[Any], Any]
_ANSWER_TYPES: dict[str, _Converter] = {}


def stored_schema(schema: type[Any] | Mapping[str, Any]) -> dict[str, Any]:
    """Return ``schema`` as the JSON stored with an interrupt, refusing one that cannot work.

    Raises:
        GraphDefinitionError: The schema is not JSON, not a valid JSON Schema, refers to
            something it does not hold, or is a type neither msgspec nor pydantic can describe.
    """
    if isinstance(schema, Mapping):
        schema = dict(schema)  # any Mapping at the top, like MappingProxyType
        try:
            plain = msgspec.json.encode(schema)
        except (TypeError, ValueError, OverflowError) as exc:
            raise GraphDefinitionError(
                f"schema= must be JSON (dicts, lists, strings, numbers, booleans, null): {exc}"
            ) from exc
        packed = _checked_json(plain)
        if packed is not None:
            # A fresh copy for every interrupt (the record must not share a dict with the
            # cache), from msgpack: the same values as decoding the JSON, about twice as fast.
            fresh: dict[str, Any] = msgspec.msgpack.decode(packed)
            return fresh
    else:
        plain = _described(schema)
    # A fresh copy for every interrupt: the record must not share a dict with the cache.
    copy: dict[str, Any] = msgspec.json.decode(plain)
    return copy


@functools.lru_cache(maxsize=_CACHED)
def _checked_json(plain: bytes) -> bytes | None:
    """`_checked` for a schema given as its JSON (one check per distinct schema, without
    sorting it again); return it as msgpack, or None when msgpack cannot hold it (an int
    over 64 bits)."""
    _checked(_sorted_json(plain))
    try:
        return msgspec.msgpack.encode(msgspec.json.decode(plain))
    except OverflowError:
        return None


def compiled(schema: Mapping[str, Any]) -> Any:
    """Return the `jsonschema` validator for ``schema`` (one per distinct schema)."""
    return _validator(_canonical(schema))


def check(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Return None when ``value`` satisfies ``schema``, else a message saying what is wrong."""
    try:
        # The answer as JSON carries it: a tuple is an array, a date its ISO string.
        instance = msgspec.to_builtins(value, enc_hook=_as_json)
    except TypeError:
        instance = value
    canonical = _canonical(schema)
    try:
        answer = msgspec.json.encode(instance, order="deterministic")
    except (TypeError, ValueError, OverflowError):
        answer = None
    if answer is not None and len(answer) <= _SHORT and msgspec.json.decode(answer) == instance:
        # The same short answer (an approval) is judged once per schema. The JSON must give
        # back the very value (NaN does not; it is judged each time).
        problem = _judged(canonical, answer)
    else:
        problem = _judge(canonical, instance)
    if problem is not None:
        return problem
    name = schema.get(TYPE_KEYWORD)
    to_type = _ANSWER_TYPES.get(name) if isinstance(name, str) else None
    if to_type is not None:
        try:
            to_type(value)
        except (msgspec.ValidationError, ValueError, TypeError) as exc:
            return _shown(f"answer does not convert to {name}: {exc}")
    return None


_SHORT: Final = 256
"""Answers up to this many bytes of JSON have their verdicts cached (approvals, choices)."""


@functools.lru_cache(maxsize=4 * _CACHED)
def _judged(canonical: bytes, answer: bytes) -> str | None:
    return _judge(canonical, msgspec.json.decode(answer))


def _judge(canonical: bytes, instance: Any) -> str | None:
    """What is wrong with ``instance`` under the schema, or None: a pure function of the two."""
    from jsonschema.exceptions import best_match

    validator = _validator(canonical)
    try:
        error = best_match(validator.iter_errors(instance))
    except Exception as exc:  # whatever the failure, this stored schema cannot check answers
        return f"the interrupt's schema cannot check answers ({type(exc).__name__}: {exc})"
    if error is not None:
        where = "answer" + str(error.json_path).removeprefix("$")
        message = error.message
        if error.context:  # anyOf/oneOf: say why each choice refused it
            message += " (" + "; ".join(dict.fromkeys(e.message for e in error.context)) + ")"
        return _shown(f"{where}: {message}")
    return None


def _as_json(value: Any) -> Any:
    if _pydantic_model(type(value)):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} has no JSON form here")


def convert(tp: Any, answer: Any) -> Any:
    """Return ``answer`` as the type ``tp`` a node gave as its schema."""
    return _converter(tp)(answer)


def _shown(message: str) -> str:
    return message if len(message) <= _SHOWN else message[: _SHOWN - 3] + "..."


def _canonical(schema: Mapping[str, Any]) -> bytes:
    # Keys sorted: equal schemas written in another order share one validator. Sorting a
    # schema of a few dozen dicts costs twice its plain encoding: the sorted form is kept by
    # the plain one (both are JSON of the same values).
    try:
        plain = msgspec.json.encode(schema)
    except (TypeError, ValueError, OverflowError):
        return msgspec.json.encode(schema, order="deterministic")  # raises as it always did
    return _sorted_json(plain)


@functools.lru_cache(maxsize=4 * _CACHED)
def _sorted_json(plain: bytes) -> bytes:
    """The JSON ``plain`` with every object's keys sorted (`_canonical`)."""
    return msgspec.json.encode(msgspec.json.decode(plain), order="deterministic")


@functools.cache
def _no_refs() -> Any:
    """The empty registry every validator resolves ``$ref`` in: nothing is fetched."""
    import referencing

    return referencing.Registry()


@functools.lru_cache(maxsize=_CACHED)
def _validator(canonical: bytes) -> Any:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    schema = msgspec.json.decode(canonical)
    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=_no_refs())


@functools.lru_cache(maxsize=_CACHED)
def _checked(canonical: bytes) -> None:
    from jsonschema.exceptions import SchemaError

    validator = _validator(canonical)
    try:
        validator.check_schema(validator.schema)
    except SchemaError as exc:
        where = "schema" + str(exc.json_path).removeprefix("$")
        raise GraphDefinitionError(
            f"schema= is not a valid JSON Schema: {where}: {exc.message}"
        ) from None
    _check_refs(validator)


def _check_refs(validator: Any) -> None:
    """Refuse a ``$ref`` that does not resolve: no answer could ever be checked against it."""
    import referencing.exceptions
    import referencing.jsonschema
    from jsonschema_specifications import REGISTRY

    cls = type(validator)
    spec = referencing.jsonschema.specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect",
        default=referencing.Specification.OPAQUE,
    )
    root = spec.create_resource(validator.schema)
    resolver = REGISTRY.combine(_no_refs()).resolver_with_root(root)
    todo = [(root, resolver)]
    while todo:
        resource, at = todo.pop()
        ref = resource.contents.get("$ref") if isinstance(resource.contents, Mapping) else None
        if isinstance(ref, str):
            try:
                at.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise GraphDefinitionError(
                    f"schema= refers to {ref!r}, which it does not hold; an answer schema is "
                    "stored with the interrupt, so put what it refers to under its $defs"
                ) from None
        todo.extend((sub, at.in_subresource(sub)) for sub in resource.subresources())


def _pydantic_model(tp: Any) -> bool:
    # pydantic is optional: a class can only be a pydantic model once pydantic is imported.
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)  # list[Refund], Annotated[int, Meta(gt=0)]: the repr names the types


def _converter(tp: Any) -> _Converter:
    if _pydantic_model(tp):
        validate: _Converter = tp.model_validate
        return validate
    return functools.partial(msgspec.convert, type=tp, strict=False)


def _described(tp: Any) -> bytes:
    """The JSON of the schema ``tp`` describes, marked with its name; the type registered."""
    name = _type_name(tp)
    # Latest wins: a class defined again under the same name (a reload) replaces the old one.
    _ANSWER_TYPES[name] = _converter(tp)
    try:
        return _described_cached(tp, name)
    except TypeError:  # an unhashable type expression: describe it every time
        return _describe(tp, name)


@functools.lru_cache(maxsize=_CACHED)
def _described_cached(tp: Any, name: str) -> bytes:
    return _describe(tp, name)


def _describe(tp: Any, name: str) -> bytes:
    try:
        if _pydantic_model(tp):
            schema: dict[str, Any] = tp.model_json_schema()
        else:
            schema = msgspec.json.schema(tp)
    except Exception as exc:  # msgspec and pydantic refuse with errors of their own
        raise GraphDefinitionError(
            "schema= must be a JSON Schema dict, a pydantic model, or a type msgspec can "
            f"describe; {name} is none of those: {exc}"
        ) from exc
    schema[TYPE_KEYWORD] = name
    _checked(_canonical(schema))
    return msgspec.json.encode(schema)
