"""Built-in plugin: export spans over OTLP/HTTP to any collector when an endpoint is set.

Registers an ``OTLPSpanExporter`` (protobuf over HTTP) as exporter ``otlp`` when
``config.otlp_endpoint`` is set (``configure(otlp_endpoint="http://127.0.0.1:4318/v1/traces")``
or ``AGENT_RL_OTLP_ENDPOINT``). A bare ``http://host:port`` gets ``/v1/traces`` appended.
"""

from __future__ import annotations

from typing import Callable

from opentelemetry.sdk.trace.export import SpanExporter

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl

TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """``endpoint`` with the OTLP traces path added when it names only a host and port."""
    stripped = endpoint.rstrip("/")
    if stripped.endswith(TRACES_PATH):
        return stripped
    scheme_and_rest = stripped.split("://", 1)
    rest = scheme_and_rest[-1]
    return stripped + TRACES_PATH if "/" not in rest else stripped


@hookimpl
def agent_rl_register_exporters(register: Callable[[str, SpanExporter], None], config: RLConfig) -> None:
    if not config.otlp_endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    register(
        "otlp",
        OTLPSpanExporter(endpoint=traces_url(config.otlp_endpoint), headers=dict(config.otlp_headers)),
    )
