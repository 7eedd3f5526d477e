"""``agent-rl traces list`` reads only the newest rollouts (issue 19, cli_startup row).

:func:`~agent_rl_plugin.cli.traces.newest_rollouts_source` cuts the ``rollouts`` view's SQL down
to the newest ``--limit`` rollouts. These tests hold it to the view on a real DuckDB store with
the awkward cases: a rollout with a second, later root span (its start is the earliest root's),
ties in start time across the cut, a root without a start time, a rollout without a root (not a
rollout), error and cancelled roots, reward weights, re-recorded, step-level and failed rewards,
and the ``--task`` / ``--group`` filters; and the command prints byte for byte what it printed
when it read the whole view, in every output format.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agent_rl_plugin.cli import traces, traces_core
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data.synthetic import synthesize_store
from agent_rl_plugin.store import connect_writer
from agent_rl_plugin.store.rows import SpanConverter
from agent_rl_plugin.store.spool import list_segments, write_segment
from tests.cli_output import cli_output
from tests.test_store_spool import Keep

COLUMNS = (
    "rollout_id, task_id, group_id, status, start_time, round(duration_ms, 1) as duration_ms, "
    "n_llm_calls, n_tool_calls, n_tool_errors, total_reward, n_spans, input_tokens, error"
)


def _ids(connection: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    return [row[0] for row in connection.execute(sql).fetchall()]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 synthetic rollouts (5 tasks, groups of 3), then edited into the awkward cases."""
    path = tmp_path_factory.mktemp("newest") / "store.duckdb"
    synthesize_store(path, rollouts=60, llm_calls=2, group_size=3, n_tasks=5)
    connection = connect_writer(str(path))
    try:
        by_start = _ids(connection, "select rollout_id from rollouts order by start_time, rollout_id")
        oldest, no_start, rootless, failed, cancelled = by_start[:5]
        newest = by_start[-1]
        tied = by_start[-12:-6]
        # A second root span, newer than every rollout: the rollout still starts at its first root.
        connection.execute(
            "insert into spans select * replace ('late-root' as span_id, "
            "start_time + interval 10 day as start_time, start_unix_nano + 864000000000000 as start_unix_nano) "
            f"from spans where rollout_id = '{oldest}' and is_rollout_root"
        )
        connection.execute(
            "update spans set start_time = null, start_unix_nano = null "
            f"where rollout_id = '{no_start}' and is_rollout_root"
        )
        connection.execute(f"update spans set is_rollout_root = false where rollout_id = '{rootless}'")
        # Six rollouts starting at the same instant, in the middle of the newest twelve.
        connection.execute(
            "update spans set start_time = timestamp '2026-01-01 04:00:00', start_unix_nano = 1767240000000000000 "
            f"where is_rollout_root and rollout_id in ({', '.join(repr(t) for t in tied)})"
        )
        connection.execute(
            "update spans set status_code = 'ERROR', status_message = 'boom' "
            f"where is_rollout_root and rollout_id in ('{failed}', '{newest}')"
        )
        connection.execute(
            'update spans set attributes = json_merge_patch(attributes, \'{"agent_rl.cancelled": "true"}\') '
            f"where is_rollout_root and rollout_id = '{cancelled}'"
        )
        connection.execute("insert into reward_weights values ('correct', 3.0, 'test', now())")
        connection.execute(
            "insert into rewards (reward_id, rollout_id, step_index, name, value, source, created_at, error) values "
            f"('again', '{newest}', null, 'correct', 0.25, 'emitted', timestamp '2027-01-01', null), "
            f"('step', '{newest}', 1, 'correct', 9.0, 'emitted', timestamp '2027-01-02', null), "
            f"('failed', '{newest}', null, 'format', null, 'computed', timestamp '2027-01-03', 'crashed'), "
            f"('extra', '{tied[0]}', null, 'brevity', 0.5, 'computed', timestamp '2027-01-01', null)"
        )
        connection.execute("checkpoint")
    finally:
        connection.close()
    return path


def _through_view(connection: duckdb.DuckDBPyConnection, source: str, where: str, limit: int) -> list[tuple]:
    return connection.execute(
        f"select {COLUMNS} from {source} {where} order by start_time desc, rollout_id limit {limit}"
    ).fetchall()


