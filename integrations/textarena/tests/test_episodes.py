"""Episodes of TextArena's FrozenLake played through agent_rl_plugin's loop: scripted optimal and
random policies via play_episode (nothing recorded with record=False, one LLM-call span per
step with record=True), and recorded rollouts via env_agent and run_rollouts."""

from __future__ import annotations

from agent_rl_textarena import make_frozenlake, optimal_actions
from policies import OptimalPolicy, RandomPolicy, ScriptedPolicy

import agent_rl_plugin as arl
from agent_rl_plugin.loop.episode import REWARD_NAME, EpisodeResult, env_agent, play_episode
from agent_rl_plugin.rollouts import run_rollouts


def test_the_optimal_policy_wins_every_lake():
    env = make_frozenlake()
    for start in env.train_starts + env.heldout_starts:
        result = play_episode(env, start, OptimalPolicy(start))
        assert result == EpisodeResult(1.0, True, len(optimal_actions(start)), 0), start


def test_the_policy_is_asked_like_an_llm_with_the_board_and_the_action_words():
    env = make_frozenlake()
    policy = ScriptedPolicy(["down", "jump", "right"])
    play_episode(env, 0, policy, greedy=True, temperature=0.5)
    first, second = policy.calls[:2]
    assert first["messages"] == [{"role": "user", "content": env.reset(0)}]
    assert first["messages"][0]["content"].startswith("Current Board:") and "|  P  |" in first["messages"][0]["content"]
    assert first["choices"] == ["up", "down", "left", "right"]
    assert (first["temperature"], first["greedy"]) == (0.5, True)
    assert second["messages"][0]["content"] != first["messages"][0]["content"]  # the player moved
    assert policy.calls[2]["messages"] == second["messages"]  # "jump" changed nothing


def test_random_policies_play_to_the_end_and_count_invalid_words():
    env = make_frozenlake()
    results = []
    for seed in range(12):
        policy = RandomPolicy(seed, extra=("jump",))
        result = play_episode(env, env.train_starts[seed % 10], policy)
        assert result.steps == len(policy.picks) <= env.max_steps
        assert result.invalid_actions == policy.picks.count("jump")
        assert result.total_reward in (0.0, 1.0)  # reward="win": 1.0 exactly when the lake was crossed
        results.append(result)
    assert not all(r.total_reward == 1.0 for r in results)  # wandering rarely finds the goal
    assert any(r.steps < env.max_steps for r in results)  # some fell in a hole or hit the edge twice
    assert sum(r.invalid_actions for r in results) > 0


def test_record_false_records_nothing_and_record_true_one_call_per_step(db_path, store):
    arl.configure(db=str(db_path))
    env = make_frozenlake()
    with arl.rollout(task_id="quiet") as quiet:
        silent = play_episode(env, 3, OptimalPolicy(3), record=False)
    with arl.rollout(task_id="loud") as loud:
        env.reset(3)
        keys = [env.state_key()]
        for word in optimal_actions(3)[:-1]:
            env.step(word)
            keys.append(env.state_key())
        recorded = play_episode(env, 3, OptimalPolicy(3), record=True, model_name="tiny")
    assert silent == recorded == EpisodeResult(1.0, True, 6, 0)
    counts = store.rows("select rollout_id, n_llm_calls from rollouts")
    assert {r["rollout_id"]: r["n_llm_calls"] for r in counts} == {quiet.rollout_id: 0, loud.rollout_id: 6}
    assert store.one("select count(*) from llm_calls where rollout_id = ?", quiet.rollout_id) == 0
    calls = store.rows(
        "select state_key, request_model from llm_calls where rollout_id = ? order by start_time", loud.rollout_id
    )
    assert [c["state_key"] for c in calls] == keys  # the GiGPO anchor: the state before each step
    assert {c["request_model"] for c in calls} == {"tiny"}


def test_env_agent_records_rollouts_with_the_episode_return(db_path, store):
    tasks = [{"task_id": f"lake-{s}", "metadata": {"start": s}} for s in (0, 1)]
    policies = {0: OptimalPolicy(0), 1: ScriptedPolicy(["up", "up"])}  # lake 1: twice into the edge

    def agent(task):
        start = task["metadata"]["start"]
        return env_agent(make_frozenlake, policies[start])(task)

    outcomes = run_rollouts(agent, tasks, group_size=1, concurrency=1, db=str(db_path))
    assert [o.status for o in outcomes] == ["ok", "ok"]
    rows = store.rows("select task_id, total_reward, n_llm_calls from rollouts order by task_id")
    assert rows == [
        {"task_id": "lake-0", "total_reward": 1.0, "n_llm_calls": 6},
        {"task_id": "lake-1", "total_reward": 0.0, "n_llm_calls": 2},
    ]
    assert set(store.one("select list(distinct name) from episode_rewards")) == {REWARD_NAME}
