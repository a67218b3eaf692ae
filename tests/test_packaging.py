"""What the package declares matches what it ships and what CI checks."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import interlock

ROOT = Path(__file__).resolve().parents[1]


def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        meta: dict[str, Any] = tomllib.load(f)["project"]
    return meta


def test_the_declared_license_ships_with_its_text() -> None:
    meta = project()
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text


def test_classifiers_name_every_python_ci_runs() -> None:
    classifiers = project()["classifiers"]
    declared = {c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r".*:: 3\.\d+", c)}
    ci = re.search(r'INTERLOCK_PYTHONS="([^"]*)"', (ROOT / ".ci" / "run").read_text())
    assert ci is not None, ".ci/run must name the extra Pythons it tests"
    # 3.11 is the interpreter the README's command runs on; the others come from .ci/run.
    assert declared == {"3.11", *ci.group(1).split()}
    assert project()["requires-python"] == ">=3.11"


def test_changelog_has_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"\n## {interlock.__version__}\n" in changelog
    assert project()["version"] == interlock.__version__


def test_the_testing_extra_provides_what_interlock_testing_imports() -> None:
    extras = project()["optional-dependencies"]
    assert any(req.startswith("pytest") for req in extras["testing"])


def test_check_fails_at_once_on_a_named_python_it_cannot_find() -> None:
    # pytest's own --version stands in for the suite, should the check go that far.
    env = {**os.environ, "INTERLOCK_PYTHONS": "3.11 3.99"}
    out = subprocess.run(
        [str(ROOT / "scripts" / "check"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 1
    assert "Python 3.99 is not installed" in out.stderr
    assert "== ruff" not in out.stdout  # before any gate ran


def test_the_wheel_takes_the_vendored_graph_renderer() -> None:
    # The wheel takes every file under src/interlock that git does not ignore (hatchling reads
    # .gitignore); nothing narrows that, and the renderer's files are tracked and not ignored.
    with (ROOT / "pyproject.toml").open("rb") as f:
        build = tomllib.load(f)["tool"]["hatch"]["build"]
    assert build == {"targets": {"wheel": {"packages": ["src/interlock"]}}}
    web = "src/interlock/server/web"
    wanted = sorted(
        [
            f"{web}/graph.js",
            *(f"{web}/vendor/{n}" for n in ("LICENSE", "README.md", "mermaid.min.js.gz")),
        ]
    )
    tracked = subprocess.run(
        ["git", "ls-files", "--", *wanted], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert sorted(tracked.stdout.split()) == wanted
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--", *wanted], cwd=ROOT, capture_output=True
    )
    assert ignored.returncode == 1, ignored.stdout  # 1: none of them is ignored
