"""A small JSON Schema checker for resume answers.

Answers are checked against the schema stored with the interrupt *before* anything changes, in
whatever process resumes the thread, so the check must work from stored data alone. This covers
the subset interrupt schemas use (and what `msgspec.json.schema` produces for simple types):
``type``, ``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``,
``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum``,
``anyOf``/``oneOf``/``allOf`` and local ``$ref`` into ``$defs``. Unknown keywords are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Return None when ``value`` satisfies ``schema``, else a message saying what is wrong."""
    return _check(value, schema, schema, "answer")


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(name, (object,)))


def _check(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: str) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        if target is None:
            return f"{path}: schema reference {ref} is missing"
        return _check(value, target, root, path)
    t = schema.get("type")
    if t is not None:
        names = [t] if isinstance(t, str) else list(t)
        if not any(_type_ok(value, n) for n in names):
            return (
                f"{path}: expected {' or '.join(names)}, got {type(value).__name__} {value!r:.60}"
            )
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: must be one of {list(schema['enum'])}, got {value!r:.60}"
    if "const" in schema and value != schema["const"]:
        return f"{path}: must be {schema['const']!r}"
    for combo in ("anyOf", "oneOf"):
        if combo in schema:
            errors = [_check(value, s, root, path) for s in schema[combo]]
            if all(e is not None for e in errors):
                return (
                    errors[0] if len(errors) == 1 else f"{path}: matches none of {combo}: {errors}"
                )
    for sub in schema.get("allOf", ()):
        if (err := _check(value, sub, root, path)) is not None:
            return err
    if isinstance(value, dict):
        return _check_object(value, schema, root, path)
    if isinstance(value, list | tuple):
        n = len(value)
        if "minItems" in schema and n < schema["minItems"]:
            return f"{path}: needs at least {schema['minItems']} items"
        if "maxItems" in schema and n > schema["maxItems"]:
            return f"{path}: allows at most {schema['maxItems']} items"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                if (err := _check(item, items, root, f"{path}[{i}]")) is not None:
                    return err
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{path}: must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: must be at most {schema['maxLength']} characters"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: must be >= {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: must be <= {schema['maximum']}"
    return None


def _check_object(
    value: dict[Any, Any], schema: Mapping[str, Any], root: Mapping[str, Any], path: str
) -> str | None:
    props: Mapping[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            return f"{path}: missing required field {name!r}"
    for name, item in value.items():
        sub = props.get(name)
        if sub is not None:
            if (err := _check(item, sub, root, f"{path}.{name}")) is not None:
                return err
        elif schema.get("additionalProperties") is False:
            return f"{path}: unexpected field {name!r}"
    return None
