"""SQL files split into named statements, and folders of migrations read in version order."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock._sqlfiles import migrations, parse, statements

FILE = """\
-- What this file is.
-- More about it.

-- first --
-- Why the first is so.
CREATE TABLE t (x INTEGER);

-- second --
CREATE FUNCTION f() RETURNS INTEGER LANGUAGE plpgsql AS $fn$
BEGIN
    -- a comment of the body, sent with it
    RETURN 1;
END
$fn$;
"""


def test_statements_are_split_by_their_names_only() -> None:
    assert parse(FILE, "f.sql") == {
        "first": "CREATE TABLE t (x INTEGER);",
        "second": (
            "CREATE FUNCTION f() RETURNS INTEGER LANGUAGE plpgsql AS $fn$\nBEGIN\n"
            "    -- a comment of the body, sent with it\n    RETURN 1;\nEND\n$fn$;"
        ),
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("CREATE TABLE t (x INTEGER);\n", r"f\.sql, line 1: SQL before the first '-- name --'"),
        ("-- a --\nSELECT 1;\n-- a --\nSELECT 2;\n", r"line 3: a second statement named 'a'"),
        ("-- a --\n-- only words\n\n-- b --\nSELECT 1;\n", r"line 1: statement 'a' is empty"),
        ("-- a --\nSELECT 1\n-- b --\nSELECT 2;\n", r"line 1: statement 'a' does not end with"),
    ],
)
def test_a_file_that_breaks_the_layout_names_the_line(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse(text, "f.sql")


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An importable package of our own, ``sqlfiles_sample``, with a ``sql`` folder."""
    root = tmp_path / "sqlfiles_sample"
    (root / "sql").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root / "sql"
    sys.modules.pop("sqlfiles_sample", None)


def test_migrations_come_in_version_order(package: Path) -> None:
    (package / "0002_second.sql").write_text("-- b --\nSELECT 2;\n-- c --\nSELECT 3;\n")
    (package / "0001_first.sql").write_text("-- a --\nSELECT 1;\n")
    (package / "README.txt").write_text("not a migration")
    assert migrations("sqlfiles_sample", "sql", 2) == (
        ("SELECT 1;",),
        ("SELECT 2;", "SELECT 3;"),
    )
    assert statements("sqlfiles_sample", "sql/0002_second.sql") == {
        "b": "SELECT 2;",
        "c": "SELECT 3;",
    }


def test_a_missing_migration_fails_loudly(package: Path) -> None:
    (package / "0001_first.sql").write_text("-- a --\nSELECT 1;\n")
    (package / "0003_third.sql").write_text("-- a --\nSELECT 3;\n")
    with pytest.raises(FileNotFoundError, match=r"version\(s\) 2 of 1 to 3 are missing"):
        migrations("sqlfiles_sample", "sql", 3)
    with pytest.raises(FileNotFoundError, match="migrations folder is missing"):
        migrations("sqlfiles_sample", "nowhere", 1)
    with pytest.raises(FileNotFoundError, match=r"sql/0009_none\.sql is missing"):
        statements("sqlfiles_sample", "sql/0009_none.sql")


@pytest.mark.parametrize(
    ("names", "error"),
    [
        (["0001_first.sql", "0002_second.sql"], r"'0002_second\.sql' migrates to a version"),
        (["0001_first.sql", "0001_again.sql"], "both migrate to version 1"),
        (["0001_first.sql", "second.sql"], r"'second\.sql' is not named like a migration"),
    ],
)
def test_a_folder_that_does_not_match_the_version_is_refused(
    package: Path, names: list[str], error: str
) -> None:
    for name in names:
        (package / name).write_text("-- a --\nSELECT 1;\n")
    with pytest.raises(ValueError, match=error):
        migrations("sqlfiles_sample", "sql", 1)
