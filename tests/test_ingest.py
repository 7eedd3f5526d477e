"""``agent-rl ingest``: OTLP/JSON lines (the Collector's ``file`` exporter format) land as the
in-process exporter's rows, idempotently; a malformed line is reported by number and skipped."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from agent_rl_plugin.cli import ingest as ingest_cli
from agent_rl_plugin.cli.main import main
from agent_rl_plugin.receiver.decode import request_to_json
from agent_rl_plugin.receiver.ingest import ingest_paths
from test_receiver import SPAN_COLUMNS, make_spans, reference_db


def rows(db: Path, table: str = "spans", columns: str = SPAN_COLUMNS) -> list[tuple]:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute(f"select {columns} from {table} order by all").fetchall()
    finally:
        connection.close()


@pytest.fixture
def cli(plugin_manager, capsys):
    """``agent-rl ARGS`` in this process with the ingest command registered as a plugin."""
    if not plugin_manager.is_registered(ingest_cli):
        plugin_manager.register(ingest_cli, name="cli_ingest")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        return exit_info.value.code or 0, out, err

    return run


@pytest.fixture
def otlp_files(tmp_path: Path):
    """Two OTLP/JSON lines files (one gzipped) with a malformed line and a blank line, and the
    spans they hold."""
    batches = [make_spans(3, f"b{i}") for i in range(4)]
    lines = [request_to_json(encode_spans(batch)) for batch in batches]
    plain = tmp_path / "in" / "traces.jsonl"
    plain.parent.mkdir()
    plain.write_text(lines[0] + "\n" + '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 12}]}]}]}\n'
                     + "\n" + lines[1] + "\n" + "this is not json\n" + lines[1] + "\n")
    zipped = tmp_path / "in" / "more.json.gz"
    zipped.write_bytes(gzip.compress((lines[2] + "\n" + lines[3] + "\n").encode()))
    spans = [span for batch in batches for span in batch]
    return plain, zipped, spans


def test_ingest_lands_the_same_rows_reports_bad_lines_and_is_idempotent(cli, otlp_files, tmp_path):
    plain, zipped, spans = otlp_files
    db = tmp_path / "ingested.duckdb"
    code, out, _ = cli("ingest", "--db", str(db), "--json", str(plain.parent))
    assert code == 1  # errors were reported
    summary = json.loads(out)
    assert summary["files"] == 2 and summary["spans_read"] == 30  # 24 + 6 from the repeated line
    assert summary["inserted"] == 24 and summary["skipped_duplicates"] == 6
    assert summary["rewards_inserted"] == 12
    assert [(Path(e["file"]).name, e["line"]) for e in summary["errors"]] == [("traces.jsonl", 2), ("traces.jsonl", 5)]
    assert "not json" in summary["errors"][1]["error"].lower()

    expected = reference_db(tmp_path, spans)
    assert rows(db) == rows(expected)
    reward_columns = "reward_id, rollout_id, step_index, name, value, source, created_at, trace_id, span_id"
    assert rows(db, "rewards", reward_columns) == rows(expected, "rewards", reward_columns)

    code, out, _ = cli("ingest", "--db", str(db), "--json", str(plain), str(zipped))
    again = json.loads(out)
    assert again["inserted"] == 0 and again["skipped_duplicates"] == 30 and again["rewards_inserted"] == 0
    assert rows(db) == rows(expected) and len(rows(db, "rewards", reward_columns)) == 12


def test_clean_files_exit_zero_with_a_human_summary(cli, tmp_path):
    path = tmp_path / "clean.jsonl"
    path.write_text(request_to_json(encode_spans(make_spans(2, "c"))) + "\n")
    db = tmp_path / "clean.duckdb"
    code, out, _ = cli("ingest", "--db", str(db), str(path))
    assert code == 0 and "4 inserted" in out and "0 duplicates" in out and "0 errors" in out


def test_nothing_to_ingest_is_a_clear_error(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = cli("ingest", "--db", str(tmp_path / "x.duckdb"), str(tmp_path / "empty"))
    assert code == 1 and "nothing to ingest" in err and "fix:" in err


def test_a_span_with_invalid_ids_is_reported_the_rest_of_its_line_lands(tmp_path, plugin_manager):
    document = json.loads(request_to_json(encode_spans(make_spans(1, "ids"))))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = ""  # an empty id: not a span
    path = tmp_path / "ids.jsonl"
    path.write_text(json.dumps(document) + "\n")
    report = ingest_paths(tmp_path / "ids.duckdb", [path])
    assert report.inserted == 1 and report.spans_read == 2
    assert report.errors == [{"file": str(path), "line": 1, "error": "1 spans with invalid ids skipped"}]


def test_secrets_in_ingested_files_are_redacted_as_when_recorded(tmp_path, plugin_manager):
    secret = "sk-proj-" + "Q7x" * 12
    document = json.loads(request_to_json(encode_spans(make_spans(1, "sec"))))
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["attributes"].append({"key": "prompt", "value": {"stringValue": f"use key {secret} please"}})
    span["name"] = f"call with {secret}"
    path = tmp_path / "secret.jsonl"
    path.write_text(json.dumps(document) + "\n")
    db = tmp_path / "sec.duckdb"
    report = ingest_paths(db, [path])
    assert report.inserted == 2
    assert secret not in str(rows(db, "spans", "name, attributes"))
    assert "[REDACTED]" in str(rows(db, "spans", "name, attributes"))
    assert secret.encode() not in db.read_bytes()
