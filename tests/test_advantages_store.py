"""Advantages over a recorded, scored demo database: steps_for_gigpo, state keys (recorded,
hook, default), reward crediting, `agent-rl advantages compute` into the advantages table, and
the errors for empty, unscored or NaN inputs."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import duckdb
import numpy as np
import pytest
from score_support import agent_rl, record_demo, rows

from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards.runner import score
from agent_rl_plugin.rl import (
    compute_advantages,
    compute_gigpo,
    episode_rewards,
    grpo_advantages,
    observation_key,
    steps_for_gigpo,
    table_report,
)
from agent_rl_plugin.store import connect_writer

SCORED = ["tool_success", "task_completion"]


@pytest.fixture
def scored_db(db_path: Path, plugin_manager) -> Path:
    """The demo agent, 2 tasks x 4 rollouts, scored with tool_success and task_completion."""
    record_demo(tasks=2, group_size=4, seed=1)
    report = score(str(db_path), rewards=SCORED, workers=0)
    assert report.ok
    return db_path


def read(path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(path), read_only=True)


def compute_json(path: Path, *args: str) -> dict:
    result = agent_rl("advantages", "compute", "--db", str(path), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_gigpo_round_trip_through_the_cli(scored_db):
    run = compute_json(scored_db, "--method", "gigpo", "--reward", "task_completion", "--reward", "tool_success")
    assert run["method"] == "gigpo" and run["rows_written"] > 0
    summary = run["summary"]
    assert summary["rollouts"] == 8 and summary["groups"] == 2 and summary["singleton_groups"] == 0
    assert summary["rows_in_shared_step_groups"] > 0  # the demo revisits observations across a group

    # one row per LLM step of the selected rollouts, pointing at it by the steps view's step_index
    n_llm = rows(scored_db, "select count(*) as n from steps where kind = 'llm'")[0]["n"]
    assert run["rows_written"] == n_llm
    joined = rows(
        scored_db,
        "select count(*) as n from advantages a join steps s on s.rollout_id = a.rollout_id "
        "and s.step_index = a.step_index where s.kind = 'llm' and a.run_id = ?",
        [run["run_id"]],
    )
    assert joined[0]["n"] == n_llm
    # value = A_E + omega * A_S; step groups of one have A_S = 0; some step groups are larger
    checks = rows(
        scored_db,
        "select max(abs(value - episode_advantage - step_advantage)) as err, max(step_group_size) as biggest, "
        "max(abs(step_advantage)) filter (where step_group_size = 1) as lone, "
        "count(distinct parameters) as params, count(distinct input_hash) as hashes from advantages",
    )[0]
    assert checks["err"] < 1e-12 and checks["biggest"] > 1 and (checks["lone"] or 0.0) == 0.0
    assert checks["params"] == 1 and checks["hashes"] == 1
    # mean_norm: step advantages sum to 0 inside each step group, episode advantages per group
    sums = rows(
        scored_db,
        "select max(abs(s)) as worst from (select sum(step_advantage) as s from advantages "
        "group by group_id, state_key)",
    )
    assert sums[0]["worst"] < 1e-9
    params = json.loads(rows(scored_db, "select any_value(parameters) as p from advantages")[0]["p"])
    assert params == {
        "baseline": "step",
        "epsilon": 1e-06,
        "gamma": 0.95,
        "mode": "mean_norm",
        "omega": 1.0,
        "rewards": ["task_completion", "tool_success"],
        "terminal_reward": True,
        "weights": None,
        "where": None,
        "failed_rollouts": "exclude",
    }

    # the stored values are what gigpo_advantages gives on steps_for_gigpo
    connection = read(scored_db)
    try:
        steps = steps_for_gigpo(connection, reward_names=SCORED)
    finally:
        connection.close()
    expected = compute_gigpo(steps)
    stored = {
        (r["rollout_id"], r["step_index"]): r["value"]
        for r in rows(scored_db, "select rollout_id, step_index, value from advantages")
    }
    keys = zip(steps.column("trajectory_id").to_pylist(), steps.column("view_step_index").to_pylist())
    np.testing.assert_allclose([stored[k] for k in keys], expected.advantage, rtol=0, atol=1e-12)

    # reproducible: a second run gives the same values under a new run_id and the same input hash
    again = compute_json(scored_db, "--method", "gigpo", "--reward", "tool_success", "--reward", "task_completion")
    assert again["run_id"] != run["run_id"] and again["input_hash"] == run["input_hash"]
    diff = rows(
        scored_db,
        "select count(*) as n, max(abs(a.value - b.value)) as worst from advantages a join advantages b "
        "on a.rollout_id = b.rollout_id and a.step_index = b.step_index where a.run_id = ? and b.run_id = ?",
        [run["run_id"], again["run_id"]],
    )[0]
    assert diff["n"] == n_llm and diff["worst"] == 0.0

    listed = agent_rl("advantages", "runs", "--db", str(scored_db), "--json")
    assert listed.exit_code == 0, listed.output
    assert {r["run_id"] for r in json.loads(listed.stdout)} == {run["run_id"], again["run_id"]}


def test_steps_table_observations_rewards_and_keys(scored_db):
    connection = read(scored_db)
    try:
        table = steps_for_gigpo(connection, reward_names=SCORED, terminal_reward=False)
        with_terminal = steps_for_gigpo(connection, reward_names=SCORED)
        steps = connection.execute(
            "select rollout_id, step_index, kind, output, status, error from steps order by rollout_id, step_index"
        ).fetchall()
        step_rewards = connection.execute(
            "select rollout_id, step_index, value from rewards where name = 'tool_success' and step_index is not null"
        ).fetchall()
        episode = connection.execute(  # weighted by the weights scoring recorded (task_completion 1.5)
            "select r.rollout_id, sum(coalesce(w.weight, 1) * r.value) / sum(coalesce(w.weight, 1)) from rewards r "
            "left join reward_weights w on w.name = r.name where r.step_index is null and r.name in "
            "('tool_success', 'task_completion') group by r.rollout_id"
        ).fetchall()
        inputs = dict(connection.execute("select rollout_id, input from rollouts").fetchall())
    finally:
        connection.close()
    # per-row Python expectation: actions in order, observation = the last tool output before it
    # (the rollout's input for the first), tool rewards credited to the LLM step before the tool;
    # the demo's calculate tool fails on malformed expressions, so failed observations occur
    assert any(status == "error" for *_, status, _ in steps)  # the case is exercised
    tool_reward = {(r, i): v for r, i, v in step_rewards}
    expected = []
    per_rollout = defaultdict(list)
    for rollout_id, index, kind, output, status, error in steps:
        # a failed tool's observation is "error: " + its error message
        per_rollout[rollout_id].append((index, kind, f"error: {error}" if status == "error" else output))
    for rollout_id, items in per_rollout.items():
        observation, action = inputs[rollout_id], -1
        position = -1
        credited: dict[int, float] = defaultdict(float)
        keys: dict[int, str] = {}
        for index, kind, output in items:
            if kind == "llm":
                position += 1
                action = position
                keys[position] = observation_key(observation)
                credited[position] += 0.0
            elif kind == "tool":
                credited[action] += tool_reward.get((rollout_id, index), 0.0)
                observation = output
        for position in sorted(keys):
            expected.append((rollout_id, position, keys[position], credited[position]))
    actual = sorted(zip(*(table.column(c).to_pylist() for c in ("trajectory_id", "step_index", "state_key", "reward"))))
    assert actual == sorted(expected)
    assert set(table.column("state_key_source").to_pylist()) == {"default"}
    assert table.column("episode_reward").to_pylist() == pytest.approx(
        [dict(episode)[t] for t in table.column("trajectory_id").to_pylist()]
    )
    # terminal reward: the combined episode reward is added to each rollout's last action only
    delta = np.subtract(with_terminal.column("reward").to_pylist(), table.column("reward").to_pylist())
    last = defaultdict(int)
    for t, i in zip(table.column("trajectory_id").to_pylist(), table.column("step_index").to_pylist()):
        last[t] = max(last[t], i)
    expected_delta = [
        dict(episode)[t] if i == last[t] else 0.0
        for t, i in zip(table.column("trajectory_id").to_pylist(), table.column("step_index").to_pylist())
    ]
    np.testing.assert_allclose(delta, expected_delta, atol=1e-12)
    report = table_report(table)
    assert report["state_keys"] == {"recorded": 0, "plugin": 0, "default": table.num_rows}
    assert report["unscored"]["count"] == 0 and report["uncredited_step_rewards"]["count"] == 0


class KeyPlugin:
    """A state-key plugin: keys the first action by its input, passes on the others."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    @hookimpl
    def agent_rl_state_key(self, step):  # noqa: ANN001 - hook signature
        self.seen.append(step)
        return "first-action" if step["action_index"] == 0 else None


