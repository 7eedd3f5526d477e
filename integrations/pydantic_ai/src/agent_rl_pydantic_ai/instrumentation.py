"""Switching pydantic-ai's own OpenTelemetry instrumentation on, from ``configure()``.

pydantic-ai instruments nothing by default (``Agent._instrument_default`` is ``False``): its
spans exist only for agents given ``agent.instrument = ...`` or an ``Instrumentation`` capability,
or after ``Agent.instrument_all()``.
:func:`apply` (called by the plugin's ``agent_rl_configure`` hook, i.e. once by every
:func:`agent_rl_plugin.configure` that sets up recording) calls ``Agent.instrument_all(settings)`` with
:func:`settings_for` the config, on the global tracer provider ``configure()`` just set up, so
every pydantic-ai run lands in the store. Rules:

* **pydantic-ai is never imported by us.** When it is already imported, instrumentation is
  switched on at once; otherwise a one-shot import hook (:class:`_PostImportFinder`, on
  ``sys.meta_path``) switches it on right after ``import pydantic_ai`` finishes, and removes
  itself. So ``agent-rl`` commands and programs that never use pydantic-ai do not pay its import.
* **The user's choice wins.** An ``Agent.instrument_all(...)`` of the user's (before or after
  ``configure()``) is left alone, and an agent with its own setting (``agent.instrument = False``,
  or an ``Instrumentation`` capability) keeps it: only the class-wide default is set, and only while it is pydantic-ai's
  default ``False`` or the settings this module installed (a later ``configure()`` with other
  settings replaces ours). :func:`disable` puts ``False`` back.
* ``AGENT_RL_PYDANTIC_AI_INSTRUMENT=0`` turns the automatic switch off (``enable()`` still works).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
from typing import Any

logger = logging.getLogger(__name__)

ENV_SWITCH = "AGENT_RL_PYDANTIC_AI_INSTRUMENT"
MODULE = "pydantic_ai"
#: The GenAI message format asked of pydantic-ai: 6 puts tool results in ``role='tool'``
#: messages (5, its default, in ``role='user'`` ones), which is what chat templates expect.
FORMAT_VERSION = 6

_lock = threading.RLock()
_installed: Any = None  # the InstrumentationSettings we set as Agent's default, if any
_pending: dict[str, Any] = {}  # "capture_content" waiting for pydantic_ai to be imported


def _switched_off() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "false", "no", "off")


def settings_for(capture_content: bool = True) -> Any:
    """pydantic-ai ``InstrumentationSettings`` for recording (imports pydantic-ai).

    On the global tracer provider (the one ``configure()`` uses), message format
    :data:`FORMAT_VERSION`, content included unless ``capture_content`` is false, and binary
    content (images, audio) left out (its media type stays): base64 blobs would be cut at the
    store's attribute size limit and make the messages invalid JSON."""
    from pydantic_ai.models.instrumented import InstrumentationSettings

    kwargs = dict(include_content=capture_content, include_binary_content=False)
    try:
        return InstrumentationSettings(version=FORMAT_VERSION, **kwargs)
    except (TypeError, ValueError):  # a pydantic-ai without format 6
        return InstrumentationSettings(**kwargs)


def _agent_class() -> Any:
    module = sys.modules.get(MODULE)
    return getattr(module, "Agent", None)


def _install(capture_content: bool, force: bool = False) -> bool:
    """Set our settings as Agent's default unless the user chose otherwise; True when set."""
    global _installed
    agent = _agent_class()
    if agent is None:
        return False
    current = getattr(agent, "_instrument_default", False)
    if not force and current is not False and current is not _installed:
        return False  # the user's own Agent.instrument_all(...)
    if not force and current is False and _installed is not None:
        return False  # ours was switched off by Agent.instrument_all(False): leave it off
    settings = settings_for(capture_content)
    agent.instrument_all(settings)
    _installed = settings
    return True


def apply(capture_content: bool = True) -> None:
    """Switch pydantic-ai's instrumentation on now, or right after it is imported (see above).
    Never raises: a failure is logged and recording of other spans goes on."""
    if _switched_off():
        return
    with _lock:
        try:
            if _agent_class() is not None:
                _install(capture_content)
                return
            _pending["capture_content"] = capture_content
            _PostImportFinder.register()
        except Exception:
            logger.warning("agent-rl-pydantic-ai: could not switch pydantic-ai instrumentation on", exc_info=True)


def enable(capture_content: bool = True) -> Any:
    """Switch pydantic-ai's instrumentation on for every agent now (imports pydantic-ai), even
    over an earlier ``Agent.instrument_all(False)``. Returns the settings installed."""
    import pydantic_ai  # noqa: F401

    with _lock:
        _install(capture_content, force=True)
        return _installed


def disable() -> None:
    """Undo: Agent's default back to ``False`` if it holds our settings; no pending hook."""
    global _installed
    with _lock:
        _pending.clear()
        _PostImportFinder.unregister()
        agent = _agent_class()
        if agent is not None and getattr(agent, "_instrument_default", False) is _installed and _installed is not None:
            agent.instrument_all(False)
        _installed = None


def installed() -> Any:
    """The settings this module installed as Agent's default (``None`` when none)."""
    return _installed


def _on_imported() -> None:
    with _lock:
        if "capture_content" not in _pending:
            return
        capture_content = _pending.pop("capture_content")
        try:
            _install(capture_content)
        except Exception:
            logger.warning("agent-rl-pydantic-ai: could not switch pydantic-ai instrumentation on", exc_info=True)


class _Loader(importlib.abc.Loader):
    """Runs the real loader of ``pydantic_ai``, puts it back on the module, then calls back."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        spec = getattr(module, "__spec__", None)
        if spec is not None:
            spec.loader = self.real
        module.__loader__ = self.real
        self.real.exec_module(module)
        _on_imported()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.real, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """One-shot: finds ``pydantic_ai`` with the other finders and wraps its loader."""

    _instance: "_PostImportFinder | None" = None

    @classmethod
    def register(cls) -> None:
        if cls._instance is None or cls._instance not in sys.meta_path:
            cls._instance = cls()
            sys.meta_path.insert(0, cls._instance)

    @classmethod
    def unregister(cls) -> None:
        if cls._instance is not None and cls._instance in sys.meta_path:
            sys.meta_path.remove(cls._instance)
        cls._instance = None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != MODULE:
            return None
        type(self).unregister()  # one shot, whatever happens next
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec
