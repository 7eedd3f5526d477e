"""The closed training loop's bookkeeping: settings, what every round records, resuming after a
crash. (Whether it learns: tests/test_loop_learning.py.)"""

from __future__ import annotations

import json

import duckdb
import pytest

pytest.importorskip("torch")

from agent_rl_plugin.loop import LoopConfig, LoopConfigError, load_loop_config, read_rounds, train_loop  # noqa: E402
from agent_rl_plugin.loop.records import LoopRound, write_round  # noqa: E402


def small(tmp_path, **settings):
    return LoopConfig(**{"rounds": 1, "group_size": 4, "seed": 1, "output_dir": str(tmp_path / "loop"), **settings})


def test_settings_are_checked_with_the_fix_named(tmp_path):
    with pytest.raises(LoopConfigError, match="unknown environment 'maze'") as info:
        LoopConfig(env="maze")
    assert "grid" in info.value.hint
    with pytest.raises(LoopConfigError, match="unknown method"):
        LoopConfig(method="ppo")
    with pytest.raises(LoopConfigError, match="group_size must be an integer >= 2"):
        LoopConfig(group_size=1)
    with pytest.raises(LoopConfigError, match="set by the loop"):
        LoopConfig(train={"model": "x"})
    with pytest.raises(LoopConfigError, match="unknown training options learning_rte"):
        LoopConfig(train={"learning_rte": 1e-3})
    with pytest.raises(LoopConfigError, match="train: .*entropy_coef"):
        LoopConfig(train={"entropy_coef": -1.0})
    config_file = tmp_path / "loop.yaml"
    config_file.write_text("env: keydoor\nmethod: gigpo\nrounds: 3\ntrain:\n  learning_rate: 0.005\n")
    config = load_loop_config(config_file, rounds=5)
    assert (config.env, config.method, config.rounds, config.training_options()["learning_rate"]) == (
        "keydoor",
        "gigpo",
        5,
        0.005,
    )
    assert LoopConfig(env="agent_rl_plugin.envs:GridWorld").env == "agent_rl_plugin.envs:GridWorld"
    with pytest.raises(LoopConfigError, match="cannot load 'no_such_module:make'"):
        LoopConfig(env="no_such_module:make")
    config_file.write_text("env: grid\nepochs: 3\n")
    with pytest.raises(LoopConfigError, match="unknown settings epochs"):
        load_loop_config(config_file)


def test_the_loop_id_follows_the_settings_but_not_the_number_of_rounds():
    assert LoopConfig(rounds=2).loop_id() == LoopConfig(rounds=9).loop_id()
    assert LoopConfig(seed=1).loop_id() != LoopConfig(seed=2).loop_id()
    assert LoopConfig(name="mine").loop_id() == "mine"


def test_rounds_read_back_latest_row_wins(tmp_path):
    db = str(tmp_path / "r.duckdb")
    for value in (0.1, 0.4):
        write_round(
            db, LoopRound("L", 1, "done", "grid", "grpo", 0, "v1", heldout_success=value, seconds={"eval": 1.0})
        )
    write_round(db, LoopRound("L", 0, "done", "grid", "grpo", 0, "base", heldout_success=0.0))
    write_round(db, LoopRound("other", 0, "done", "grid", "grpo", 0, "base"))
    rounds = read_rounds(db, "L")
    assert [(r.round, r.heldout_success) for r in rounds] == [(0, 0.0), (1, 0.4)]
    assert rounds[1].seconds == {"eval": 1.0}
    assert read_rounds(str(tmp_path / "none.duckdb")) == []


