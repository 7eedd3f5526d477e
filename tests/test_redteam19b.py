"""Red team for issue 19's second batch of fast paths (redaction pre-check on tuples, the start
attributes handed to the span directly, the merger process, the parse-tree cache, ``traces list``
and the plain table renderer): hostile values and hostile users, real components."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

import agent_rl_plugin as arl
from agent_rl_plugin.store import DuckDBSpanExporter
from agent_rl_plugin.store.merger_process import LeaseLimits, MergerProcess
from tests.test_redaction_everywhere import CANARY, SECRETS, leak
from tests.test_store_merger_process import record
from tests.test_store_spool import count


def _stored_text(db: Path) -> str:
    """Every table and view of ``db``, as text."""
    connection = duckdb.connect(str(db), read_only=True)
    try:
        relations = [r[0] for r in connection.execute(
            "select table_name from duckdb_tables() where not internal union all "
            "select view_name from duckdb_views() where not internal").fetchall()]  # fmt: skip
        return "\n".join(repr(connection.execute(f'select * from "{r}"').fetchall()) for r in relations)
    finally:
        connection.close()


def _assert_no_secret(db: Path) -> None:
    text = _stored_text(db)
    assert CANARY in text
    assert not {name for name, secret in SECRETS.items() if secret in text}


class _Str(str):
    pass


def test_record_llm_call_sequences_of_secrets_reach_the_file_masked(plugin_manager, tmp_path: Path) -> None:
    db = tmp_path / "agent.duckdb"
    arl.configure(db=str(db), export_delay_ms=20)
    long = leak("long") + "x" * 50_000
    hostile: dict[str, Any] = {
        "finish_reason": ("stop", leak("reason")),
        "tags_tuple": (leak("tuple"), "plain"),
        "tags_list": [leak("list"), "plain"],
        "mixed": (1, leak("mixed"), 2.5, True),
        "nested": ((leak("nested"),),),
        "subclass": (_Str(leak("subclass")),),
        "sub_alone": _Str(leak("sub-alone")),
        "with_none": (leak("with-none"), None),
        "long_items": (long, long),
        "as_bytes": (leak("bytes").encode(),),
        "many": tuple(["stop"] * 500 + [leak("many")]),
    }
    with arl.rollout(task_id="t1"):
        for key, value in hostile.items():  # one span each: no other attribute makes the span redacted
            arl.record_llm_call("m", "q", "a", **{key: value})
        arl.record_llm_call("m", "q", "a", token_ids=[1, 2], logprobs=(-0.5, -0.25), tag=(CANARY,))
    assert arl.flush()
    arl.shutdown()
    _assert_no_secret(db)


# --- the merger process --------------------------------------------------------------------
def _spooled_exporter(db: Path, spans: int) -> DuckDBSpanExporter:
    exporter = DuckDBSpanExporter(db, normalizers=[])
    record(exporter, spans)
    return exporter


ONE_LEASE = LeaseLimits(max_leases=1, max_segments=1, max_rows=1, merge_threads=1)


def test_output_on_the_childs_stdout_neither_raises_nor_loses_spans(tmp_path: Path, monkeypatch) -> None:
    """What else writes to the merger's stdout (DuckDB's progress bar for a merge over 2 s, a
    ``sitecustomize`` that prints) must not reach the agent as an exception: the merge is done
    anyway and the flush reports success."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\nsys.stdout.write('hello\\n\\r  0% progress')\nsys.stdout.flush()\n"  # no end of line
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("AGENT_RL_MERGER", "process")
    db = tmp_path / "runs.duckdb"
    exporter = _spooled_exporter(db, 20)
    assert exporter.force_flush()
    exporter.shutdown()
    writer = exporter._writer  # noqa: SLF001
    assert not exporter.stats["last_error"]
    assert writer._merger_process is not None and writer._merger_process.started == 1  # noqa: SLF001 - answered
    assert writer.merger_peak_rss_mb  # the child's replies were read
    assert count(db) == 20


