"""Finding the agent named on the command line: ``MODULE:FUNC`` or ``path/to/file.py:FUNC``.

* ``MODULE`` is imported with the current directory first on ``sys.path`` (it is added), so a
  module next to the task file works without installing it; ``FUNC`` may be dotted
  (``agents:Shop.run``, ``agents:AGENT.chat``).
* A ``MODULE`` ending in ``.py`` or containing a path separator is loaded from that file.
* Every failure is an :class:`AgentLoadError` with one clear line and a hint: no ``:``, no such
  module (told apart from a module that exists but fails to import, e.g. a missing dependency
  of it), no such attribute (the module's callables are listed), not callable.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from types import ModuleType
from typing import Any, Callable

from agent_rl_plugin.errors import AgentRLError

EXAMPLE = "agent-rl rollouts run my_agent:run"


class AgentLoadError(AgentRLError, ValueError):
    """The agent could not be found or is not callable; ``hint`` says the fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _from_file(path: str) -> ModuleType:
    if not os.path.isfile(path):
        raise AgentLoadError(
            f"no file at {path}", "pass an existing .py file, or MODULE:FUNC with an importable module"
        )
    name = "_agent_rl_agent_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentLoadError(f"cannot load {path} as a Python module", "pass a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file's own sibling imports work
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise AgentLoadError(
            f"importing {path} failed: {type(exc).__name__}: {exc}", "fix the error in that file"
        ) from None
    return module


def _import(module_name: str, cwd: str) -> ModuleType:
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise AgentLoadError(
                f"no module named {module_name!r} (looked in {cwd} and the installed packages)",
                "run from the folder that holds it, or pass a file: path/to/agent.py:FUNC",
            ) from None
        raise AgentLoadError(
            f"importing {module_name} failed: {exc}", f"install the package {missing!r} that {module_name} imports"
        ) from None
    except (Exception, SystemExit) as exc:
        raise AgentLoadError(
            f"importing {module_name} failed: {type(exc).__name__}: {exc}", "fix the error in that module"
        ) from None


def _callables(module: ModuleType) -> list[str]:
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or not callable(value) or inspect.ismodule(value):
            continue
        if getattr(value, "__module__", module.__name__) == module.__name__:
            names.append(name)
    return sorted(names)


def load_agent(target: str, cwd: str | None = None) -> Callable[..., Any]:
    """The callable named by ``target`` (see the module contract)."""
    module_part, sep, attribute = target.rpartition(":")
    if not sep or not module_part or not attribute:
        raise AgentLoadError(f"{target!r} is not MODULE:FUNC", f"name the module and the function, e.g. {EXAMPLE}")
    cwd = os.path.abspath(cwd or os.getcwd())
    is_file = module_part.endswith(".py") or os.sep in module_part or "/" in module_part
    if is_file:
        path = module_part if os.path.isabs(module_part) else os.path.join(cwd, module_part)
        module = _from_file(path)
    else:
        module = _import(module_part, cwd)
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            available = ", ".join(_callables(module)) or "none"
            raise AgentLoadError(
                f"{module_part} has no attribute {attribute!r}", f"callables defined in {module_part}: {available}"
            ) from None
    if not callable(value):
        raise AgentLoadError(
            f"{target} is not callable (it is a {type(value).__name__})",
            "point at a function (or an object with __call__) that takes the task dict",
        )
    return value
