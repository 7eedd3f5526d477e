"""docs/cookbook.md: every query runs against the store `agent-rl demo` writes and returns rows.

Queries marked ``needs-data`` (``<!-- query: NAME needs-data -->``) use what the demo does not
record (reasoning text, votes, failed rewards, human labels): they must run on the demo store,
and return rows on a copy of it to which that data was added through the public API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from agent_rl_plugin.cli.query import run_query

ROOT = Path(__file__).resolve().parents[1]
COOKBOOK = ROOT / "docs" / "cookbook.md"
TEXT = COOKBOOK.read_text()
MARKED = re.compile(r"<!-- query: (?P<name>[a-z0-9_]+)(?P<needs> needs-data)? -->\n```sql\n(?P<sql>.*?)```", re.S)
QUERIES = [(m["name"], bool(m["needs"]), m["sql"]) for m in MARKED.finditer(TEXT)]
ENV = {**os.environ, "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"}


def agent_rl() -> str:
    return shutil.which("agent-rl") or str(Path(sys.executable).parent / "agent-rl")


@pytest.fixture(scope="module")
def demo_db(demo_tour) -> Path:
    """The store of one `agent-rl demo` run (record, score, advantages, three training runs),
    shared by the session's tests (tests/demo_tour.py): read here, never changed."""
    assert demo_tour.summary["rollouts_run"] > 0
    return demo_tour.db


@pytest.fixture(scope="module")
def enriched_db(demo_db: Path) -> Path:
    """A copy of the demo store plus what the ``needs-data`` queries read: an LLM call with
    reasoning and two votes (recorded with the public API), a human label and a failed reward."""
    db = demo_db.with_name("enriched.duckdb")
    shutil.copy(demo_db, db)
    if demo_db.with_name(demo_db.name + ".wal").exists():
        shutil.copy(demo_db.with_name(demo_db.name + ".wal"), db.with_name(db.name + ".wal"))
    script = textwrap.dedent(
        f"""
        import agent_rl_plugin as arl
        arl.configure(db={str(db)!r})
        with arl.rollout(task_id="vote-1", group_id="vote-1/g0"):
            arl.record_llm_call("reasoner-1", "Which answer is right?", "B", input_tokens=12,
                                output_tokens=40, reasoning="A ignores the discount; B applies it.")
            arl.record_event("vote", round=1, agent_id="agent_a", target="agent_b", reason="B is right")
            arl.record_event("vote", round=1, agent_id="agent_c", target="agent_b", reason="agreed")
        arl.shutdown()
        """
    )
    result = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    con = duckdb.connect(str(db))
    try:
        (rollout_id,) = con.execute(
            "select rollout_id from rewards where name = 'task_completion' and error is null "
            "order by rollout_id limit 1"
        ).fetchone()
        con.execute(
            "insert into labels (label_id, rollout_id, label, value, labeller, created_at) "
            "values ('cookbook-label', ?, 'good', 1.0, 'test', now())",
            [rollout_id],
        )
        con.execute(
            "insert into rewards (reward_id, rollout_id, name, value, plugin, plugin_version, source, created_at, error) "
            "values ('cookbook-error', ?, 'flaky_judge', null, 'tests', '0/1', 'llm', now(), 'TimeoutError: judge did not answer')",
            [rollout_id],
        )
    finally:
        con.close()
    return db


def test_the_cookbook_has_at_least_20_queries_each_marked_and_named_once():
    names = [name for name, _, _ in QUERIES]
    assert len(QUERIES) >= 20, names
    assert len(set(names)) == len(names), "query names must be unique"
    # every SQL block on the page is a tested query (none escapes the marker)
    assert TEXT.count("```sql") == len(QUERIES)
    assert sum(1 for _, needs, _ in QUERIES if not needs) >= 20


def test_queries_needing_other_data_say_so_in_the_doc():
    for m in MARKED.finditer(TEXT):
        paragraph = TEXT[: m.start()].rstrip().rsplit("\n\n", 1)[-1]
        assert ("Needs data the demo lacks" in paragraph) == bool(m["needs"]), m["name"]
    needing = sum(1 for _, needs, _ in QUERIES if needs)
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    assert f"except the {words.get(needing, needing)} marked" in TEXT


@pytest.mark.parametrize("name,needs_data,sql", QUERIES, ids=[q[0] for q in QUERIES])
def test_query_runs_on_the_demo_store(demo_db, name, needs_data, sql):
    columns, rows = run_query(str(demo_db), sql)
    assert columns, name
    if not needs_data:
        assert rows, f"{name} returned no rows on the demo store"


@pytest.mark.parametrize(
    "name,sql", [(n, s) for n, needs, s in QUERIES if needs], ids=[n for n, needs, _ in QUERIES if needs]
)
def test_query_needing_other_data_finds_it(enriched_db, name, sql):
    columns, rows = run_query(str(enriched_db), sql)
    assert rows, f"{name} returned no rows although the data it needs was added"


def test_a_cookbook_query_through_the_command_line(demo_db):
    (sql,) = [s for n, _, s in QUERIES if n == "tool_error_rates"]
    result = subprocess.run(
        [agent_rl(), "query", "--db", str(demo_db), "--json", sql],
        env=ENV, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    columns, expected = run_query(str(demo_db), sql)
    assert [tuple(r[c] for c in columns) for r in rows] == [tuple(r) for r in expected]
    assert {r["tool_name"] for r in rows} >= {"calculate"}
