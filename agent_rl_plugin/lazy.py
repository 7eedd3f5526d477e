"""Package facades whose names load on first use.

``__getattr__, __dir__ = lazy_exports(__name__, {"Name": "package.module", ...})`` in a
package's ``__init__``: ``package.Name`` imports ``package.module`` the first time it is read
(then keeps it in the package's namespace), so importing the package costs only what is used.
An unknown name raises ``AttributeError``, as a module attribute lookup does.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``exports`` (name -> module)."""

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
