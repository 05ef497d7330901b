"""What ``dir()`` and tab completion show of a public module: its own names, not its imports."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Callable

__all__ = ["own_names"]


def own_names(module_name: str) -> Callable[[], list[str]]:
    """A module's ``__dir__`` (PEP 562): its ``__all__`` and its submodules, leaving out what it
    imported to do its work (``np``, ``Any``, ``annotations``, helpers of other modules).

    Use as ``__dir__ = own_names(__name__)`` after ``__all__``."""

    def __dir__() -> list[str]:
        module = sys.modules[module_name]
        subs = {n for n, v in vars(module).items() if isinstance(v, ModuleType) and v.__name__ == f"{module_name}.{n}"}
        return sorted(set(module.__all__) | subs)

    return __dir__
