"""Peers measured in the same run as ours (``python -m bench --peers``).

Each peer runs in its own virtual environment (:mod:`bench.peers.envs`, built once from the
package index and reused, never on the timed path) and is driven by a worker script run with
that environment's python; our side runs in the bench's own process. The rows:

* ``peers_mlflow``: ``@trace_agent`` + DuckDB against ``@mlflow.trace`` + a local SQLite
  tracking store (per-call time, traces persisted vs sent; MLflow's default asynchronous
  logging and its synchronous, lose-nothing setting);
* ``peers_phoenix``: ``agent-rl serve`` against Arize Phoenix's OTLP receiver (its default
  SQLite): 4 processes exporting with the OTel SDK's OTLP/HTTP exporter, clock until every
  span is queryable;
* ``peers_agentlightning``: Agent Lightning 0.3.0's tracer and store, for both.

A peer that cannot be installed or run offline makes its row SKIP with the reason.
"""

from __future__ import annotations

from bench.peers.envs import PeerSpec

#: The peer environments, by name.
SPECS: dict[str, PeerSpec] = {
    "mlflow": PeerSpec("mlflow", ("mlflow",), "mlflow"),
    "phoenix": PeerSpec("phoenix", ("arize-phoenix",), "arize-phoenix"),
    "agentlightning": PeerSpec("agentlightning", ("agentlightning==0.3.0",), "agentlightning"),
}
