"""Selecting rollouts by id or by `run_rollouts` run, not only by SQL text.

A training loop knows the rollouts it just ran: their ids (``RolloutOutcome.rollout_id``) and
the ``run_id`` that ``run_rollouts`` records in each rollout's metadata. ``compute_advantages``
and ``build_step_dataset`` take them as ``rollout_ids=`` and ``rollout_run_id=``, combined
with ``where`` by AND; ids are SQL parameters, so any text is just an id.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.data import BuildReport, DatasetError, build_step_dataset
from agent_rl_plugin.rl import AdvantageInputError, compute_advantages
from agent_rl_plugin.rollouts import run_rollouts

QUOTED = "r2'); DROP TABLE spans; --"
IDS = ["r0", "r1", QUOTED, "r3"]


@pytest.fixture
def store(db_path: Path) -> Path:
    """4 rollouts of one group, each with one LLM call; rollout i has reward i."""
    for i, rollout_id in enumerate(IDS):
        with arl.rollout(task_id="t", group_id="g", rollout_id=rollout_id):
            arl.record_llm_call("tiny", [{"role": "user", "content": "q"}], f"answer {i}")
            arl.emit_reward(float(i), "correct")
    arl.shutdown()  # flush and release the file
    return db_path


def advantages(path: Path, run_id: str) -> dict[str, float]:
    connection = duckdb.connect(str(path), read_only=True)
    try:
        rows = connection.execute("select rollout_id, value from advantages where run_id = ?", [run_id]).fetchall()
    finally:
        connection.close()
    return dict(rows)


def test_two_of_four_rollouts_by_id(store):
    run = compute_advantages(store, "grpo", rollout_ids=["r1", "r3"])
    # the group is the two selected rollouts only: rewards 1 and 3, advantages -a and +a
    values = advantages(store, run.run_id)
    assert sorted(values) == ["r1", "r3"]
    assert values["r1"] < 0 < values["r3"] and values["r1"] == pytest.approx(-values["r3"])
    assert run.parameters["rollout_ids"] == ["r1", "r3"]

    steps = compute_advantages(store, "gigpo", rollout_ids=["r1", "r3"])
    assert sorted(advantages(store, steps.run_id)) == ["r1", "r3"]

    report = BuildReport()
    ds = build_step_dataset(store, rollout_ids=["r3", "r1"], report=report)
    assert ds["rollout_id"] == ["r1", "r3"] and report.rollouts == 2  # oldest first
    assert [c[0]["content"] for c in ds["completion"]] == ["answer 1", "answer 3"]


def test_where_and_ids_are_combined_by_and(store):
    selected = dict(rollout_ids=["r0", "r1", QUOTED], where="total_reward >= 1")
    run = compute_advantages(store, "rloo", **selected)
    assert sorted(advantages(store, run.run_id)) == ["r1", QUOTED]
    assert build_step_dataset(store, **selected)["rollout_id"] == ["r1", QUOTED]
    with pytest.raises(DatasetError, match=r"^no rollouts match where 'total_reward >= 3' and rollout ids \['r0'"):
        build_step_dataset(store, where="total_reward >= 3", rollout_ids=["r0", "r1"])


def test_an_id_with_quotes_is_a_value_not_sql(store):
    ds = build_step_dataset(store, rollout_ids=[QUOTED])
    assert ds["rollout_id"] == [QUOTED]
    run = compute_advantages(store, "grpo", rollout_ids=[QUOTED])
    assert list(advantages(store, run.run_id)) == [QUOTED]
    # pasted into SQL this id would select every rollout; as a parameter it selects none
    injection = "x' OR '1'='1"
    with pytest.raises(DatasetError, match="no rollouts match rollout ids"):
        build_step_dataset(store, rollout_ids=[injection])
    with pytest.raises(AdvantageInputError, match="no rollouts to compute advantages for matching rollout ids"):
        compute_advantages(store, "grpo", rollout_ids=[injection])


def test_an_empty_list_selects_nothing(store):
    with pytest.raises(DatasetError, match=r"^no rollouts match rollout ids \[\] \(0\)"):
        build_step_dataset(store, rollout_ids=[])
    with pytest.raises(AdvantageInputError, match=r"^no rollouts to compute advantages for matching rollout ids \[\]"):
        compute_advantages(store, "gigpo", rollout_ids=[])


def agent(task: dict) -> str:
    arl.record_llm_call("tiny", task["prompt"], "answer")
    arl.emit_reward(float(task["sample_index"]), "correct")
    return "answer"


def test_the_rollouts_of_one_run_rollouts_call(db_path):
    tasks = [{"task_id": "a", "prompt": "1+1?"}, {"task_id": "b", "prompt": "2+2?"}]
    first = run_rollouts(agent, tasks, group_size=2, run_id="first")
    second = run_rollouts(agent, tasks, group_size=3, run_id="it's")
    arl.shutdown()
    ours = sorted(o.rollout_id for o in second)

    run = compute_advantages(db_path, "grpo", rollout_run_id="it's")
    assert sorted(advantages(db_path, run.run_id)) == ours
    assert run.parameters["rollout_run_id"] == "it's"
    ds = build_step_dataset(db_path, rollout_run_id="it's")
    assert sorted(ds["rollout_id"]) == ours

    # with ids: the rollouts of that run among these ids
    mixed = [first[0].rollout_id, second[0].rollout_id]
    assert build_step_dataset(db_path, rollout_run_id="first", rollout_ids=mixed)["rollout_id"] == [first[0].rollout_id]
    with pytest.raises(AdvantageInputError, match="matching rollout run id 'third'"):
        compute_advantages(db_path, "grpo", rollout_run_id="third")
