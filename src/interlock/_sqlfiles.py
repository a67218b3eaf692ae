"""SQL kept in ``.sql`` files shipped with the package, read and split into statements.

A file holds named statements, in the layout of procrastinate's ``queries.sql``::

    -- What the file is: comment lines before the first statement.

    -- create_things --
    -- Why the statement is as it is: comment lines right after its name.
    CREATE TABLE things (
        ...
    );

A line that is exactly ``-- name --`` (lower-case letters, digits and underscores) starts a
statement. The comment lines right after it describe the statement and are not sent; the
statement is the rest of the text up to the next such line, leading and trailing whitespace
removed, and it ends with ``;``. Nothing else separates statements, so one may hold any
number of semicolons and comments (a PL/pgSQL body does): each statement is sent to the
database as it stands, in one ``execute``. A file that breaks these rules (SQL before the
first name, a name used twice, a statement empty or not ending with ``;``) fails to load,
naming the file and line.

Migrations are the files of one folder named ``NNNN_what_it_does.sql``: file ``N`` takes a
schema from version ``N - 1`` to ``N``, its statements run in file order. `migrations`
refuses a folder whose files are not numbered exactly 1 to the version the code expects, so
a file missing from an installation fails before a statement runs instead of leaving a schema
behind. A store module holds its migrations as `Migrations`, which reads the folder when a
migration is first looked at, not when the module is imported: `import interlock` reads no
file, and opening a database that is already at the current version reads none either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, overload

from ._lazy import lazy_module

if TYPE_CHECKING:
    from importlib import resources
    from importlib.resources.abc import Traversable
else:  # imported by the first file read, not by `import interlock`
    resources = lazy_module("importlib.resources", globals())

__all__ = ["Migrations", "migrations", "parse", "statements"]

_NAME: Final = re.compile(r"-- ([a-z0-9_]+) --")
_MIGRATION: Final = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


def parse(text: str, where: str) -> dict[str, str]:
    """Split the text of a SQL file into its statements, by name, in file order.

    Args:
        text: The file's text.
        where: The file, as error messages name it.

    Raises:
        ValueError: The text breaks the layout in the module docstring.
    """
    found: dict[str, str] = {}
    name: str | None = None
    start = 0
    body: list[str] = []
    describing = False

    def finish() -> None:
        if name is None:
            return
        statement = "\n".join(body).strip()
        if not statement.endswith(";"):
            raise ValueError(
                f"{where}, line {start}: statement {name!r} "
                + ("is empty" if not statement else "does not end with ';'")
                + "; write its SQL after its name and end it with ';'"
            )
        found[name] = statement

    for number, line in enumerate(text.splitlines(), start=1):
        header = _NAME.fullmatch(line)
        if header is not None:
            finish()
            name, start, body, describing = header[1], number, [], True
            if name in found:
                raise ValueError(
                    f"{where}, line {number}: a second statement named {name!r}; give each "
                    "statement of a file a name of its own"
                )
        elif name is None:
            if line.strip() and not line.startswith("--"):
                raise ValueError(
                    f"{where}, line {number}: SQL before the first '-- name --' line; start "
                    "each statement with a line naming it"
                )
        elif describing and line.startswith("--"):
            continue
        else:
            describing = False
            body.append(line)
    finish()
    return found


def statements(package: str, path: str) -> dict[str, str]:
    """The statements of the SQL file ``path`` of ``package``, by name, in file order.

    Raises:
        FileNotFoundError: The package was installed without the file.
        ValueError: The file breaks the layout in the module docstring.
    """
    return _read(resources.files(package).joinpath(path), f"{package}:{path}")


def migrations(package: str, folder: str, version: int) -> tuple[tuple[str, ...], ...]:
    """The statements of the migrations in ``folder`` of ``package``, one tuple per version.

    Item ``i`` takes a schema from version ``i`` to ``i + 1``.

    Args:
        package: The package the folder ships in.
        folder: The folder of ``NNNN_what_it_does.sql`` files.
        version: The schema version the code reads and writes: the files must be numbered
            exactly 1 to this.

    Raises:
        FileNotFoundError: A migration up to ``version`` is missing (or the whole folder).
        ValueError: A file is misnamed, numbered twice or past ``version``, or breaks the
            layout in the module docstring.
    """
    where = f"{package}:{folder}"
    directory = resources.files(package).joinpath(folder)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"{where}: the migrations folder is missing; interlock was installed without its "
            "SQL files, reinstall it"
        )
    numbered: dict[int, Traversable] = {}
    for entry in directory.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _MIGRATION.fullmatch(entry.name)
        if match is None:
            raise ValueError(
                f"{where}: {entry.name!r} is not named like a migration; name it "
                "NNNN_what_it_does.sql, NNNN being the version it migrates to"
            )
        number = int(match[1])
        if number in numbered:
            raise ValueError(
                f"{where}: {numbered[number].name!r} and {entry.name!r} both migrate to "
                f"version {number}; give each version one file"
            )
        numbered[number] = entry
    missing = [n for n in range(1, version + 1) if n not in numbered]
    if missing:
        raise FileNotFoundError(
            f"{where}: the migrations to version(s) {', '.join(map(str, missing))} of 1 to "
            f"{version} are missing; interlock was installed without its SQL files, reinstall it"
        )
    stray = sorted(n for n in numbered if not 1 <= n <= version)
    if stray:
        raise ValueError(
            f"{where}: {numbered[stray[0]].name!r} migrates to a version outside 1 to "
            f"{version}, the ones this code knows; number it after the last one and raise "
            "the code's schema version with it"
        )
    return tuple(
        tuple(_read(numbered[n], f"{where}/{numbered[n].name}").values())
        for n in range(1, version + 1)
    )


class Migrations(Sequence[tuple[str, ...]]):
    """The migrations of a folder of a package, as `migrations` returns them, read when first used.

    A store module keeps one as a constant; indexing, slicing, ``len`` or iterating it reads
    and checks the whole folder once (raising what `migrations` raises), and every later use
    reads the statements kept then.

    Example: building one reads nothing; the first use does, and fails as `migrations` would.

        >>> steps = Migrations("interlock.stores", "sql/nowhere", 1)
        >>> steps
        <Migrations interlock.stores:sql/nowhere, versions 1 to 1, not read yet>
        >>> steps[0]  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileNotFoundError: interlock.stores:sql/nowhere: the migrations folder is missing; ...
    """

    __slots__ = ("_folder", "_package", "_steps", "_version")

    def __init__(self, package: str, folder: str, version: int) -> None:
        self._package = package
        self._folder = folder
        self._version = version
        self._steps: tuple[tuple[str, ...], ...] | None = None

    def _read(self) -> tuple[tuple[str, ...], ...]:
        if self._steps is None:  # two threads may both read it: they keep equal tuples
            self._steps = migrations(self._package, self._folder, self._version)
        return self._steps

    @overload
    def __getitem__(self, index: int) -> tuple[str, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[str, ...], ...]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, ...] | tuple[tuple[str, ...], ...]:
        return self._read()[index]

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        read = "read" if self._steps is not None else "not read yet"
        return f"<Migrations {self._package}:{self._folder}, versions 1 to {self._version}, {read}>"


def _read(file: Traversable, where: str) -> dict[str, str]:
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{where} is missing; interlock was installed without its SQL files, reinstall it"
        ) from None
    return parse(text, where)
