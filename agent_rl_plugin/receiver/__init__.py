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
"""

from __future__ import annotations

from agent_rl_plugin.receiver.client import (
    RemoteQueryError,
    fetch_stats,
    find_receiver,
    info_path,
    remote_query,
)
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

__all__ = [
    "Accepted",
    "BodyTooLarge",
    "DEFAULT_PORT",
    "DecodeError",
    "Receiver",
    "ReceiverConfigError",
    "ReceiverStats",
    "RemoteQueryError",
    "SpanSink",
    "TRACES_PATH",
    "decode_body",
    "fetch_stats",
    "find_receiver",
    "info_path",
    "remote_query",
    "request_from_json",
    "spans_from_request",
]
