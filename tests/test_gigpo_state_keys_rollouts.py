"""GiGPO over rollouts made by ``run_rollouts``: the rollouts of one task start in ONE state.

The runner calls the agent with the task dict, which carries per-sample fields
(``sample_index``, and ``seed`` when the run has one), and records that dict as the rollout's
input. The default state key of an agent's first action hashes the rollout's input, so it must
leave those per-sample fields out: 4 rollouts of one task make one step group of 4 for their
first actions, not 4 step groups of one.
"""

from __future__ import annotations

import json

import duckdb

import agent_rl_plugin as arl
from agent_rl_plugin.rl import compute_advantages, observation_key
from agent_rl_plugin.rollouts import run_rollouts
from agent_rl_plugin.rollouts.tasks import PER_SAMPLE_FIELDS, TASK_PAYLOAD_FIELDS, load_tasks, task_payload

TASKS = [
    {"task_id": "add", "prompt": "2+2?", "ground_truth": 4, "metadata": {"topic": "math"}},
    {"task_id": "capital", "prompt": "capital of France?", "ground_truth": "Paris"},
]


def scripted_agent(task: dict) -> str:
    """Two LLM calls around one tool call; the tool's answer depends on the sample (even or odd),
    so the second actions form two states; the reward is 1 for even samples."""
    arl.record_llm_call("tiny", task["prompt"], "let me look it up", tool_calls=[{"name": "lookup", "arguments": {}}])
    found = "even" if task["sample_index"] % 2 == 0 else "odd"
    arl.record_tool_call("lookup", {"q": task["prompt"]}, found)
    arl.record_llm_call("tiny", [{"role": "tool", "content": found}], f"answer: {task['ground_truth']}")
    arl.emit_reward(1.0 if found == "even" else 0.0, "correct")
    return found


def gigpo_rows(db_path) -> list[dict]:
    run = compute_advantages(str(db_path), "gigpo")
    connection = duckdb.connect(str(db_path), read_only=True)
    try:
        cursor = connection.execute(
            """select a.group_id, a.rollout_id, a.action_index, a.state_key, a.step_group_size, r.input
               from advantages a join rollouts r using (rollout_id)
               where a.run_id = ? order by a.group_id, a.rollout_id, a.action_index""",
            [run.run_id],
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        connection.close()


def test_first_actions_of_one_task_share_one_step_group(db_path):
    outcomes = run_rollouts(scripted_agent, TASKS, group_size=4, seed=7)
    assert [o.status for o in outcomes] == ["ok"] * 8
    arl.shutdown()  # flush and release the file
    rows = gigpo_rows(db_path)
    assert len(rows) == 16  # 2 tasks x 4 rollouts x 2 actions

    first = [r for r in rows if r["action_index"] == 0]
    # the recorded input is what the agent got, per-sample fields included...
    inputs = [json.loads(r["input"]) for r in first]
    assert sorted((i["task_id"], i["sample_index"]) for i in inputs) == [
        (t, s) for t in ("add", "capital") for s in range(4)
    ]
    assert len({i["seed"] for i in inputs}) == 8
    # ...but the state of the first action is the task: one step group of 4 per task
    keys_by_task: dict[str, set[str]] = {}
    for row in first:
        keys_by_task.setdefault(row["group_id"].split("/")[0], set()).add(row["state_key"])
    assert {task: len(keys) for task, keys in keys_by_task.items()} == {"add": 1, "capital": 1}
    assert all(r["step_group_size"] == 4 for r in first)
    # two different tasks are two different states
    assert keys_by_task["add"] != keys_by_task["capital"]

    # the second actions acted on the tool's result (stored as JSON text): even and odd samples,
    # 2 and 2 per task
    second = [r for r in rows if r["action_index"] == 1]
    assert all(r["step_group_size"] == 2 for r in second)
    assert {r["state_key"] for r in second} == {observation_key('"even"'), observation_key('"odd"')}


def test_the_first_state_is_the_task_payload_without_per_sample_fields(db_path):
    outcomes = run_rollouts(scripted_agent, TASKS[:1], group_size=2)
    assert all(o.ok for o in outcomes)
    arl.shutdown()
    first = [r for r in gigpo_rows(db_path) if r["action_index"] == 0]
    # the key hashes the task-level content of the agent's task dict (DuckDB's compact JSON)
    task = {k: v for k, v in task_payload(load_tasks(TASKS[:1])[0], 0, None).items() if k not in PER_SAMPLE_FIELDS}
    assert {r["state_key"] for r in first} == {
        observation_key(json.dumps(task, separators=(",", ":"), ensure_ascii=False))
    }
    # the task dict has exactly the documented fields; the per-sample ones are among them
    assert tuple(task_payload(load_tasks(TASKS[:1])[0], 0, None)) == TASK_PAYLOAD_FIELDS
    assert set(PER_SAMPLE_FIELDS) == {"sample_index", "seed"}


def test_an_agent_called_with_one_field_keys_on_that_value(db_path):
    """``input_key="prompt"``: the rollout's input is the prompt alone, the same for every sample."""

    def agent(prompt: str) -> str:
        arl.record_llm_call("tiny", prompt, "4")
        arl.emit_reward(1.0, "correct")
        return "4"

    run_rollouts(agent, TASKS[:1], group_size=3, seed=7, input_key="prompt")
    arl.shutdown()
    rows = gigpo_rows(db_path)
    assert [r["step_group_size"] for r in rows] == [3, 3, 3]
    assert {r["state_key"] for r in rows} == {observation_key(json.dumps("2+2?"))}
