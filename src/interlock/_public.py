"""Public names report the public module they are imported from, as trio and httpcore do.

A class defined in ``interlock.runtime._app`` and exported as ``interlock.App`` says so in a
traceback, a ``repr`` and the reference (``interlock.App``, not ``interlock.runtime._app.App``):
each public namespace rewrites the ``__module__`` of the names it exports. A name exported at
several levels ends with the shortest (``interlock`` rewrites last).

A class's string annotations (``from __future__ import annotations``) are resolved by
libraries such as msgspec in the namespace of the class's ``__module__``: before that moves,
the class's own annotations are resolved where they were written and stored resolved. A class
whose annotations cannot be resolved yet keeps its module.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Iterable, Mapping
from types import CodeType
from typing import Any

__all__ = ["publish"]

_COMPILED: dict[str, CodeType] = {}
"""Each annotation string compiled once: the same few (``str``, ``str | None``...) recur."""


def publish(module: str, namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """Rewrite ``__module__`` of the ``names`` in ``namespace`` to ``module`` where interlock
    defines them privately (in a module a part of whose path starts with ``_``) or exports
    them from a deeper public module (``interlock.stores`` rewritten to ``interlock``)."""
    for name in names:
        value = namespace.get(name)
        if value is None:
            continue
        own = getattr(value, "__module__", None)
        if not isinstance(own, str) or not (_private(own) or own.startswith(module + ".")):
            continue
        if isinstance(value, type) and not _resolved(value):
            continue
        try:
            value.__module__ = module
        except (AttributeError, TypeError):  # a builtin or a frozen object: leave it as it is
            continue


def _private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "interlock" and any(p.startswith("_") for p in parts[1:])


def _resolved(cls: type) -> bool:
    """Resolve the class's own string annotations in place; False if some cannot be."""
    own = inspect.get_annotations(cls)
    if not any(isinstance(v, str) for v in own.values()):
        return True
    try:
        hints = _hints(cls)
    except Exception:
        return False
    cls.__annotations__ = {key: hints.get(key, value) for key, value in own.items()}
    return True


def _hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls, include_extras=True)`` for the classes interlock exports.

    Evaluated as `typing.get_type_hints` evaluates them (each class of the MRO in its module's
    namespace, then its own), with each string compiled once. A class with an annotation that
    quotes a name inside a type (``Optional["X"]``, a forward reference) is left to
    `typing.get_type_hints`.
    """
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        annotations = inspect.get_annotations(base)
        if not annotations:
            continue
        module = getattr(sys.modules.get(base.__module__), "__dict__", {})
        names = dict(vars(base))  # looked up after the module's, as in typing.get_type_hints
        for key, value in annotations.items():
            if isinstance(value, str):
                code = _COMPILED.get(value)
                if code is None:
                    code = _COMPILED[value] = compile(value, "<annotation>", "eval")
                value = eval(code, names, module)
            if isinstance(value, str) or _refers_forward(value):  # quoted twice, or inside
                return typing.get_type_hints(cls, include_extras=True)
            hints[key] = type(None) if value is None else value
    return hints


def _refers_forward(annotation: object) -> bool:
    """Whether a forward reference (a quoted name) is left anywhere inside ``annotation``."""
    if isinstance(annotation, typing.ForwardRef):
        return True
    return any(_refers_forward(a) for a in getattr(annotation, "__args__", ()))
