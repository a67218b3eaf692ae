"""The public namespace of `interlock.observability`: what ``__all__`` names exists and is
documented; interlock's own namespace gains nothing."""

from __future__ import annotations

import inspect

import interlock
import interlock.observability as observability


def test_all_names_exist_are_public_and_documented() -> None:
    assert len(observability.__all__) == len(set(observability.__all__))
    for name in observability.__all__:
        assert not name.startswith("_")
        obj = getattr(observability, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = inspect.getdoc(obj)
            assert doc and doc.split("\n")[0].endswith("."), f"{name} needs a one-sentence summary"


def test_the_top_namespace_exports_nothing_of_it() -> None:
    assert not set(observability.__all__) & set(interlock.__all__)
