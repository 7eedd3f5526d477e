"""``agent-rl ui``: a live local web UI over a store (``docs/ui.md``).

:class:`UiApp` is the whole UI as one callable ``app(request) -> response``
(:mod:`agent_rl_plugin.receiver.mounts`), over a :class:`FileBackend` (a database file agents may
be recording into) or a :class:`ReceiverBackend` (``agent-rl serve`` mounts it at ``/ui``).
:func:`serve_ui` serves it alone on 127.0.0.1.
"""

from __future__ import annotations

from agent_rl_plugin.ui.app import UiApp
from agent_rl_plugin.ui.backend import Backend, FileBackend, ReceiverBackend
from agent_rl_plugin.ui.server import UiServer, serve_ui

__all__ = ["Backend", "FileBackend", "ReceiverBackend", "UiApp", "UiServer", "serve_ui"]
