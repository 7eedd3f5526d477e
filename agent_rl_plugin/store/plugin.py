"""Built-in plugin: record spans into the DuckDB file ``config.db_path``.

Registers a :class:`~agent_rl_plugin.store.exporter.DuckDBSpanExporter` as exporter ``duckdb``
when ``config.db_path`` is set (the default, ``agent_rl.duckdb``); ``db_path=None`` records
no file. Values longer than ``config.max_attribute_size`` are cut on the way in, so spans from
other libraries are bounded like ours.
"""

from __future__ import annotations

from typing import Callable

from opentelemetry.sdk.trace.export import SpanExporter

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl


@hookimpl
def agent_rl_register_exporters(register: Callable[[str, SpanExporter], None], config: RLConfig) -> None:
    if not config.db_path:
        return
    from agent_rl_plugin.store.exporter import DuckDBSpanExporter

    register(
        "duckdb",
        DuckDBSpanExporter(
            config.db_path,
            max_attribute_size=config.max_attribute_size,
            max_pending_spans=max(4 * config.max_queue_size, 100_000),
        ),
    )