@pytest.fixture(scope="module")
def one_round(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("loop")
    seen = []
    result = train_loop(small(tmp_path), progress=False, on_round=seen.append)
    return tmp_path, result, seen


def test_every_round_is_recorded_with_its_runs_and_policy_version(one_round):
    tmp_path, result, seen = one_round
    assert [r.round for r in seen] == [0, 1]
    zero, first = result.rounds
    assert zero.policy_version == "base" and zero.rollout_run_id is None
    assert first.status == "done", first.details
    assert first.adapter_path and first.policy_version.endswith("#1")
    assert set(first.seconds) == {"rollouts", "advantages", "dataset", "train", "reload", "eval"}
    connection = duckdb.connect(result.db_path, read_only=True)
    try:
        # the round's rollouts: 10 training starts x group_size 4, all rewarded
        rollouts = connection.execute(
            "select count(*), count(total_reward) from rollouts where json_extract_string(metadata, '$.run_id') = ?",
            [first.rollout_run_id],
        ).fetchone()
        assert rollouts == (40, 40)
        # every LLM call carries the policy version that answered, its state key and log-probs
        calls = connection.execute(
            """select json_extract_string(attributes, '$."agent_rl.policy.version"') as version,
                      json_extract_string(attributes, '$."agent_rl.state.key"') as state_key,
                      json_extract_string(attributes, '$."agent_rl.logprobs"') as logprobs
               from spans where rollout_id in (select rollout_id from rollouts
                     where json_extract_string(metadata, '$.run_id') = ?) and name like 'chat %'""",
            [first.rollout_run_id],
        ).fetchall()
        assert calls and {c[0] for c in calls} == {"base"}
        assert all(c[1].startswith("gridworld:r") for c in calls)
        assert all(len(json.loads(c[2])) == 2 for c in calls)  # action token + forced end token
        assert (
            connection.execute("select count(*) from advantages where run_id = ?", [first.advantage_run_id]).fetchone()[
                0
            ]
            == 40
        )
        run = connection.execute(
            "select status, adapter_path from training_runs where run_id = ?", [first.training_run_id]
        ).fetchone()
        assert run == ("ok", first.adapter_path)
    finally:
        connection.close()


def test_running_the_same_loop_again_resumes_after_its_last_round(one_round):
    tmp_path, result, _ = one_round
    again = []
    longer = train_loop(small(tmp_path, rounds=2), progress=False, on_round=again.append)
    assert longer.loop_id == result.loop_id and longer.resumed_from == 1
    assert [r.round for r in again] == [0, 1, 2]
    assert [r.rollout_run_id for r in longer.rounds[:2]] == [r.rollout_run_id for r in result.rounds]
    second = longer.rounds[2]
    # round 2 sampled with round 1's adapter and continued it
    connection = duckdb.connect(longer.db_path, read_only=True)
    try:
        versions = connection.execute(
            """select distinct json_extract_string(attributes, '$."agent_rl.policy.version"') from spans
               where rollout_id in (select rollout_id from rollouts where json_extract_string(metadata, '$.run_id') = ?)
                 and name like 'chat %'""",
            [second.rollout_run_id],
        ).fetchall()
    finally:
        connection.close()
    assert versions == [("round-1/adapter#1",)]
    assert second.status == "done" and second.adapter_path != result.rounds[1].adapter_path
    assert second.details["continued_from"] == result.rounds[1].adapter_path
    assert len(read_rounds(longer.db_path, longer.loop_id)) == 3


def test_a_loop_is_not_resumed_with_other_settings(one_round):
    tmp_path, result, _ = one_round
    with pytest.raises(LoopConfigError, match="was run with other settings") as info:
        train_loop(small(tmp_path, rounds=2, method="rloo", name=result.loop_id), progress=False)
    assert "--name" in info.value.hint


def test_an_episode_succeeds_only_by_reaching_its_goal():
    from agent_rl_plugin.envs import GridWorld, StepResult
    from agent_rl_plugin.loop import play_episode

    class Always:
        def __init__(self, word):
            self.word = word

        def generate(self, messages, *, choices=None, temperature=1.0, greedy=False):
            class Answer:
                text, token_ids, logprobs, version = self.word, [1], [0.0], "scripted"

            return Answer()

    class Lake(GridWorld):
        """Ends lost on the first step: done, not truncated, reward 0 (a hole)."""

        def step(self, action):
            return StepResult("You fell in.", 0.0, True, {"invalid": False, "truncated": False, "step": 1})

    won = play_episode(GridWorld(), (0, 1), Always("left"))
    assert won.succeeded and won.steps == 1 and won.total_reward == 1.0
    stuck = play_episode(GridWorld(), (0, 1), Always("right"))
    assert not stuck.succeeded and stuck.steps == GridWorld.max_steps
    assert not play_episode(Lake(), (0, 1), Always("up")).succeeded


def test_the_loop_trains_a_policy_the_agent_calls_over_http(tmp_path):
    """The agent calls its policy through the OpenAI-compatible server; the loop loads each new
    adapter through the server's runtime LoRA endpoint, as it would on vLLM."""
    from agent_rl_plugin.loop.config import environment_factory
    from agent_rl_plugin.loop.driver import _base_model
    from agent_rl_plugin.policy import LocalPolicy, PolicyClient, PolicyServer, RemotePolicy

    config = small(tmp_path, name="served")
    base = _base_model(config, environment_factory(config.env))
    with PolicyServer(LocalPolicy(base, seed=1), adapter_root=config.output_dir) as server:
        served = RemotePolicy(PolicyClient(server.url))
        result = train_loop(config, policy=served, progress=False)
    first = result.rounds[1]
    assert first.status == "done", first.details
    assert served.version == first.policy_version != "base"
    connection = duckdb.connect(result.db_path, read_only=True)
    try:
        logged = connection.execute(
            """select json_extract_string(attributes, '$."agent_rl.logprobs"') from spans
               where name like 'chat %' and rollout_id in (select rollout_id from rollouts
                     where json_extract_string(metadata, '$.run_id') = ?)""",
            [first.rollout_run_id],
        ).fetchall()
    finally:
        connection.close()
    # the server's log-probs reached the store, one per answer token (action + forced end)
    assert logged and all(len(json.loads(row[0])) == 2 for row in logged)