@pytest.mark.parametrize("limit", [1, 2, 5, 7, 8, 9, 12, 20, 59, 60, 61, 500])
@pytest.mark.parametrize("filters", [[], ["task_id = 'task-3'"], ["group_id = 'group-2'"], ["task_id = 'none'"]])
def test_newest_rows_are_the_views(store: Path, limit: int, filters: list[str]) -> None:
    source = traces.newest_rollouts_source(limit, filters)
    assert source != "rollouts", "the view's SQL lost an anchor: traces list reads the whole view again"
    where = f"where {' and '.join(filters)}" if filters else ""
    with duckdb.connect(str(store), read_only=True) as connection:
        expected = _through_view(connection, "rollouts", where, limit)
        got = _through_view(connection, source, where, limit)
        assert got == expected
        if not filters and limit < 50:  # it read fewer rollouts than the store holds
            kept = connection.execute(f"select count(*) from {source}").fetchone()[0]
            assert limit <= kept <= limit + 5  # at most the rest of the six tied rollouts


def test_the_cut_keeps_every_tie(store: Path) -> None:
    """Cutting inside the six rollouts that start at one instant keeps all six."""
    with duckdb.connect(str(store), read_only=True) as connection:
        tied = connection.execute(
            "select count(*) from rollouts where start_time = timestamp '2026-01-01 04:00:00'"
        ).fetchone()[0]
        newer = connection.execute(
            "select count(*) from rollouts where start_time > timestamp '2026-01-01 04:00:00'"
        ).fetchone()[0]
        assert tied == 6
        kept = connection.execute(f"select count(*) from {traces.newest_rollouts_source(newer + 2)}").fetchone()[0]
        assert kept == newer + tied


def test_the_whole_view_when_the_fast_path_cannot_hold() -> None:
    assert traces.newest_rollouts_source(0) == "rollouts"
    assert traces.newest_rollouts_source(traces.NEWEST_MAX + 1) == "rollouts"



@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--json"],
        ["--csv"],
        ["--wide"],
        ["-n", "3"],
        ["-n", "40", "--json"],
        ["--task", "task-2"],
        ["--group", "group-5", "--csv"],
        ["--status", "error", "--json"],
        ["-n", "1000"],
    ],
)
def test_traces_list_prints_what_the_whole_view_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, options: list[str]
) -> None:
    path = tmp_path / "plain.duckdb"
    synthesize_store(path, rollouts=80, llm_calls=2, group_size=4, n_tasks=6)
    monkeypatch.setenv("COLUMNS", "120")
    args = ["traces", "list", "--db", str(path), *options]
    fast = cli_output(capsys, *args)
    monkeypatch.setattr(traces_core, "newest_rollouts_source", lambda limit, filters=None: "rollouts")
    whole = cli_output(capsys, *args)
    assert fast == whole
    assert fast.strip()


def test_traces_list_shows_rollouts_still_in_the_spool_while_another_process_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's segment not merged yet, and another process reading the file: the command
    cannot merge it, and shows it through the spool overlay, where ``spans`` is a view without
    the row ids the cut-down SQL finds roots by (it failed with a binder error on ``rowid``)."""
    path = tmp_path / "store.duckdb"
    synthesize_store(path, rollouts=10, llm_calls=1, group_size=2, n_tasks=2)
    keep = Keep()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(keep))
    root = {sc.ROLLOUT_ID: "r-spool", sc.ROLLOUT_ROOT: True, sc.SPAN_KIND: sc.SPAN_KIND_AGENT, sc.TASK_ID: "task-new"}
    with provider.get_tracer("t").start_as_current_span("invoke_agent late", attributes=root):
        pass
    write_segment(path, SpanConverter().convert(keep.spans).spans)
    reader = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); "
         "print('reading', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout.readline().strip() == "reading"
        monkeypatch.setenv("COLUMNS", "200")
        for options in ([], ["--task", "task-new"], ["-n", "3", "--json"], ["--group", "nobody"]):
            out = cli_output(capsys, "traces", "list", "--db", str(path), *options)
            assert ("r-spool" in out) == (options != ["--group", "nobody"]), (options, out)
        assert len(list_segments(path)) == 1  # shown, not merged: the file was not ours to write
    finally:
        reader.communicate("", timeout=30)