def test_recorded_keys_win_and_plugins_are_asked_for_the_rest(scored_db, plugin_manager):
    target = rows(scored_db, "select span_id, rollout_id from steps where kind = 'llm' and step_index = 2 limit 1")[0]
    connection = connect_writer(scored_db)
    connection.execute(
        """update spans set attributes = json_merge_patch(attributes, '{"agent_rl.state.key": "recorded-key"}')
           where span_id = ?""",
        [target["span_id"]],
    )
    connection.close()
    plugin = KeyPlugin()
    plugin_manager.register(plugin, name="test-state-keys")
    connection = read(scored_db)
    try:
        table = steps_for_gigpo(connection, pm=plugin_manager)
    finally:
        connection.close()
    by_row = {
        (t, i): (k, s)
        for t, i, k, s in zip(
            *(
                table.column(c).to_pylist()
                for c in ("trajectory_id", "view_step_index", "state_key", "state_key_source")
            )
        )
    }
    assert by_row[(target["rollout_id"], 2)] == ("recorded-key", "recorded")
    assert all(k == "first-action" and s == "plugin" for (t, i), (k, s) in by_row.items() if i == 0)
    # the plugin saw every action without a recorded key; None fell back to the default key,
    # and the SQL default equals default_state_key / observation_key computed in Python
    assert len(plugin.seen) == table.num_rows - 1
    for step in plugin.seen:
        key, source = by_row[(step["rollout_id"], step["step_index"])]
        assert step["state_key"] is None and step["observation_source"] in {"rollout_input", "tool"}
        if step["action_index"] > 0:
            assert (key, source) == (observation_key(step["observation"]), "default")
    report = table_report(table)["state_keys"]
    assert report["recorded"] == 1 and report["plugin"] == 8 and report["default"] == table.num_rows - 9


