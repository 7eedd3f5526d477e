"""Built-in plugin: export spans over OTLP/HTTP to any collector when an endpoint is set.

Registers an ``OTLPSpanExporter`` (protobuf over HTTP) as exporter ``otlp`` when
``config.otlp_endpoint`` is set (``configure(otlp_endpoint="http://127.0.0.1:4318/v1/traces")``
or ``AGENT_RL_OTLP_ENDPOINT``). A bare ``http://host:port`` gets ``/v1/traces`` appended.

Without it, the standard OpenTelemetry variables are honoured, as every OTel SDK does:
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (the full URL, used as given) or
``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL: ``/v1/traces`` is appended), with
``OTEL_EXPORTER_OTLP_HEADERS`` / ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` read by the exporter
itself. ``AGENT_RL_OTLP_ENDPOINT`` / ``otlp_endpoint`` win over them.

Token: unless an ``Authorization`` header is configured (``otlp_headers``, or the OTel header
variables, which are merged in here), the exporter sends ``Authorization: Bearer T`` with ``T`` from
``$AGENT_RL_SERVE_TOKEN``, else, for a loopback endpoint, the token a running ``agent-rl
serve`` of this user wrote for that port (see :func:`~agent_rl_plugin.receiver.client.token_for_endpoint`;
read when the exporter is made, so start the receiver first).
"""

from __future__ import annotations

import os
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


def endpoint_for(config: RLConfig) -> str | None:
    """The traces URL to export to: ``config.otlp_endpoint``, else the standard OTel variables
    (see the module doc), else ``None`` (no OTLP export)."""
    if config.otlp_endpoint:
        return traces_url(config.otlp_endpoint)
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        return base.rstrip("/") + TRACES_PATH
    return None


@hookimpl
def agent_rl_register_exporters(register: Callable[[str, SpanExporter], None], config: RLConfig) -> None:
    endpoint = endpoint_for(config)
    if not endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # headers=None lets the exporter read OTEL_EXPORTER_OTLP_(TRACES_)HEADERS
    register("otlp", OTLPSpanExporter(endpoint=endpoint, headers=headers_for(endpoint, config) or None))


def headers_for(endpoint: str, config: RLConfig) -> dict[str, str]:
    """The exporter's headers: ``config.otlp_headers``, else those of the OTel header variables
    (``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` over ``OTEL_EXPORTER_OTLP_HEADERS``), plus the
    receiver's bearer token when no Authorization header is among them (see the module doc).
    Empty when there is nothing to send."""
    headers = dict(config.otlp_headers)
    if not headers:
        from opentelemetry.util.re import parse_env_headers

        for name in ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"):
            if os.environ.get(name):
                headers = dict(parse_env_headers(os.environ[name], liberal=True))
                break
    if any(name.lower() == "authorization" for name in headers):
        return headers
    from agent_rl_plugin.receiver.client import TOKEN_ENV, token_for_endpoint

    token = os.environ.get(TOKEN_ENV) or token_for_endpoint(endpoint)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers
