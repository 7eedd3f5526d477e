"""docs/scaling.md and the Collector example: the YAML parses, and it points at what
``agent-rl serve`` and ``agent-rl ingest`` actually use."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import yaml

from agent_rl_plugin.otlp_plugin import traces_url
from agent_rl_plugin.receiver import DEFAULT_PORT, TRACES_PATH
from agent_rl_plugin.store.ingest import JSON_SUFFIXES

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "collector" / "otel-collector.yaml"
DOC = ROOT / "docs" / "scaling.md"


def load() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def test_collector_config_parses_and_wires_a_traces_pipeline():
    config = load()
    pipeline = config["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    for name in pipeline["exporters"]:
        assert name in config["exporters"]
    for name in pipeline.get("processors", []):
        assert name in config["processors"]
    assert "http" in config["receivers"]["otlp"]["protocols"]


def test_otlphttp_exporter_targets_agent_rl_serve():
    config = load()
    (name,) = [n for n in config["exporters"] if n.split("/")[0] == "otlphttp"]
    exporter = config["exporters"][name]
    url = urlparse(exporter["endpoint"])
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.port == DEFAULT_PORT
    # The Collector appends /v1/traces to a base endpoint, as our own exporter config does.
    assert traces_url(exporter["endpoint"]).endswith(TRACES_PATH) and url.path in ("", "/")
    assert exporter.get("encoding", "proto") in ("proto", "json")
    assert exporter.get("compression") in (None, "gzip", "deflate", "none")
    assert "AGENT_RL_SERVE_TOKEN" in exporter["headers"]["Authorization"]
    # The Collector's own OTLP/HTTP receiver must not take the receiver's port on the same host.
    http_endpoint = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert not http_endpoint.endswith(f":{DEFAULT_PORT}")


def test_file_exporter_writes_what_ingest_reads():
    config = load()
    (name,) = [n for n in config["exporters"] if n.split("/")[0] == "file"]
    exporter = config["exporters"][name]
    assert exporter.get("format", "json") == "json"  # OTLP/JSON lines; proto files are not read
    assert exporter["path"].endswith(JSON_SUFFIXES)
    assert "compression" not in exporter  # the Collector compresses with zstd, which ingest does not read


def test_doc_names_the_commands_the_example_and_the_missing_collector():
    text = DOC.read_text()
    for needle in ("agent-rl serve --db", "agent-rl ingest", "agent-rl export parquet", "/v1/traces",
                   "examples/collector/otel-collector.yaml", "hive_partitioning = true", "Retry-After",
                   "<db>.serve.json", "bench/receiver.py"):
        assert needle in text, needle
    assert re.search(r"no\s+OpenTelemetry\s+Collector\s+binary", text, re.IGNORECASE)
    assert "otlp_endpoint=\"http://127.0.0.1:4318\"" in text
