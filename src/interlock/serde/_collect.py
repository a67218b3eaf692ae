"""Find the classes a type annotation needs registered with a codec."""

from __future__ import annotations

import collections.abc
import inspect
import typing
from typing import TYPE_CHECKING, Annotated, Any, ForwardRef, Literal, get_args, get_origin

from .._lazy import lazy_module
from ._types import registrable_kind

if TYPE_CHECKING:
    import dataclasses
else:  # imported by the first call that needs it, not by `import interlock`
    dataclasses = lazy_module("dataclasses", globals())

__all__ = ["collect_types"]

# Present from Python 3.12 (the `type X = ...` statement); absent before.
_TypeAliasType: Any = getattr(typing, "TypeAliasType", None)


def collect_types(annotation: object) -> set[type]:
    """Return every class in `annotation` that must be registered to encode values of it.

    Walks containers (``list[T]``, ``dict[K, V]``, ``tuple[...]``, ``set[T]``), unions and
    optionals, ``Annotated`` (its first argument), TypedDicts, and the fields of dataclasses,
    pydantic models and msgspec Structs, recursively. Builtins and the always-supported types
    (datetime, UUID, Decimal, ...) are not returned, nor are TypedDicts, which are plain dicts.
    Forward references that cannot be resolved are skipped.

    Args:
        annotation: A type annotation, e.g. a state TypedDict or ``list[Message] | None``.

    Returns:
        The dataclasses, pydantic models, msgspec Structs and Enum classes found.
    """
    found: set[type] = set()
    _walk(annotation, found, set())
    return found


def _walk(annotation: object, found: set[type], seen: set[object]) -> None:
    if annotation is None or isinstance(annotation, (str, ForwardRef)):
        return
    origin = get_origin(annotation)
    if origin is Annotated:
        _walk(get_args(annotation)[0], found, seen)
        return
    if origin is Literal or origin is type or origin is collections.abc.Callable:
        return
    if origin is not None:
        # A generic user class (`Box[int]`) needs the class itself as well as its arguments.
        if isinstance(origin, type):
            _walk_class(origin, found, seen)
        for arg in get_args(annotation):
            _walk(arg, found, seen)
        return
    if _TypeAliasType is not None and isinstance(annotation, _TypeAliasType):
        if annotation not in seen:
            seen.add(annotation)
            _walk(annotation.__value__, found, seen)
        return
    supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        _walk(supertype, found, seen)
        return
    if isinstance(annotation, type):
        _walk_class(annotation, found, seen)


def _walk_class(cls: type, found: set[type], seen: set[object]) -> None:
    if cls in seen:
        return
    seen.add(cls)
    if typing.is_typeddict(cls):
        for hint in _hints(cls).values():
            _walk(hint, found, seen)
        return
    kind = registrable_kind(cls)
    if kind is None:
        return
    found.add(cls)
    if kind == "enum":
        return
    if kind == "pydantic":
        for field in cls.model_fields.values():  # type: ignore[attr-defined]
            _walk(field.annotation, found, seen)
        return
    if kind == "struct":
        names = set(cls.__struct_fields__)  # type: ignore[attr-defined]
    else:
        names = {field.name for field in dataclasses.fields(cls)}
    for name, hint in _hints(cls).items():
        if name in names:
            _walk(hint, found, seen)


def _hints(cls: type) -> dict[str, object]:
    """Resolve the annotations of `cls`, skipping those that cannot be resolved."""
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:
        pass  # some name cannot be resolved: resolve the fields one at a time
    hints: dict[str, object] = {}
    for owner in reversed(cls.__mro__):
        annotations = inspect.get_annotations(owner)
        localns = {owner.__name__: owner, **vars(owner)}
        for name, annotation in annotations.items():
            # A throwaway class per field lets get_type_hints resolve each one on its own.
            probe = type(
                "_Probe",
                (),
                {"__annotations__": {name: annotation}, "__module__": owner.__module__},
            )
            try:
                hints[name] = typing.get_type_hints(probe, localns=localns, include_extras=True)[
                    name
                ]
            except Exception:
                continue  # an unresolvable forward reference is skipped
    return hints