def test_the_child_reply_channel_is_not_the_stdout_duckdb_prints_to(tmp_path: Path) -> None:
    """DuckDB prints its progress bar to file descriptor 1 (even into a pipe): in the child it
    must not be the reply channel."""
    db = tmp_path / "runs.duckdb"
    db.write_bytes(b"")
    db.unlink()
    merger = MergerProcess(str(db))
    try:
        assert merger.merge(wait_s=0.0, limits=ONE_LEASE) is not None
        child = merger._child  # noqa: SLF001
        assert child is not None
        fd1 = os.readlink(f"/proc/{child.pid}/fd/1")
        replies = {os.readlink(f"/proc/{child.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{child.pid}/fd")}
        assert fd1 == os.devnull or fd1.startswith("/dev/null")
        assert any(r.startswith("pipe:") for r in replies)
    finally:
        merger.close()


def test_the_child_does_not_import_modules_from_the_agents_working_folder(tmp_path: Path, monkeypatch) -> None:
    """``python -c`` puts the working folder first on ``sys.path``; an agent started as
    ``python /elsewhere/agent.py`` does not, so a ``json.py`` in its working folder must not run
    in the merger either."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "ran"
    (work / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom _json import *\n")
    monkeypatch.chdir(work)
    merger = MergerProcess(str(tmp_path / "runs.duckdb"))
    try:
        merger.merge(wait_s=0.0, limits=ONE_LEASE)
    finally:
        merger.close()
    assert not marker.exists()


def test_a_garbled_answer_stops_the_child_and_the_agent_merges_itself(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('agent-rl-merger-reply:[1, 2]', flush=True)\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    merger = MergerProcess(str(tmp_path / "runs.duckdb"))
    try:
        assert merger.merge(wait_s=0.0, limits=ONE_LEASE) is None
        assert merger._child is None  # noqa: SLF001 - stopped, not left to answer the next request late
    finally:
        merger.close()
    monkeypatch.setenv("AGENT_RL_MERGER", "process")
    db = tmp_path / "runs.duckdb"
    exporter = _spooled_exporter(db, 5)
    assert exporter.force_flush()
    exporter.shutdown()
    assert not exporter.stats["last_error"] and count(db) == 5


def test_a_hostile_servers_finish_reason_and_model_reach_the_file_masked(plugin_manager, tmp_path: Path) -> None:
    """A captured OpenAI call: the finish reasons are stored as a tuple (the pre-check's new
    case), the model as a string; a server that answers secrets in them gets them masked."""
    import openai

    from agent_rl_plugin.instrumentation.clients import instrument_clients, uninstrument_clients
    from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

    db = tmp_path / "agent.duckdb"
    arl.configure(db=str(db), export_delay_ms=20)
    reply = Reply(text="fine", finish_reason=leak("finish"), model="m")
    with ScriptedLLMServer([reply, Reply(text=CANARY, finish_reason="stop")]) as server:
        instrument_clients(["openai"])
        try:
            client = openai.OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
            with arl.rollout(task_id="t"):
                for _ in range(2):
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        finally:
            uninstrument_clients(["openai"])
    assert arl.flush()
    arl.shutdown()
    text = _stored_text(db)
    assert "finish" in text  # the hostile finish reason was stored (masked), so the check below means something
    _assert_no_secret(db)


# --- traces list -----------------------------------------------------------------------------
def test_traces_list_with_a_task_id_holding_the_views_anchor_text(tmp_path: Path) -> None:
    """The cut-down view is made by replacing anchor lines of the view's SQL: a ``--task`` value
    holding such a line must stay the value it was (not be rewritten inside its literal)."""
    from agent_rl_plugin.cli import traces
    from agent_rl_plugin.data.synthetic import synthesize_store
    from agent_rl_plugin.store import connect_writer

    path = tmp_path / "store.duckdb"
    synthesize_store(path, rollouts=12, llm_calls=1, group_size=3, n_tasks=2)
    hostile = "t\n    FROM spans\n    GROUP BY rollout_id\n    FROM episode_rewards e\n    FROM rewards\n"
    connection = connect_writer(str(path))
    try:
        connection.execute("update spans set task_id = ? where task_id = 'task-1'", [hostile])
        connection.execute("checkpoint")
    finally:
        connection.close()
    filters = [f"task_id = {traces._sql_literal(hostile)}"]  # noqa: SLF001 - what list_traces builds
    where = f"where {filters[0]}"
    sql = "select rollout_id, task_id, total_reward from {} " + where + " order by start_time desc, rollout_id limit 3"
    with duckdb.connect(str(path), read_only=True) as connection:
        expected = connection.execute(sql.format("rollouts")).fetchall()
        got = connection.execute(sql.format(traces.newest_rollouts_source(3, filters))).fetchall()
    assert expected and got == expected
