"""Values as JSON-able builtins, for the surfaces that show them (HTTP views, AG-UI events).

`plain` turns any value a state or a question may hold into dicts, lists, strings, numbers,
booleans and None: a value msgspec cannot convert becomes ``unknown(value)`` (its ``str`` by
default), and a float JSON has no form for (NaN, infinity) becomes its ``str``.

    >>> plain({"n": float("nan"), "pair": (3, 4), "at": object})
    {'n': 'nan', 'pair': [3, 4], 'at': "<class 'object'>"}
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec

__all__ = ["plain"]


def plain(value: Any, *, unknown: Callable[[Any], Any] = str) -> Any:
    """``value`` as JSON-able builtins; anything unknown becomes ``unknown(it)`` (its ``str``)."""
    try:
        out = msgspec.to_builtins(value, enc_hook=unknown, str_keys=True)
    except (TypeError, ValueError, OverflowError):
        return unknown(value)
    return _finite(out)


def _finite(value: Any) -> Any:
    # JSON has no NaN or infinity; a state may hold them.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):  # msgspec leaves a tuple a tuple
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
