"""The schema's SQL files ship with the installed package, one per version, and load whole."""

from __future__ import annotations

import re
from importlib.resources import files
from types import ModuleType

import pytest

from interlock.stores import _postgres_schema as pg_schema
from interlock.stores import _sqlite_schema as sqlite_schema

BACKENDS = [("postgres", pg_schema), ("sqlite", sqlite_schema)]


@pytest.mark.parametrize(("folder", "schema"), BACKENDS)
def test_the_installed_package_holds_a_migration_per_schema_version(
    folder: str, schema: ModuleType
) -> None:
    # Read from the installed package as the stores read it: a file left out of the wheel
    # (or a version raised without its file) fails here, not on a user's database.
    shipped = files("interlock.stores").joinpath("sql").joinpath(folder)
    names = sorted(e.name for e in shipped.iterdir() if e.name.endswith(".sql"))
    numbers = [int(re.match(r"\d{4}", name)[0]) for name in names]  # type: ignore[index]
    assert numbers == list(range(1, schema.SCHEMA_VERSION + 1))
    assert len(schema.MIGRATIONS) == schema.SCHEMA_VERSION
    assert all(step for step in schema.MIGRATIONS)


def test_a_function_body_is_one_statement_and_descriptions_are_not_sent() -> None:
    # Version 5 replaces interlock_append: a PL/pgSQL body of many semicolons, sent whole.
    step = pg_schema.MIGRATIONS[4]
    (append,) = [s for s in step if s.startswith("CREATE FUNCTION interlock_append(")]
    assert append.count(";") > 20
    assert append.endswith("$fn$;")
    assert all(not s.startswith("--") for version in pg_schema.MIGRATIONS for s in version)
