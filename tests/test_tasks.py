"""``agent-rl tasks import`` (JSONL, JSON, CSV; all or nothing) and ``agent-rl tasks list``."""

from __future__ import annotations

import json
import textwrap

import pytest
from score_support import agent_rl, record_demo, rows

from agent_rl_plugin.rewards.rollout import load_rollouts
from agent_rl_plugin.store import open_reader


@pytest.fixture
def db(tmp_path, plugin_manager):
    return tmp_path / "tasks.duckdb"


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_import_jsonl(tmp_path, db):
    file = write(tmp_path, "tasks.jsonl", """
        {"task_id": "t1", "prompt": "2+2?", "ground_truth": 4}
        {"task_id": "t2", "prompt": "capital of France?", "answer": "Paris", "difficulty": "easy"}

        {"task_id": 3, "prompt": {"messages": [{"role": "user", "content": "hi"}]}, "ground_truth": {"any": ["json"]}, "metadata": {"rubric": "r"}}
    """)
    result = agent_rl("tasks", "import", str(file), "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imported"] == 3
    stored = {r["task_id"]: r for r in rows(db, "select * from tasks order by task_id")}
    assert set(stored) == {"t1", "t2", "3"}
    assert json.loads(stored["t1"]["ground_truth"]) == 4 and stored["t1"]["prompt"] == "2+2?"
    assert json.loads(stored["t2"]["ground_truth"]) == "Paris"
    assert json.loads(stored["t2"]["metadata"]) == {"difficulty": "easy"}
    assert json.loads(stored["3"]["ground_truth"]) == {"any": ["json"]}
    assert json.loads(stored["3"]["prompt"])["messages"][0]["content"] == "hi"
    assert json.loads(stored["3"]["metadata"]) == {"rubric": "r"}


def test_import_replaces_by_task_id(tmp_path, db):
    first = write(tmp_path, "a.jsonl", '{"task_id": "t1", "ground_truth": 1}\n{"task_id": "t2", "ground_truth": 2}\n')
    second = write(tmp_path, "b.jsonl", '{"task_id": "t1", "ground_truth": 10}\n{"task_id": "t1", "ground_truth": 11}\n')
    assert agent_rl("tasks", "import", str(first), "--db", str(db)).exit_code == 0
    result = agent_rl("tasks", "import", str(second), "--db", str(db), "--json")
    assert json.loads(result.stdout) | {"database": None} == {
        "imported": 1, "new": 0, "replaced": 1, "database": None, "bad": []
    }
    truths = {r["task_id"]: json.loads(r["ground_truth"]) for r in rows(db, "select * from tasks")}
    assert truths == {"t1": 11, "t2": 2}  # the last line with an id wins


def test_bad_lines_are_named_and_nothing_is_written(tmp_path, db):
    file = write(tmp_path, "tasks.jsonl", """
        {"task_id": "ok1", "ground_truth": 1}
        {"task_id": "ok2", "ground_truth": 2
        {"prompt": "no id"}
        ["not", "an", "object"]
        {"task_id": "t5", "metadata": "not an object"}
    """)
    result = agent_rl("tasks", "import", str(file), "--db", str(db))
    assert result.exit_code == 1
    message = result.stderr
    assert "4 bad lines in" in message
    assert "line 2: invalid JSON" in message and "line 3: task_id is missing" in message
    assert "line 4: expected an object with task_id, got list" in message
    assert "line 5: metadata must be an object" in message
    assert "nothing was imported" in message and "--skip-bad" in message
    assert not db.exists() or rows(db, "select count(*) as n from tasks")[0]["n"] == 0


def test_skip_bad_imports_the_rest(tmp_path, db):
    file = write(tmp_path, "tasks.jsonl", '{"task_id": "ok1"}\n{oops}\n{"task_id": "ok2"}\n')
    result = agent_rl("tasks", "import", str(file), "--db", str(db), "--skip-bad", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["imported"] == 2 and [b["line"] for b in report["bad"]] == [2]
    assert [r["task_id"] for r in rows(db, "select task_id from tasks order by 1")] == ["ok1", "ok2"]
    text = agent_rl("tasks", "import", str(file), "--db", str(db), "--skip-bad")
    assert "Imported 2 tasks" in text.stdout and "line 2: invalid JSON" in text.stdout


def test_import_json_list_and_csv(tmp_path, db):
    listing = write(tmp_path, "tasks.json", json.dumps([{"task_id": "j1", "answer": [1, 2]}, {"task_id": "j2"}]))
    assert agent_rl("tasks", "import", str(listing), "--db", str(db)).exit_code == 0
    table = write(tmp_path, "tasks.csv", """
        task_id,prompt,ground_truth,source
        c1,What is 6*7?,42,quiz
        c2,"Capital, of France?",Paris,
        c3,Object?,"{""a"": 1}",quiz
    """)
    assert agent_rl("tasks", "import", str(table), "--db", str(db)).exit_code == 0
    stored = {r["task_id"]: r for r in rows(db, "select * from tasks")}
    assert json.loads(stored["j1"]["ground_truth"]) == [1, 2] and stored["j2"]["ground_truth"] is None
    assert json.loads(stored["c1"]["ground_truth"]) == 42 and json.loads(stored["c1"]["metadata"]) == {"source": "quiz"}
    assert json.loads(stored["c2"]["ground_truth"]) == "Paris" and stored["c2"]["prompt"] == "Capital, of France?"
    assert json.loads(stored["c2"]["metadata"]) == {}
    assert json.loads(stored["c3"]["ground_truth"]) == {"a": 1}


def test_csv_errors_name_lines(tmp_path, db):
    table = write(tmp_path, "tasks.csv", "task_id,ground_truth\nc1,1\n,2\nc3,3,extra\n")
    result = agent_rl("tasks", "import", str(table), "--db", str(db))
    assert result.exit_code == 1
    assert "line 3: task_id is missing" in result.stderr and "line 4: more cells than header columns" in result.stderr
    no_id = write(tmp_path, "noid.csv", "id,answer\n1,2\n")
    assert "no task_id column" in agent_rl("tasks", "import", str(no_id), "--db", str(db)).stderr
    missing = agent_rl("tasks", "import", str(tmp_path / "missing.jsonl"), "--db", str(db))
    assert missing.exit_code == 1 and "no task file at" in missing.stderr


def test_tasks_list_and_ground_truth_reaches_rollouts(db_path, tmp_path):
    record_demo()  # demo rollouts carry ground truth in their metadata; tasks fill the prompt
    file = write(tmp_path, "tasks.jsonl", '{"task_id": "shop-0", "prompt": "Buy things", "ground_truth": 99, "rubric": "exact"}\n')
    assert agent_rl("tasks", "import", str(file), "--db", str(db_path)).exit_code == 0
    listed = json.loads(agent_rl("tasks", "list", "--db", str(db_path), "--json").stdout)
    assert listed[0]["task_id"] == "shop-0" and listed[0]["rollouts"] == 3
    connection = open_reader(db_path)
    try:
        found = load_rollouts(connection, where="task_id = 'shop-0'")
    finally:
        connection.close()
    assert found[0].task_prompt == "Buy things" and found[0].task_metadata == {"rubric": "exact"}
    table = agent_rl("tasks", "list", "--db", str(db_path))
    assert "shop-0" in table.stdout
