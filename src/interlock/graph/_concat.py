"""Concatenating streamed chunks into one value (what a streaming node's checkpoint stores).

A node (or, later, a tool) that is an async generator yields chunks as it works; they are
emitted as events, and when it finishes the chunks are joined into one value by the rule
registered for their type. Built in: ``str`` and ``bytes`` (joined), ``list`` and ``tuple``
(flattened), ``dict`` (key by key: values of a key seen in several chunks are concatenated by
their own rule, a key seen once keeps its value).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._errors import GraphDefinitionError, InvalidUpdate

__all__ = ["concat", "register_concat"]

T = TypeVar("T")

_RULES: dict[type[Any], Callable[[list[Any]], Any]] = {}


def register_concat(cls: type[T], fn: Callable[[list[T]], T]) -> None:
    """Register how chunks of type ``cls`` (and its subclasses) join into one value.

    Examples:
        >>> from interlock import register_concat
        >>> class Tokens(list): ...
        >>> register_concat(Tokens, lambda chunks: Tokens(t for c in chunks for t in c))
    """
    if not isinstance(cls, type):
        raise GraphDefinitionError(f"register_concat() needs a class, got {cls!r}")
    _RULES[cls] = fn


def _rule_for(cls: type[Any]) -> Callable[[list[Any]], Any] | None:
    for base in cls.__mro__:
        rule = _RULES.get(base)
        if rule is not None:
            return rule
    return None


def concat(chunks: Sequence[Any], *, where: str) -> Any:
    """Join ``chunks`` by the rule for their type; None for no chunks, the chunk for one.

    Raises:
        InvalidUpdate: The chunks mix types, or their type has no rule (the message names it
            and says how to register one).
    """
    if not chunks:
        return None
    first = type(chunks[0])
    if len(chunks) == 1:
        return chunks[0]
    odd = next((c for c in chunks if type(c) is not first), None)
    if odd is not None:
        raise InvalidUpdate(
            f"{where}: streamed chunks mix {first.__name__} and {type(odd).__name__}; "
            "yield chunks of one type"
        )
    rule = _rule_for(first)
    if rule is None:
        name = f"{first.__module__}.{first.__qualname__}"
        raise InvalidUpdate(
            f"{where}: no rule to concatenate streamed chunks of type {name}; register one "
            f"with interlock.register_concat({first.__qualname__}, fn) where fn joins a list "
            "of chunks into one value"
        )
    if rule is _join_dicts:
        return _join_dicts(list(chunks), where)
    try:
        return rule(list(chunks))
    except InvalidUpdate:
        raise
    except Exception as exc:
        raise InvalidUpdate(
            f"{where}: concatenating {len(chunks)} chunks of {first.__name__} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _join_dicts(chunks: list[dict[Any, Any]], where: str = "dict chunks") -> dict[Any, Any]:
    values: dict[Any, list[Any]] = {}
    for chunk in chunks:
        for key, value in chunk.items():
            values.setdefault(key, []).append(value)
    return {key: concat(vs, where=f"{where}, key {key!r}") for key, vs in values.items()}


register_concat(str, "".join)
register_concat(bytes, b"".join)
register_concat(list, lambda chunks: [item for chunk in chunks for item in chunk])
register_concat(tuple, lambda chunks: tuple(item for chunk in chunks for item in chunk))
register_concat(dict, _join_dicts)
