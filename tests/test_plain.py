"""`interlock._plain.plain`: what the HTTP views and the AG-UI events show of a value."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from interlock._plain import plain


@dataclass
class Order:
    id: int
    total: float


class Opaque:
    def __str__(self) -> str:
        return "opaque"


def test_floats_json_has_no_form_for_become_text_at_any_depth() -> None:
    value = {"a": math.nan, "b": [1.5, math.inf], "c": ({"d": -math.inf},)}
    shown = plain(value)
    assert shown == {"a": "nan", "b": [1.5, "inf"], "c": [{"d": "-inf"}]}
    json.dumps(shown, allow_nan=False)  # raises if a NaN or an infinity were left


def test_structured_values_become_builtins_and_unknown_ones_their_text() -> None:
    shown = plain({"order": Order(7, 9.5), "who": Opaque(), 3: b"\x00"})
    assert shown == {"order": {"id": 7, "total": 9.5}, "who": "opaque", "3": "AA=="}


def test_unknown_is_the_callers_to_choose() -> None:
    def hidden(value: Any) -> str:
        return f"<{type(value).__name__}>"

    assert plain([Opaque()], unknown=hidden) == ["<Opaque>"]
    # A value msgspec refuses as a whole (a key that is not a string's equal) is unknown.
    assert plain({(1, 2): "x"}, unknown=hidden) == "<dict>"