def test_sql_default_key_matches_python_for_any_text():
    connection = duckdb.connect()
    for text in ["", "4.0", "error: ValueError: bad", "prix: 3,50 € — ok ✓", '{"messages": [1]}']:
        sql = connection.execute("select left(md5(?), 16)", [text]).fetchall()[0][0]
        assert sql == observation_key(text)
    assert observation_key(None) == observation_key("")


def test_grpo_rloo_dr_grpo_through_the_cli(scored_db):
    connection = read(scored_db)
    try:
        table = episode_rewards(connection, reward_names=["task_completion"])
    finally:
        connection.close()
    expected = dict(
        zip(
            table.column("rollout_id").to_pylist(),
            grpo_advantages(table.column("reward").to_numpy(), table.column("group_id").to_pylist(), "batch"),
        )
    )
    run = compute_json(scored_db, "--method", "grpo", "--scale", "batch", "--reward", "task_completion")
    stored = rows(
        scored_db, "select rollout_id, step_index, value, reward from advantages where run_id = ?", [run["run_id"]]
    )
    assert len(stored) == 8 and all(r["step_index"] is None for r in stored)
    assert {r["rollout_id"]: r["value"] for r in stored} == pytest.approx(expected, abs=1e-12)
    for method in ("rloo", "dr_grpo"):
        out = compute_json(scored_db, "--method", method)
        assert out["rows_written"] == 8 and out["summary"]["groups"] == 2
        sums = rows(
            scored_db,
            "select max(abs(s)) as m from (select sum(value) s from advantages where run_id = ? group by group_id)",
            [out["run_id"]],
        )
        assert sums[0]["m"] < 1e-9  # both are zero-sum inside a group


def test_dry_run_writes_nothing_and_text_output_summarises(scored_db):
    result = agent_rl("advantages", "compute", "--db", str(scored_db), "--method", "gigpo", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "step groups" in result.stdout and "Dry run" in result.stdout
    assert rows(scored_db, "select count(*) as n from advantages")[0]["n"] == 0


def test_unscored_rollouts_are_left_out_and_reported(scored_db):
    victim = rows(scored_db, "select rollout_id from rollouts order by rollout_id limit 1")[0]["rollout_id"]
    connection = connect_writer(scored_db)
    connection.execute("delete from rewards where rollout_id = ? and step_index is null", [victim])
    connection.close()
    for method in ("gigpo", "grpo"):
        run = compute_json(scored_db, "--method", method)
        assert run["report"]["unscored"] == {"count": 1, "examples": [victim]}
        assert any("without a usable episode reward left out" in line for line in run["notes"])
        assert rows(scored_db, "select count(*) as n from advantages where rollout_id = ?", [victim])[0]["n"] == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "gigpo", "--where", "task_id = 'nope'"], "no rollouts to compute advantages for matching"),
        (["--method", "grpo", "--where", "no_such_column = 1"], "bad where"),
        (["--method", "grpo", "--reward", "never_scored"], "no usable reward named 'never_scored'"),
        (["--method", "ppo"], "unknown method 'ppo'"),
        (["--method", "gigpo", "--mode", "zscore"], "unknown mode 'zscore'"),
        (["--method", "gigpo", "--weight", "oops"], "bad --weight 'oops'"),
    ],
)
def test_bad_requests_fail_with_one_clear_line(scored_db, args, message):
    result = agent_rl("advantages", "compute", "--db", str(scored_db), *args)
    assert result.exit_code == 1, result.output
    assert message in result.stderr


