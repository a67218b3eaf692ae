"""Standard modules that a module names at its top and imports when a call first uses them.

`import interlock` should not pay for what only a run needs. `asyncio` is the case in point:
importing it costs a fresh process more than all of interlock's own modules together (it loads
``ssl``, ``socket``, ``subprocess``, ``concurrent.futures``...), and a program that only builds
graphs, prints a command's help or runs on trio never calls it. A module that uses it writes
(a sketch)::

    if TYPE_CHECKING:
        import asyncio
    else:
        asyncio = lazy_module("asyncio", globals())

and its functions keep calling ``asyncio.get_running_loop()`` as before. The first attribute
read imports the module and binds it in place of the stand-in, so every later read is an
ordinary global lookup at no extra cost. Type checkers see the plain import. With ``from
__future__ import annotations`` the annotations that name the module are never evaluated, so
they do not import it; code at module level that reads an attribute would, and must not.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, cast

__all__ = ["lazy_module"]


class _LazyModule:
    """Stands for a module until the first attribute read, which imports it."""

    __slots__ = ("_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any]) -> None:
        self._name = name
        self._namespace = namespace

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        # Bind the module wherever the stand-in is bound, so later reads skip this method.
        for key, value in list(self._namespace.items()):
            if value is self:
                self._namespace[key] = module
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported when first used>"


def lazy_module(name: str, namespace: dict[str, Any]) -> ModuleType:
    """A stand-in for the module ``name`` that imports it on its first attribute read.

    Args:
        name: The module's absolute name (``"asyncio"``).
        namespace: The ``globals()`` of the module that binds the stand-in: the first read
            replaces the stand-in there with the module itself.

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
    return cast(ModuleType, _LazyModule(name, namespace))
