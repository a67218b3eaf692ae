"""The documentation site: it builds strictly, its reference covers every public name, and
every block of its pages is code the suite runs (the root conftest.py), output, or data that
parses."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import tomllib
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PUBLIC_MODULES = [
    "interlock",
    "interlock.agents",
    "interlock.graph",
    "interlock.stores",
    "interlock.serde",
    "interlock.server",
    "interlock.testing",
    "interlock.workers",
    "interlock.observability",
    "interlock.a2a",
    "interlock.agui",
]
RUN = {"python", "sh"}  # run by the root conftest.py
SHOWN = {"text"}  # what a program prints
DATA = {"json", "toml", "yaml", "http"}
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S
)
SKIP = re.compile(r"<!-- skip: (?P<arguments>.*?) -->")


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """``(line, language, body)`` of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.append((line, m["info"].strip().split(" ")[0], m["body"]))
    return found


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_block_says_what_it_is(page: Path) -> None:
    unknown = [
        f"{name(page)}:{line}: ```{lang}"
        for line, lang, _ in blocks(page)
        if lang not in RUN | SHOWN | DATA
    ]
    assert not unknown, (
        "each block needs a language the suite knows: python or sh (run), text (output), "
        f"json, toml, yaml or http (data): {unknown}"
    )


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_data_blocks_parse(page: Path) -> None:
    for line, lang, body in blocks(page):
        where = f"{name(page)}:{line}"
        try:
            if lang == "json":
                json.loads(body)
            elif lang == "toml":
                tomllib.loads(body)
            elif lang == "yaml":
                yaml.safe_load(body)
        except (ValueError, yaml.YAMLError) as exc:  # JSON's and TOML's are ValueErrors
            pytest.fail(f"{where}: the {lang} block does not parse: {exc}")
        if lang == "http":
            method, path, *_ = body.splitlines()[0].split(" ")
            assert method in {"GET", "POST", "PUT", "DELETE", "PATCH"}, where
            assert path.startswith("/"), where


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_a_block_left_unrun_says_why(page: Path) -> None:
    for m in SKIP.finditer(page.read_text(encoding="utf-8")):
        assert re.fullmatch(r'next "[^"]{10,}"', m["arguments"]), (
            f'{name(page)}: write <!-- skip: next "why it does not run" --> '
            f"(found <!-- skip: {m['arguments']} -->)"
        )


def test_the_fence_reader_finds_what_it_should(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "Text\n\n```python\nx = 1\n```\n\n- item\n\n  ```sh\n  ls\n  ```\n```\nbare\n```\n"
    )
    assert blocks(page) == [(3, "python", "x = 1\n"), (9, "sh", "  ls\n"), (12, "", "bare\n")]


def public_objects() -> dict[str, object]:
    """Every name a user imports, with what it names: each public module's ``__all__``, and
    the public methods and properties of its classes."""
    found: dict[str, object] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for exported in module.__all__:
            obj = found[f"{module_name}.{exported}"] = getattr(module, exported)
            if not inspect.isclass(obj):
                continue
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(value, staticmethod | classmethod):
                    value = value.__func__
                if inspect.isfunction(value) or isinstance(value, property):
                    found[f"{module_name}.{exported}.{attr}"] = value
    return found


def public_names() -> list[str]:
    return list(public_objects())


@pytest.mark.slow
def test_the_site_builds_strictly_and_its_reference_has_every_public_name(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    # The inventory lists each object the reference renders; with show_if_no_docstring off,
    # an object without a docstring is not rendered, so it is missing here too.
    header, _, packed = (site / "objects.inv").read_bytes().partition(b"zlib.\n")
    assert b"Sphinx inventory version 2" in header
    listed = {entry.split(" ", 1)[0] for entry in zlib.decompress(packed).decode().splitlines()}
    missing = [n for n in public_names() if n not in listed]
    assert not missing, f"public names without a docstring in the reference: {missing}"
    for page in ["tutorial", "how-to/index", "coming-from-langgraph", "coming-from-go"]:
        assert (site / page / "index.html").is_file() or (site / f"{page}.html").is_file(), page


def rendered_docstrings() -> dict[str, str]:
    """The docstrings the reference shows: the public packages' and their public names'."""
    shown: dict[str, object] = {m: importlib.import_module(m) for m in PUBLIC_MODULES}
    shown.update(public_objects())
    return {
        name: inspect.getdoc(obj.fget if isinstance(obj, property) else obj) or ""
        for name, obj in shown.items()
    }


def test_a_docstring_example_either_runs_or_says_it_is_a_sketch() -> None:
    # Runnable examples are doctests (`>>>`, run below); a literal block (`::`) is not run,
    # so the line that introduces it must say it is a sketch.
    unmarked = [
        f"{name}: {intro.strip()}"
        for name, doc in rendered_docstrings().items()
        for intro in doc.split("\n\n")  # the paragraph that ends with the "::"
        if intro.rstrip().endswith("::") and "sketch" not in intro
    ]
    assert not unmarked, unmarked


def interlock_modules() -> list[str]:
    import interlock

    root = Path(interlock.__file__).parent
    return sorted(
        "interlock." + ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in root.rglob("*.py")
        if ">>>" in p.read_text(encoding="utf-8")
    )


@pytest.mark.parametrize("module_name", interlock_modules())
def test_every_doctest_in_the_package_runs(module_name: str) -> None:
    import doctest

    class Finder(doctest.DocTestFinder):
        # A public class reports its public module (`interlock.agents`), not the private one
        # that defines it: it is this module's when this module binds it under its name.
        def _from_module(self, module: Any, object: Any) -> bool:
            name = getattr(object, "__name__", None)
            if isinstance(name, str) and getattr(module, name, None) is object:
                return True
            return bool(super()._from_module(module, object))  # type: ignore[misc]

    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner()
    for test in Finder().find(module, module.__name__):
        runner.run(test)
    failures, tried = runner.summarize(verbose=False)
    assert tried > 0 and failures == 0, f"{module_name}: {failures} of {tried} examples failed"