def test_nan_reward_is_an_error_naming_the_rollout(scored_db):
    victim = rows(scored_db, "select rollout_id from rollouts order by rollout_id limit 1")[0]["rollout_id"]
    connection = connect_writer(scored_db)
    connection.execute(
        "update rewards set value = 'NaN'::DOUBLE where rollout_id = ? and name = 'task_completion'", [victim]
    )
    connection.close()
    for method in ("gigpo", "rloo"):
        result = agent_rl("advantages", "compute", "--db", str(scored_db), "--method", method)
        assert result.exit_code == 1
        assert f"reward 'task_completion' of rollout {victim} (episode) is nan" in result.stderr


def test_no_rewards_at_all(db_path, plugin_manager):
    record_demo(tasks=1, group_size=2)
    connection = connect_writer(db_path)
    connection.execute("delete from rewards")
    connection.close()
    result = agent_rl("advantages", "compute", "--db", str(db_path), "--method", "gigpo")
    assert result.exit_code == 1 and "have no usable reward" in result.stderr
    with pytest.raises(ValueError, match="none of the 2 selected rollouts has a usable episode reward"):
        compute_advantages(db_path, "grpo")


def test_weights_change_the_combined_episode_reward(scored_db):
    connection = read(scored_db)
    try:
        plain = episode_rewards(connection, reward_names=SCORED)
        weighted = episode_rewards(connection, reward_names=SCORED, weights={"task_completion": 3.0})
        parts = connection.execute(
            "select rollout_id, name, value from rewards where step_index is null and name in ('tool_success', 'task_completion')"
        ).fetchall()
    finally:
        connection.close()
    values = defaultdict(dict)
    for rollout_id, name, value in parts:
        values[rollout_id][name] = value
    # weighted mean: (3 * task_completion + 1 * tool_success) / 4
    expected = {r: (3 * v["task_completion"] + v["tool_success"]) / 4 for r, v in values.items()}
    got = dict(zip(weighted.column("rollout_id").to_pylist(), weighted.column("reward").to_pylist()))
    assert got == pytest.approx(expected)
    assert plain.column("reward").to_pylist() != weighted.column("reward").to_pylist()


def test_missing_database_is_not_created(tmp_path, plugin_manager):
    path = tmp_path / "absent.duckdb"
    result = agent_rl("advantages", "compute", "--db", str(path), "--method", "grpo")
    assert result.exit_code == 1 and f"no database at {path}" in result.stderr
    assert not path.exists()


def test_step_rewards_only_make_r_the_sum_of_step_rewards(scored_db):
    connection = connect_writer(scored_db)
    connection.execute("delete from rewards where step_index is null")
    connection.close()
    connection = read(scored_db)
    try:
        table = steps_for_gigpo(connection)
    finally:
        connection.close()
    assert "episode_reward" not in table.column_names
    assert table_report(table)["episode_reward"] == "sum of step rewards (no episode rewards)"
    result = compute_gigpo(table)
    totals = defaultdict(float)
    for t, r in zip(table.column("trajectory_id").to_pylist(), table.column("reward").to_pylist()):
        totals[t] += r
    assert result.episode_reward.tolist() == [totals[t] for t in table.column("trajectory_id").to_pylist()]
    # episode-level methods need episode rewards
    result = agent_rl("advantages", "compute", "--db", str(scored_db), "--method", "grpo")
    assert result.exit_code == 1 and "has a usable episode reward" in result.stderr


def test_reward_name_equals_weight_is_the_way_to_weigh(scored_db):
    """`-r NAME=W` picks the reward and weighs it; the hidden `--weight NAME=W` spelling gives the
    same run; without the weight the combined rewards (so the input hash) differ."""
    args = ["--method", "grpo", "--dry-run"]
    new = compute_json(scored_db, *args, "-r", "task_completion=3", "-r", "tool_success")
    old = compute_json(
        scored_db, *args, "--reward", "task_completion", "--reward", "tool_success", "--weight", "task_completion=3"
    )
    plain = compute_json(scored_db, *args, "-r", "task_completion", "-r", "tool_success")
    assert new["parameters"]["weights"] == {"task_completion": 3.0} == old["parameters"]["weights"]
    assert new["parameters"]["rewards"] == ["task_completion", "tool_success"]
    assert new["input_hash"] == old["input_hash"] != plain["input_hash"]
    assert agent_rl("advantages", "compute", "--db", str(scored_db), "-m", "grpo").exit_code == 2  # -m is --model
