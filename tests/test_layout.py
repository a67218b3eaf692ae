"""The test tree mirrors the package: every folder of tests/ is named for a package of interlock.

tests/system is the one exception: tests that start real OS processes (workers, crashes,
server restarts), whatever part of the library they exercise.
"""

from __future__ import annotations

from pathlib import Path

import interlock

TESTS = Path(__file__).resolve().parent
PACKAGE = Path(interlock.__file__).resolve().parent
NOT_MIRRORED = {"system"}


def test_every_test_folder_mirrors_a_package() -> None:
    # A folder left with only bytecode in it holds no tests; it does not count.
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    strays = sorted(folders - packages - NOT_MIRRORED)
    assert not strays, (
        f"tests/ has folders {strays} that match no package in {PACKAGE}: put their tests in "
        "the folder of the package they exercise, or in tests/system if they start processes"
    )
