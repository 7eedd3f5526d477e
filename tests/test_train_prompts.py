"""Prompts for online GRPO mined from the store: from recorded rollouts (the prompt side of the
conversation, deduplicated, ground truth from the rollout metadata or the tasks table) and from
the tasks table; what is left out, and the errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_rl_plugin import tracing
from agent_rl_plugin.cli.tasks import TaskRow, write_tasks
from agent_rl_plugin.data import BuildReport, DatasetError
from agent_rl_plugin.data.synthetic import synthesize_store, write_rollout
from agent_rl_plugin.demo.calculator import demo_tasks
from agent_rl_plugin.demo.run import run_groups
from agent_rl_plugin.store import connect_writer
from agent_rl_plugin.train import build_prompt_dataset, reward_functions
from agent_rl_plugin.train.prompts import DUPLICATE, EMPTY_PROMPT, NO_TASK_PROMPT, STARTS_WITH_ASSISTANT

SYSTEM = {"role": "system", "content": "You are terse."}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def tool_call(call_id: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": "lookup", "arguments": {"item": "pen"}}]}


def task(task_id: str, prompt, ground_truth=None) -> TaskRow:
    return TaskRow(task_id, prompt, ground_truth, {}, 1)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    """3 demo tasks x 3 rollouts recorded by the demo agent (ground truth in the metadata)."""
    from agent_rl_plugin import plugins

    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=str(path), export_delay_ms=50)
        asyncio.run(run_groups(demo_tasks(3), group_size=3, seed=1))
        assert tracing.flush()
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(None)
    return path


def test_one_row_per_distinct_prompt_of_the_recorded_rollouts(demo_store):
    report = BuildReport()
    ds = build_prompt_dataset(demo_store, report=report)
    assert ds.column_names == ["prompt", "task_id", "ground_truth"]
    rows = ds.to_list()
    tasks = demo_tasks(3)
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    assert [r["prompt"] for r in rows] == [[user(t.question)] for t in tasks]
    assert [json.loads(r["ground_truth"]) for r in rows] == [t.answer for t in tasks]  # from the rollout metadata
    assert report.rollouts == 9 and report.rows == 3
    assert report.left_out == {DUPLICATE: 6}
    assert report.to_dict()["source"] == "rollouts" and report.extra["with_ground_truth"] == 3


def test_where_and_sql_select_rollouts(demo_store):
    assert build_prompt_dataset(demo_store, where="task_id = 'shop-1'")["task_id"] == ["shop-1"]
    ds = build_prompt_dataset(demo_store, sql="select rollout_id from rollouts where task_id in ('shop-0', 'shop-2')")
    assert ds["task_id"] == ["shop-0", "shop-2"]


def test_the_ground_truth_reaches_the_reward_functions(demo_store, plugin_manager):
    row = build_prompt_dataset(demo_store, where="task_id = 'shop-0'")[0]
    (completion,) = reward_functions(["task_completion"], plugin_manager=plugin_manager)
    completions = [[answer("The total is 15.00.")], [answer("It is 14.")]]
    assert completion(prompts=[row["prompt"]] * 2, completions=completions, ground_truth=[row["ground_truth"]] * 2) == [
        1.0, 0.0,
    ]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.duckdb"
    connection = connect_writer(str(path))
    yield path, connection
    connection.close()


def test_prompt_is_the_conversation_before_the_first_assistant_message(store):
    path, con = store
    first_in = [SYSTEM, user("price of a pen?")]
    second_in = first_in + [tool_call("c1"), {"role": "tool", "tool_call_id": "c1", "content": "1.5"}]
    write_rollout(con, "r1", task_id="t1", llm_calls=[(first_in, [tool_call("c1")]), (second_in, [answer("1.5")])])
    write_rollout(con, "r2", task_id="t1", llm_calls=[(first_in, [answer("1.5")])], start_s=1)  # same prompt
    write_rollout(con, "r3", task_id="t2", llm_calls=[([user("failed call")], [])], start_s=2)  # no output
    write_rollout(con, "r4", agent_input={"question": "from the input"}, agent_output="42", start_s=3)  # no LLM call
    write_rollout(con, "r5", llm_calls=[([answer("hello")], [answer("again")])], start_s=4)  # starts with assistant
    write_rollout(con, "r6", llm_calls=[([user("   ")], [answer("?")])], start_s=5)  # no text
    con.execute("CHECKPOINT")
    report = BuildReport()
    rows = build_prompt_dataset(con, report=report).to_list()  # an open connection works too
    assert [r["prompt"] for r in rows] == [[SYSTEM, user("price of a pen?")], [user("failed call")],
                                           [user("from the input")]]  # an input with one text field: that text
    assert [r["task_id"] for r in rows] == ["t1", "t2", None]
    assert all(r["ground_truth"] is None for r in rows)
    assert report.left_out == {DUPLICATE: 1, STARTS_WITH_ASSISTANT: 1, EMPTY_PROMPT: 1}
    assert report.examples[STARTS_WITH_ASSISTANT] == ["r5"]
    assert any("no LLM messages" in note for note in report.notes)


def test_ground_truth_from_the_tasks_table_and_prompts_differing_by_ground_truth_are_kept(store):
    path, con = store
    calls = [([user("What is the capital?")], [answer("Paris")])]
    write_rollout(con, "r1", task_id="france", llm_calls=calls)
    write_rollout(con, "r2", task_id="italy", llm_calls=calls, start_s=1)
    write_rollout(con, "r3", task_id="nowhere", llm_calls=calls, start_s=2)
    con.close()
    write_tasks(str(path), [task("france", "Capital of France?", "Paris"), task("italy", "Capital of Italy?", "Rome")])
    rows = build_prompt_dataset(path).to_list()
    assert [(r["task_id"], r["ground_truth"]) for r in rows] == [("france", '"Paris"'), ("italy", '"Rome"'), ("nowhere", None)]


def test_prompts_from_the_tasks_table(tmp_path):
    path = str(tmp_path / "t.duckdb")
    connect_writer(path).close()
    messages = [SYSTEM, user("Add 2 and 2.")]
    write_tasks(path, [
        task("a", "What is 2 + 2?", 4),
        task("b", json.dumps(messages), {"answer": 4}),
        task("c", None, 1),
        task("d", "Name a colour.", None),
    ])
    report = BuildReport()
    rows = build_prompt_dataset(path, source="tasks", report=report).to_list()
    assert rows == [
        {"prompt": [user("What is 2 + 2?")], "task_id": "a", "ground_truth": "4"},
        {"prompt": messages, "task_id": "b", "ground_truth": '{"answer": 4}'},
        {"prompt": [user("Name a colour.")], "task_id": "d", "ground_truth": None},
    ]
    assert report.left_out == {NO_TASK_PROMPT: 1} and report.extra["tasks"] == 4
    assert build_prompt_dataset(path, where="ground_truth IS NOT NULL", source="tasks")["task_id"] == ["a", "b"]
    assert build_prompt_dataset(path, sql="select 'd' as task_id", source="tasks")["task_id"] == ["d"]


def test_synthetic_store_gives_one_prompt_per_task(tmp_path):
    path = tmp_path / "syn.duckdb"
    synthesize_store(path, rollouts=40, llm_calls=3, group_size=4, n_tasks=5)
    report = BuildReport()
    ds = build_prompt_dataset(path, report=report)
    assert len(ds) == 5 and sorted(ds["task_id"]) == [f"task-{i}" for i in range(5)]
    assert [m["role"] for m in ds[0]["prompt"]] == ["system", "user"]
    assert report.left_out == {DUPLICATE: 35}


def test_errors_are_clear(demo_store, tmp_path):
    with pytest.raises(DatasetError, match="no rollouts match where \"task_id = 'none'\""):
        build_prompt_dataset(demo_store, where="task_id = 'none'")
    with pytest.raises(DatasetError, match="SQL error in where"):
        build_prompt_dataset(demo_store, where="no_such_column = 1")
    with pytest.raises(DatasetError, match="either where or sql"):
        build_prompt_dataset(demo_store, where="true", sql="select rollout_id from rollouts")
    with pytest.raises(DatasetError, match="source must be one of rollouts, tasks"):
        build_prompt_dataset(demo_store, source="spans")
    with pytest.raises(DatasetError, match="no tasks match the store") as info:
        build_prompt_dataset(demo_store, source="tasks")
    assert "agent-rl tasks import" in info.value.hint
    with pytest.raises(DatasetError, match="must only read"):
        build_prompt_dataset(demo_store, source="tasks", sql="delete from tasks")
    with pytest.raises(DatasetError, match="must return a task_id column"):
        build_prompt_dataset(demo_store, source="tasks", sql="select 1 as x")
    path = str(tmp_path / "only_empty.duckdb")
    connect_writer(path).close()
    write_tasks(path, [task("x", None, 1)])
    with pytest.raises(DatasetError, match="no usable prompt: 1 task without a prompt"):
        build_prompt_dataset(path, source="tasks")
