"""``export parquet``: the spans table as Hive-partitioned Parquet (date, service), read back by
DuckDB and by ``agent-rl ingest`` into a fresh database with the same rows."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
import typer
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.cli.export_parquet import parquet_command
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.receiver.ingest import ingest_paths
from agent_rl_plugin.store.parquet import ParquetExportError, export_parquet

COLUMNS = ("trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms, status_code, "
           "status_message, attributes, events, links, resource, scope_name, scope_version, service_name, "
           "rollout_id, task_id, group_id, is_rollout_root, operation, span_kind, start_unix_nano, end_unix_nano")
DAYS = ("2026-03-01", "2026-03-02")


def dated_spans(service: str, day: str, n: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test.parquet")
    base = int(datetime.fromisoformat(day).replace(hour=12, tzinfo=timezone.utc).timestamp() * 1e9)
    for i in range(n):
        root = tracer.start_span(f"invoke_agent {service}", start_time=base + i,
                                 attributes={sc.GEN_AI_OPERATION_NAME: "invoke_agent", sc.TASK_ID: f"t{i}"})
        root.add_event(sc.EVENT_EVALUATION_RESULT, {sc.GEN_AI_EVALUATION_NAME: "r",
                                                    sc.GEN_AI_EVALUATION_SCORE_VALUE: float(i)}, timestamp=base + i + 5)
        from opentelemetry import trace

        with trace.use_span(root, end_on_exit=False):
            child = tracer.start_span("chat m", start_time=base + i + 1, attributes={sc.GEN_AI_OPERATION_NAME: "chat"})
            child.end(end_time=base + i + 2)
        root.end(end_time=base + i + 10)
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture
def recorded(plugin_manager, tmp_path: Path) -> Path:
    """3 services x 2 days x 4 traces (2 spans each) in a DuckDB file, one of them with a
    service name that needs escaping in a path."""
    path = tmp_path / "src.duckdb"
    exporter = DuckDBSpanExporter(path, normalizers=[])
    for service in ("alpha", "beta", "gamma/β x"):
        for day in DAYS:
            exporter.export(dated_spans(service, day, 4))
    exporter.shutdown()
    return path


def table_rows(db: Path, table: str = "spans", columns: str = COLUMNS) -> list[tuple]:
    connection = duckdb.connect(str(db), read_only=True)
    try:
        return connection.execute(f"select {columns} from {table} order by all").fetchall()
    finally:
        connection.close()


def app() -> typer.Typer:
    """A tiny app mounting the command the way ``agent-rl export`` does."""
    cli = typer.Typer()
    cli.command("parquet")(parquet_command)
    cli.command("unused")(lambda: None)  # two commands: typer keeps the "parquet" name
    return cli


def test_partitions_by_date_and_service_and_reads_back_with_duckdb(recorded, tmp_path):
    out = tmp_path / "export"
    result = CliRunner().invoke(app(), ["parquet", "--db", str(recorded), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 48 and summary["out"] == str(out)
    assert len(summary["partitions"]) == 6 and summary["files"] >= 6
    folders = sorted(p.relative_to(out).as_posix() for p in out.glob("date=*/service=*"))
    assert folders == sorted(summary["partitions"])
    assert "date=2026-03-01/service=alpha" in folders and "date=2026-03-02/service=beta" in folders
    assert all(p.name.startswith("part-") for p in out.glob("date=*/service=*/*.parquet"))

    connection = duckdb.connect()
    pattern = str(out / "**" / "*.parquet")
    back = connection.execute(
        f"select {COLUMNS}, ingested_at from read_parquet(?, hive_partitioning = true) order by all", [pattern]
    ).fetchall()
    assert back == table_rows(recorded, columns=COLUMNS + ", ingested_at")
    per_partition = connection.execute(
        "select \"date\"::varchar, service, count(*), bool_and(strftime(start_time, '%Y-%m-%d') = \"date\"::varchar), "
        "bool_and(service = service_name) from read_parquet(?, hive_partitioning = true) group by all order by all",
        [pattern],
    ).fetchall()
    assert [(d, s, n) for d, s, n, _, _ in per_partition] == [
        (day, service, 8) for day in DAYS for service in ("alpha", "beta", "gamma/β x")
    ]
    assert all(date_ok and service_ok for *_, date_ok, service_ok in per_partition)


def test_where_filters_and_a_second_export_needs_append(recorded, tmp_path):
    out = tmp_path / "beta"
    summary = export_parquet(recorded, out, where="service_name = 'beta' and name like 'chat%'")
    assert summary["rows"] == 8 and summary["partitions"] == ["date=2026-03-01/service=beta",
                                                             "date=2026-03-02/service=beta"]
    with pytest.raises(ParquetExportError, match="--append"):
        export_parquet(recorded, out)
    again = export_parquet(recorded, out, where="service_name = 'alpha'", append=True)
    assert again["rows"] == 16 and again["files"] >= 2
    count = duckdb.sql(f"select count(*) from read_parquet('{out}/**/*.parquet')").fetchall()[0][0]
    assert count == 24


@pytest.mark.parametrize("where", ["1=1; drop table spans", "1=1) union all (select 1", "no_such_column = 1"])
def test_bad_where_is_refused_and_nothing_changes(recorded, tmp_path, where):
    before = table_rows(recorded)
    result = CliRunner().invoke(app(), ["parquet", "--db", str(recorded), "--out", str(tmp_path / "x"),
                                        "--where", where])
    assert result.exit_code != 0
    message = str(result.exception)
    assert "where" in message or "export failed" in message
    assert table_rows(recorded) == before


def test_ingest_of_the_export_rebuilds_the_same_rows(recorded, tmp_path):
    out = tmp_path / "export"
    export_parquet(recorded, out)
    fresh = tmp_path / "fresh.duckdb"
    report = ingest_paths(fresh, [out], normalizers=[])
    assert report.errors == [] and report.inserted == 48 and report.duplicates == 0
    assert table_rows(fresh) == table_rows(recorded)
    reward_columns = "reward_id, rollout_id, step_index, name, value, source, created_at, trace_id, span_id"
    assert table_rows(fresh, "rewards", reward_columns) == table_rows(recorded, "rewards", reward_columns) != []
    # The views agree as well.
    assert table_rows(fresh, "rollouts", "*") == table_rows(recorded, "rollouts", "*") != []
    again = ingest_paths(fresh, [out], normalizers=[])
    assert again.inserted == 0 and again.duplicates == 48 and again.rewards_inserted == 0
    assert len(table_rows(fresh)) == 48


def test_agent_rl_export_parquet_through_the_real_cli(recorded, tmp_path, capsys):
    from agent_rl_plugin.cli.main import main

    out = tmp_path / "cli-export"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "parquet", "--db", str(recorded), "--out", str(out), "--where", "service_name = 'alpha'",
              "--json"])
    assert (exit_info.value.code or 0) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 16 and summary["partitions"] == ["date=2026-03-01/service=alpha",
                                                              "date=2026-03-02/service=alpha"]
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "parquet", "--db", str(recorded), "--out", str(out)])
    assert exit_info.value.code == 1 and "--append" in capsys.readouterr().err
