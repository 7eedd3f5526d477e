"""``agent-rl serve``: an OTLP/HTTP traces receiver that is the single writer of a DuckDB file.

Many agent processes cannot write one DuckDB file (one writing process per file). They export
OTLP/HTTP instead (``configure(otlp_endpoint="http://127.0.0.1:4318", db=None)``) to one
:class:`Receiver`, which decodes each batch (:mod:`.decode`) straight into the store's span
fields (:func:`.decode.fields_from_request`), converts them with the store's own row conversion and queues
them for one writer thread (:mod:`.sink`), with back-pressure (503 +
``Retry-After``) when the queue is full. Reads while it runs go through its ``POST /query``
(:mod:`.client`; ``agent-rl query`` finds it through ``<db>.serve.json``).

* :class:`Receiver` (``start()``, ``port``, ``url``, ``stop()``, ``stats_snapshot()``); it
  refuses what a web page could forge and makes a token when none is given (docs/security.md)
* :func:`find_receiver`, :func:`remote_query`, :func:`fetch_stats`
* :func:`decode_body`, :func:`request_from_json`, :func:`spans_from_request`, :class:`DecodeError`

Names load on first use (a decode worker imports :mod:`.decode` without the server, DuckDB or
the client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_rl_plugin.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "RemoteQueryError": "agent_rl_plugin.receiver.client",
    "fetch_stats": "agent_rl_plugin.receiver.client",
    "find_receiver": "agent_rl_plugin.receiver.client",
    "info_path": "agent_rl_plugin.receiver.client",
    "remote_query": "agent_rl_plugin.receiver.client",
    "BodyTooLarge": "agent_rl_plugin.receiver.decode",
    "DecodeError": "agent_rl_plugin.receiver.decode",
    "decode_body": "agent_rl_plugin.receiver.decode",
    "request_from_json": "agent_rl_plugin.receiver.decode",
    "spans_from_request": "agent_rl_plugin.receiver.decode",
    "DEFAULT_PORT": "agent_rl_plugin.receiver.server",
    "TRACES_PATH": "agent_rl_plugin.receiver.server",
    "Receiver": "agent_rl_plugin.receiver.server",
    "ReceiverConfigError": "agent_rl_plugin.receiver.server",
    "Accepted": "agent_rl_plugin.receiver.sink",
    "SpanSink": "agent_rl_plugin.receiver.sink",
    "ReceiverStats": "agent_rl_plugin.receiver.stats",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from agent_rl_plugin.receiver.client import RemoteQueryError, fetch_stats, find_receiver, info_path, remote_query
    from agent_rl_plugin.receiver.decode import (
        BodyTooLarge,
        DecodeError,
        decode_body,
        request_from_json,
        spans_from_request,
    )
    from agent_rl_plugin.receiver.server import DEFAULT_PORT, TRACES_PATH, Receiver, ReceiverConfigError
    from agent_rl_plugin.receiver.sink import Accepted, SpanSink
    from agent_rl_plugin.receiver.stats import ReceiverStats
