"""Patching SDK methods, idempotently and reversibly, now or when the SDK is first imported.

Contract:

* A :class:`Patch` names one attribute (``module``, ``owner`` class or ``""`` for the module,
  ``attribute``) and ``make(original) -> wrapper``. :func:`apply` replaces each attribute whose
  current value is not already ours, and :func:`restore` puts back exactly the original object;
  applying twice is a no-op, restoring what was never patched too.
* :func:`when_imported` runs a callback for a top-level module: at once when it is already
  imported, else right after its first import finishes (a finder at the front of
  ``sys.meta_path`` chains the real loader; the module's ``__loader__`` and ``__spec__.loader``
  are set back to the real one). Nothing is imported here: recording stays light, and an agent
  that never imports an SDK never pays for it.
* A patch that cannot be applied (an SDK version that moved the method) is logged once and
  skipped; the other patches still apply. Nothing here raises into the importer or the agent.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

from agent_rl_plugin.instrumentation.spans import log_failure

logger = logging.getLogger("agent_rl_plugin.instrumentation")

#: Set on every wrapper we install; the original is its ``__wrapped__``.
MARKER = "__agent_rl_client_wrapper__"


@dataclass(frozen=True)
class Patch:
    """One attribute to wrap: ``module.owner.attribute`` (``owner=""``: ``module.attribute``)."""

    module: str
    owner: str
    attribute: str
    make: Callable[[Any], Any]


_lock = threading.RLock()
_applied: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}  # key -> (holder, original, wrapper)
_waiting: dict[str, list[Callable[[ModuleType], None]]] = {}


def _holder(patch: Patch) -> Any:
    module = importlib.import_module(patch.module)
    return getattr(module, patch.owner) if patch.owner else module


def apply(patches: Sequence[Patch]) -> int:
    """Install ``patches``; returns how many are in place afterwards (new or already ours)."""
    in_place = 0
    with _lock:
        for patch in patches:
            key = (patch.module, patch.owner, patch.attribute)
            try:
                holder = _holder(patch)
                current = (
                    holder.__dict__[patch.attribute] if isinstance(holder, type) else getattr(holder, patch.attribute)
                )
                if getattr(current, MARKER, False):
                    in_place += 1
                    continue
                wrapper = patch.make(current)
                setattr(wrapper, MARKER, True)
                wrapper.__wrapped__ = current
                setattr(holder, patch.attribute, wrapper)
                _applied[key] = (holder, current, wrapper)
                in_place += 1
            except Exception:
                log_failure(f"patching {patch.module}.{patch.owner + '.' if patch.owner else ''}{patch.attribute}")
    return in_place


def restore(patches: Sequence[Patch]) -> None:
    """Put back the originals of ``patches`` that :func:`apply` installed."""
    with _lock:
        for patch in patches:
            entry = _applied.pop((patch.module, patch.owner, patch.attribute), None)
            if entry is None:
                continue
            holder, original, wrapper = entry
            try:
                current = (
                    holder.__dict__.get(patch.attribute)
                    if isinstance(holder, type)
                    else getattr(holder, patch.attribute, None)
                )
                if current is wrapper:
                    setattr(holder, patch.attribute, original)
                else:  # another library wrapped ours: leave its chain, ours then records nothing
                    logger.warning(
                        "%s.%s was wrapped again after agent-rl patched it; the outer wrapper is left in place "
                        "(agent-rl's, inside it, no longer records)",
                        patch.owner or patch.module,
                        patch.attribute,
                    )
            except Exception:
                log_failure(f"restoring {patch.module}.{patch.attribute}")


class _ChainedLoader(importlib.abc.Loader):
    """Runs the real loader, then the callbacks waiting for the module."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        with _lock:
            callbacks = _waiting.pop(self._name, [])
            _uninstall_finder_if_idle()
        for callback in callbacks:
            try:
                callback(module)
            except Exception:
                log_failure(f"instrumenting {self._name} after its import")


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a watched name, wraps the spec another finder returns."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec(fullname, path, target)
            except Exception:
                continue
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _ChainedLoader(spec.loader, fullname)
            return spec
        return None


_watcher = _ImportWatcher()


def _uninstall_finder_if_idle() -> None:
    if not _waiting and _watcher in sys.meta_path:
        sys.meta_path.remove(_watcher)


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> bool:
    """Run ``callback(module)`` for the top-level module ``name`` now if imported (returns
    ``True``), else after its first import (returns ``False``)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return True
    with _lock:
        _waiting.setdefault(name, []).append(callback)
        if _watcher not in sys.meta_path:
            sys.meta_path.insert(0, _watcher)
    return False


def cancel_waiting(name: str) -> None:
    """Forget the callbacks waiting for ``name``'s import."""
    with _lock:
        _waiting.pop(name, None)
        _uninstall_finder_if_idle()


__all__ = ["MARKER", "Patch", "apply", "cancel_waiting", "restore", "when_imported"]
