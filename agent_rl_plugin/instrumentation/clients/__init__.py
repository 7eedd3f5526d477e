"""LLM client capture: every call an agent makes through the OpenAI SDK, the Anthropic SDK or
LiteLLM is recorded as a GenAI ``chat`` span, with no code in the agent.

:func:`agent_rl_plugin.configure` switches it on (``instrument_clients="auto"``, the default:
every supported SDK that is installed; ``"none"`` or ``[]``: off; or a list of names). Calls
made inside a rollout are recorded in it, as children of the current span. An SDK that is not
imported yet is patched right after its first import, so configuring costs no SDK import.

Contract:

* :func:`instrument_clients` is idempotent: naming a client twice patches it once; it returns
  the names now captured or waiting for their SDK's import. An unknown name raises
  :class:`UnknownClientError` (a ``ValueError``); a known SDK that is not installed is skipped
  (``"auto"``) or reported once as a warning (named explicitly).
* :func:`uninstrument_clients` restores every patched method exactly (the same function objects).
* A captured call behaves exactly as before: same arguments, same return value (a stream is
  passed through chunk by chunk), same exceptions. Recording failures are logged, never raised.
* No double recording: a call is not captured while capture is paused
  (:func:`client_capture_paused`, which integrations use around a framework's own recorded
  model call), while another captured call runs (LiteLLM over OpenAI), or while a framework's
  own LLM span is the current span.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
from types import ModuleType
from typing import Callable, Iterable

from agent_rl_plugin.config import SUPPORTED_LLM_CLIENTS
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.instrumentation.clients.capture import (
    ENABLED,
    client_capture_paused,
    is_capture_paused,
    pause_client_capture,
    resume_client_capture,
)
from agent_rl_plugin.instrumentation.clients.registry import Patch, apply, cancel_waiting, restore, when_imported

logger = logging.getLogger("agent_rl_plugin.instrumentation")


def _openai() -> list[Patch]:
    from agent_rl_plugin.instrumentation.clients import openai_sdk

    return openai_sdk.patches()


def _anthropic() -> list[Patch]:
    from agent_rl_plugin.instrumentation.clients import anthropic_sdk

    return anthropic_sdk.patches()


def _litellm() -> list[Patch]:
    from agent_rl_plugin.instrumentation.clients import litellm_sdk

    return litellm_sdk.patches()


#: Supported clients: name -> (top-level module, its patches).
CLIENTS: dict[str, tuple[str, Callable[[], list[Patch]]]] = {
    "openai": ("openai", _openai),
    "anthropic": ("anthropic", _anthropic),
    "litellm": ("litellm", _litellm),
}

assert tuple(CLIENTS) == SUPPORTED_LLM_CLIENTS  # one list of names: config validates against it

_lock = threading.RLock()


class UnknownClientError(AgentRLError, ValueError):
    """An ``instrument_clients`` name that is not a supported client."""


def resolve_clients(selection: str | Iterable[str] | None) -> list[str]:
    """The client names a ``instrument_clients`` setting selects (``"auto"``: all supported)."""
    if selection is None:
        return []
    names = [selection] if isinstance(selection, str) else list(selection)
    chosen: list[str] = []
    for raw in names:
        for name in (part.strip().lower() for part in str(raw).split(",")):
            if name in ("", "none", "off"):
                continue
            if name == "auto":
                chosen.extend(CLIENTS)
            elif name in CLIENTS:
                chosen.append(name)
            else:
                raise UnknownClientError(
                    f"unknown LLM client {name!r} in instrument_clients",
                    hint=f"use 'auto', 'none' or some of: {', '.join(CLIENTS)}",
                )
    return list(dict.fromkeys(chosen))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _patcher(name: str, patches: Callable[[], list[Patch]]) -> Callable[[ModuleType], None]:
    def patch(_module: ModuleType) -> None:
        with _lock:  # switched off meanwhile (after the SDK's import began): leave it unpatched
            if name in ENABLED:
                apply(patches())

    return patch


def instrument_clients(selection: str | Iterable[str] = "auto") -> list[str]:
    """Capture the selected LLM clients (see the module contract); returns the names captured now
    or as soon as their SDK is imported."""
    given = [selection] if isinstance(selection, str) else list(selection)
    explicit = not any(str(item).strip().lower() == "auto" for item in given)
    names = resolve_clients(selection)
    captured = []
    for name in names:
        module, patches = CLIENTS[name]
        with _lock:
            if name in ENABLED:
                captured.append(name)
                continue
            if not _installed(module):
                if explicit:
                    logger.warning("instrument_clients: %s is not installed; its calls cannot be captured", module)
                continue
            ENABLED.add(name)
        when_imported(module, _patcher(name, patches))
        captured.append(name)
    return captured


def uninstrument_clients(selection: str | Iterable[str] = "auto") -> None:
    """Stop capturing the selected clients and restore their SDK methods."""
    for name in resolve_clients(selection):
        module, patches = CLIENTS[name]
        with _lock:
            if name not in ENABLED:
                continue
            ENABLED.discard(name)
        cancel_waiting(module)
        if module in sys.modules:
            restore(patches())


def instrumented_clients() -> list[str]:
    """The client names captured now or waiting for their SDK's import."""
    with _lock:
        return sorted(ENABLED)


__all__ = [
    "CLIENTS",
    "UnknownClientError",
    "client_capture_paused",
    "instrument_clients",
    "instrumented_clients",
    "is_capture_paused",
    "pause_client_capture",
    "resume_client_capture",
    "resolve_clients",
    "uninstrument_clients",
]
