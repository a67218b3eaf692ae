"""Modules a module binds at its top and imports only when a call first uses them.

`import interlock` should not pay for what only a call needs. `asyncio` is the case in point:
importing it costs a fresh process more than all of interlock's own modules together (it loads
``ssl``, ``socket``, ``subprocess``, ``concurrent.futures``...), and a program that only builds
graphs, prints a command's help or runs on trio never calls it. A module that uses it writes
(a sketch)::

    if TYPE_CHECKING:
        import asyncio
    else:  # imported by the first call that needs it, not by `import interlock`
        asyncio = lazy_asyncio(globals())

and its functions keep calling ``asyncio.get_running_loop()`` as before. The first attribute
read imports the module and binds it in place of the stand-in, so every later read is an
ordinary global lookup at no extra cost; two threads that race to it both bind the same
module. Type checkers see the plain import. With ``from __future__ import annotations`` the
annotations that name the module are never evaluated, so they do not import it; code at
module level that reads an attribute would, and must not (`tests/test_import_cost.py` fails).

`lazy_module` stands for a module, `lazy_callable` for a name the code only calls
(``Path(...)``). A stand-in suits a name read afresh at each use: code that keeps hold of it
(``map(name, rows)`` over a page of rows) calls the stand-in each time until the next read.
It is for the modules a package uses, never for its public names, which stay ordinary
attributes (decision 90). `importlib.util.LazyLoader` is not used: it puts the module in
``sys.modules`` before it is loaded, so ``"asyncio" in sys.modules`` would be true in every
process, and that is how code (ours, and sniffio's) tells which event loop may be running.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any, NoReturn, cast

__all__ = ["lazy_asyncio", "lazy_callable", "lazy_module"]


class _LazyModule:
    """Stands for a module until the first attribute read, which imports it."""

    __slots__ = ("_name", "_namespace", "_submodules")

    def __init__(self, name: str, namespace: dict[str, Any], submodules: tuple[str, ...]) -> None:
        self._name = name
        self._namespace = namespace
        self._submodules = submodules

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        for submodule in self._submodules:
            importlib.import_module(submodule)
        _replace(self._namespace, self, module)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported when first used>"


class _LazyAsyncio(_LazyModule):
    """`_LazyModule` for asyncio, which asks whether an asyncio loop runs without importing it."""

    __slots__ = ()

    def __getattr__(self, attribute: str) -> Any:
        if attribute == "get_running_loop" and "asyncio" not in sys.modules:
            # No asyncio loop can be running in a process that has not imported asyncio (one
            # on trio): answer as asyncio would, and keep the stand-in for a later read.
            return _no_running_loop
        return super().__getattr__(attribute)


def _no_running_loop() -> NoReturn:
    raise RuntimeError("no running event loop")


class _LazyCallable:
    """Stands for a module's function or class until the first call, which imports it."""

    __slots__ = ("_module", "_name", "_namespace")

    def __init__(self, module: str, name: str, namespace: dict[str, Any]) -> None:
        self._module = module
        self._name = name
        self._namespace = namespace

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = getattr(importlib.import_module(self._module), self._name)
        _replace(self._namespace, self, target)
        return target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self._module}.{self._name}, imported when first called>"


def _replace(namespace: dict[str, Any], stand_in: object, target: object) -> None:
    # Bind the target wherever the stand-in is bound, so later reads skip the stand-in.
    for key, value in list(namespace.items()):
        if value is stand_in:
            namespace[key] = target


def lazy_module(name: str, namespace: dict[str, Any], *submodules: str) -> ModuleType:
    """A stand-in for the module ``name`` that imports it on its first attribute read.

    Args:
        name: The module's absolute name (``"asyncio"``).
        namespace: The ``globals()`` of the module that binds the stand-in: the first read
            replaces the stand-in there with the module itself.
        submodules: Submodules the code reads as attributes of the module
            (``"anyio.to_thread"``), imported with it as ``import anyio.to_thread`` would.

    Example:
        >>> colorsys = lazy_module("colorsys", globals())
        >>> colorsys
        <module 'colorsys', imported when first used>
        >>> colorsys.rgb_to_hsv(1.0, 0.0, 0.0)
        (0.0, 1.0, 1.0)
        >>> colorsys  # doctest: +ELLIPSIS
        <module 'colorsys' from '...colorsys.py'>
    """
    # Typed as the module it stands for: every attribute read resolves to the module's own.
    return cast(ModuleType, _LazyModule(name, namespace, submodules))


def lazy_asyncio(namespace: dict[str, Any]) -> ModuleType:
    """`lazy_module` for ``asyncio``, whose ``get_running_loop()`` does not import it.

    A process that has not imported asyncio cannot be running an asyncio loop, so until
    something imports it, ``asyncio.get_running_loop()`` raises `RuntimeError` ("no running
    event loop") as asyncio itself would, without importing it: a program on trio, whose
    every store call asks, never loads asyncio.

    Example:
        >>> asyncio = lazy_asyncio(globals())
        >>> try:
        ...     asyncio.get_running_loop()
        ... except RuntimeError as exc:
        ...     print(exc)
        no running event loop
        >>> asyncio.run(asyncio.sleep(0, "done"))
        'done'
    """
    return cast(ModuleType, _LazyAsyncio("asyncio", namespace, ()))


def lazy_callable(module: str, name: str, namespace: dict[str, Any]) -> Any:
    """A stand-in for the function or class ``name`` of ``module``, imported on its first call.

    For a name the code only calls (``Path(...)``, ``unquote(...)``), bound at module level
    as ``from module import name`` would bind it. Bind it in the ``else`` branch of an ``if
    TYPE_CHECKING:`` that imports the real name, so that type checkers see its real type.

    Args:
        module: The module's absolute name (``"pathlib"``).
        name: The name in it (``"Path"``).
        namespace: The ``globals()`` of the module that binds the stand-in: the first call
            replaces the stand-in there with the real one.

    Example:
        >>> hsv = lazy_callable("colorsys", "rgb_to_hsv", globals())
        >>> hsv
        <colorsys.rgb_to_hsv, imported when first called>
        >>> hsv(0.0, 1.0, 0.0)
        (0.3333333333333333, 1.0, 1.0)
        >>> hsv  # doctest: +ELLIPSIS
        <function rgb_to_hsv at 0x...>
    """
    return _LazyCallable(module, name, namespace)
