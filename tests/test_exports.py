"""The public namespace: everything in ``__all__`` exists and is documented."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this interlock."""
    src = str(Path(interlock.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_postgres_store_is_exported_at_the_top() -> None:
    from interlock import PostgresStore
    from interlock.stores import PostgresStore as from_stores

    assert PostgresStore is from_stores is interlock.PostgresStore
    assert "PostgresStore" in dir(interlock)
    with pytest.raises(AttributeError, match="has no attribute 'PostgresStores'"):
        interlock.PostgresStores  # noqa: B018


def test_postgres_store_without_psycopg_names_the_extra() -> None:
    # psycopg blocked as if not installed: the rest of interlock works, star import included.
    out = python(
        "import sys; sys.modules['psycopg'] = None\n"
        "import interlock\n"
        "from interlock import *\n"
        "assert SqliteStore and 'psycopg' not in [m for m in sys.modules if sys.modules[m]]\n"
        "from interlock import PostgresStore\n"
    )
    assert out.returncode == 1
    assert "ImportError: PostgresStore needs psycopg" in out.stderr
    assert "pip install 'interlock[postgres]'" in out.stderr


def test_the_library_loads_neither_the_cli_nor_the_postgres_driver() -> None:
    out = python(
        "import sys, interlock\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'click', 'rich', 'psycopg'}))"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_interlock_testing_without_pytest_names_the_extra() -> None:
    out = python("import sys; sys.modules['pytest'] = None\nimport interlock.testing\n")
    assert out.returncode == 1
    assert "ImportError: interlock.testing needs pytest" in out.stderr
    assert "pip install 'interlock[testing]'" in out.stderr
