"""The public namespace: everything in ``__all__`` exists and is documented."""

from __future__ import annotations

import inspect

import interlock


def test_all_names_exist_and_are_unique() -> None:
    assert len(interlock.__all__) == len(set(interlock.__all__))
    for name in interlock.__all__:
        assert hasattr(interlock, name), name


def test_public_callables_and_classes_have_docstrings() -> None:
    for name in interlock.__all__:
        obj = getattr(interlock, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = inspect.getdoc(obj)
            assert doc and doc.split("\n")[0].endswith("."), f"{name} needs a one-sentence summary"


def test_no_private_module_leaks_into_all() -> None:
    assert not [n for n in interlock.__all__ if n.startswith("_")]
