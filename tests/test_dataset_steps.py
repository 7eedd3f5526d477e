"""GiGPO step rows: one per LLM call, advantages computed or read from the advantages table,
behaviour log-probs when the span carries them."""

from __future__ import annotations

import numpy as np
import pytest

from agent_rl_plugin.data import LOGPROBS_ATTRIBUTE, BuildReport, DatasetError, build_step_dataset
from agent_rl_plugin.data.synthetic import synthesize_store, write_rollout
from agent_rl_plugin.store import connect_writer


@pytest.fixture
def store(tmp_path, plugin_manager):
    path = tmp_path / "s.duckdb"
    synthesize_store(path, rollouts=8, llm_calls=3, group_size=4, n_tasks=2)
    return path


def test_one_row_per_llm_call_with_gigpo_advantages(store):
    from agent_rl_plugin.rl import gigpo_advantages, steps_for_gigpo
    from agent_rl_plugin.store import open_reader

    report = BuildReport()
    ds = build_step_dataset(store, report=report, gigpo={"omega": 0.5})
    assert ds.num_rows == 8 * 3 == report.rows
    assert ds.column_names == [
        "prompt",
        "completion",
        "advantage",
        "old_logprobs",
        "completion_token_ids",
        "prompt_token_ids",
        "rollout_id",
        "group_id",
        "task_id",
        "step_index",
        "state_key",
    ]
    first = ds[0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert [m["role"] for m in first["completion"]] == ["assistant"]
    assert first["old_logprobs"] is None and first["state_key"]
    third = ds[2]
    assert [m["role"] for m in third["prompt"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    # the same numbers as the rl module's own functions, matched by the steps view's step index
    connection = open_reader(str(store))
    try:
        steps = steps_for_gigpo(connection)
        expected = gigpo_advantages(steps, omega=0.5)
    finally:
        connection.close()
    by_key = {
        (r, s): a
        for r, s, a in zip(
            steps.column("trajectory_id").to_pylist(), steps.column("view_step_index").to_pylist(), expected
        )
    }
    got = [by_key[(r, s)] for r, s in zip(ds["rollout_id"], ds["step_index"])]
    assert np.allclose(ds["advantage"], got)


def test_advantages_from_the_table(store):
    from agent_rl_plugin.rl import compute_advantages

    with pytest.raises(DatasetError, match="no stored advantage run covers these rollouts") as caught:
        build_step_dataset(store, from_table=True)
    assert "agent-rl advantages compute --method gigpo" in (caught.value.hint or "")
    run = compute_advantages(str(store), "gigpo")
    report = BuildReport()
    ds = build_step_dataset(store, from_table=True, report=report)
    assert report.extra["advantages_run_id"] == run.run_id
    computed = build_step_dataset(store)
    assert np.allclose(ds["advantage"], computed["advantage"])
    assert build_step_dataset(store, run_id=run.run_id)["advantage"] == ds["advantage"]
    with pytest.raises(DatasetError, match="no advantage run 'no-such-run' in the store") as caught:
        build_step_dataset(store, run_id="no-such-run")
    assert "agent-rl advantages runs" in (caught.value.hint or "")


def test_logprobs_are_read_from_the_llm_span(tmp_path, plugin_manager):
    path = tmp_path / "s.duckdb"
    connection = connect_writer(str(path))
    user = [{"role": "user", "content": "q"}]
    answer = [{"role": "assistant", "content": "a"}]
    for i, group in enumerate(["g", "g"]):
        write_rollout(
            connection,
            f"r{i}",
            group_id=group,
            llm_calls=[(user, answer)],
            rewards={"ok": float(i)},
            start_s=i,
            llm_attributes=[{LOGPROBS_ATTRIBUTE: [-0.5, -1.25]}] if i == 0 else None,
        )
    connection.close()
    ds = build_step_dataset(path)
    assert ds["old_logprobs"] == [[-0.5, -1.25], None]
    assert ds["advantage"][0] < ds["advantage"][1]


def test_rollouts_without_llm_calls_have_no_steps(tmp_path, plugin_manager):
    path = tmp_path / "s.duckdb"
    connection = connect_writer(str(path))
    write_rollout(connection, "r0", agent_input="x", agent_output="y", rewards={"ok": 1.0})
    connection.close()
    with pytest.raises(DatasetError, match="have no LLM calls"):
        build_step_dataset(path)
