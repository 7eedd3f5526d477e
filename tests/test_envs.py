"""The bundled text environments: the protocol, GridWorld, KeyDoor and the gymnasium adapter.

Everything here is deterministic: the same start and the same actions give the same
observations, rewards and state keys."""

from __future__ import annotations

import pytest

from agent_rl_plugin.envs import EnvError, GridWorld, GymTextAdapter, KeyDoor, StepResult, TextEnv
from agent_rl_plugin.errors import AgentRLError

ENVS = [GridWorld, KeyDoor]


def play(env, actions: list[str]) -> list[StepResult]:
    return [env.step(a) for a in actions]


# --- the protocol, for every bundled environment ------------------------------------------


@pytest.mark.parametrize("make", ENVS)
def test_each_environment_follows_the_protocol(make):
    env = make()
    assert isinstance(env, TextEnv)
    assert env.actions == ("up", "down", "left", "right")
    first = env.reset()
    assert isinstance(first, str) and first == env.reset(env.train_starts[0])


@pytest.mark.parametrize("make", ENVS)
def test_starts_are_disjoint_free_cells_and_every_one_is_solvable_in_time(make):
    env = make()
    assert len(env.train_starts) == 10 and len(env.heldout_starts) == 5
    assert len(set(env.train_starts) | set(env.heldout_starts)) == 15  # no repeats, no overlap
    for start in env.train_starts + env.heldout_starts:
        path = env.optimal_actions(start)
        assert 1 <= len(path) <= env.max_steps, (start, path)
        env.reset(start)
        results = play(env, list(path))
        assert [r.reward for r in results] == [0.0] * (len(path) - 1) + [1.0]
        assert results[-1].done and not any(r.done for r in results[:-1])


@pytest.mark.parametrize("make", ENVS)
def test_an_action_that_is_not_a_move_is_a_no_op_step_flagged_invalid(make):
    env = make()
    before = env.reset()
    key = env.state_key()
    result = env.step("jump over the wall")
    assert result == StepResult(before, 0.0, False, {"invalid": True, "truncated": False, "step": 1})
    assert env.state_key() == key
    assert env.step(" Down\n").info["invalid"] is False  # case and spaces do not matter


@pytest.mark.parametrize("make", ENVS)
def test_the_episode_ends_after_max_steps_without_reward(make):
    env = make()
    env.reset()
    results = play(env, ["stay"] * env.max_steps)
    assert [r.done for r in results] == [False] * (env.max_steps - 1) + [True]
    assert results[-1].info["truncated"] is True and all(r.reward == 0.0 for r in results)
    with pytest.raises(EnvError, match="episode is over") as error:
        env.step("up")
    assert error.value.hint == "call reset() to start a new episode"
    env.reset()
    assert env.step("up").info["step"] == 1  # reset starts a fresh budget


@pytest.mark.parametrize("make", ENVS)
def test_a_start_that_is_not_a_free_cell_is_refused(make):
    env = make()
    for start in [(9, 9), (0, -1), "0,1", (1,)]:
        with pytest.raises(EnvError, match="is not a start cell") as error:
            env.reset(start)
        assert isinstance(error.value, AgentRLError) and isinstance(error.value, ValueError)
        assert "train_starts" in (error.value.hint or "")


# --- GridWorld ----------------------------------------------------------------------------


def test_gridworld_observations_say_where_the_agent_and_the_goal_are():
    env = GridWorld()
    assert env.reset((2, 3)) == "You are at row 2, column 3. The goal is at row 0, column 0."
    assert env.step("up").observation == "You are at row 1, column 3. The goal is at row 0, column 0."
    assert env.step("left").observation == "You are at row 1, column 2. The goal is at row 0, column 0."
    assert env.step("down").observation.startswith("You are at row 2, column 2.")
    assert env.step("right").observation.startswith("You are at row 2, column 3.")


def test_gridworld_moving_into_the_edge_stays_put_and_the_goal_pays_once():
    env = GridWorld()
    env.reset((0, 3))
    blocked = env.step("right")
    assert blocked.observation.startswith("You are at row 0, column 3.") and not blocked.info["invalid"]
    assert env.step("up").observation.startswith("You are at row 0, column 3.")
    results = play(env, ["left", "left", "left"])
    assert [(r.reward, r.done) for r in results] == [(0.0, False), (0.0, False), (1.0, True)]
    assert results[-1].observation.endswith("You reached the goal.")
    assert results[-1].info["truncated"] is False


def test_gridworld_state_keys_are_equal_for_equal_cells_and_differ_otherwise():
    a, b = GridWorld(), GridWorld()
    a.reset((1, 1))
    b.reset((2, 2))
    assert a.state_key() == "gridworld:r1c1" and a.state_key() != b.state_key()
    b.step("up")
    b.step("left")  # another way to (1, 1), in another instance
    assert a.state_key() == b.state_key()
    keys = set()
    for start in a.train_starts + a.heldout_starts:
        a.reset(start)
        keys.add(a.state_key())
    assert len(keys) == 15


def test_gridworld_goal_is_not_a_start():
    with pytest.raises(EnvError):
        GridWorld().reset(GridWorld.goal)


# --- KeyDoor ------------------------------------------------------------------------------


def test_keydoor_door_without_the_key_pays_nothing_and_the_key_then_door_pays():
    env = KeyDoor()
    env.reset((0, 3))
    locked = env.step("right")
    assert (locked.reward, locked.done, locked.info["door_locked"]) == (0.0, False, True)
    assert locked.observation.startswith("You are at row 0, column 4. You do not have the key.")

    env.reset((3, 0))
    picked = env.step("down")
    assert picked.info["picked_key"] is True and picked.reward == 0.0
    assert picked.observation.startswith("You are at row 4, column 0. You have the key.")
    assert "picked_key" not in env.step("up").info  # the key is picked up once
    back = play(env, ["up", "up", "up", "right", "right", "right"])
    assert all((r.reward, r.done) == (0.0, False) for r in back)
    opened = env.step("right")
    assert (opened.reward, opened.done, opened.info["step"]) == (1.0, True, 9)
    assert opened.observation.endswith("You opened the door.")


def test_keydoor_wall_blocks_the_middle_row():
    env = KeyDoor()
    env.reset((1, 2))
    blocked = env.step("down")
    assert blocked.observation.startswith("You are at row 1, column 2.") and not blocked.info["invalid"]
    env.reset((3, 1))
    assert env.step("up").observation.startswith("You are at row 3, column 1.")
    for wall in KeyDoor.walls | {KeyDoor.key, KeyDoor.door}:
        with pytest.raises(EnvError):
            env.reset(wall)


def test_keydoor_state_keys_tell_the_key_apart_and_recur_across_episodes():
    env = KeyDoor()
    env.reset((3, 0))
    without_key = env.state_key()
    env.step("down")  # (4, 0): picks up the key
    env.step("up")  # back to (3, 0), key in hand
    assert without_key == "keydoor:r3c0:nokey" and env.state_key() == "keydoor:r3c0:key"
    env.reset((4, 1))
    env.step("left")
    env.step("up")
    assert env.state_key() == "keydoor:r3c0:key"  # the same state reached another way


def test_keydoor_needs_step_credit_its_shortest_paths_are_long():
    env = KeyDoor()
    lengths = [env.shortest_path_length(s) for s in env.train_starts + env.heldout_starts]
    assert min(lengths) >= 10 and max(lengths) == 15 <= env.max_steps == 16


# --- GymTextAdapter -----------------------------------------------------------------------


class CounterEnv:
    """A gymnasium-style environment: count from the seed up to 3 with +1 / -1 actions."""

    def __init__(self) -> None:
        self.count = 0
        self.steps_seen: list[int] = []

    def reset(self, seed=None):
        self.count = seed or 0
        return self.count, {"seed": seed}  # an int observation: the adapter makes it text

    def step(self, action: int):
        self.steps_seen.append(action)
        self.count += action
        terminated = self.count == 3
        truncated = self.count < -2  # the wrapped environment's own truncation
        return self.count, 1 if terminated else 0, terminated, truncated, {"count": self.count}


def counter(max_steps: int = 10, **kwargs) -> tuple[GymTextAdapter, CounterEnv]:
    inner = CounterEnv()
    env = GymTextAdapter(
        inner,
        actions=("inc", "dec"),
        max_steps=max_steps,
        train_starts=(0, 1),
        heldout_starts=(2,),
        to_env_action={"inc": 1, "dec": -1}.__getitem__,
        name="counter",
        **kwargs,
    )
    return env, inner


def test_adapter_turns_a_gym_style_env_into_a_text_env():
    env, inner = counter()
    assert isinstance(env, TextEnv)
    assert env.reset() == "0" and env.reset(1) == "1"
    first = env.step("inc")
    assert first == StepResult("2", 0.0, False, {"count": 2, "invalid": False, "truncated": False, "step": 1})
    last = env.step("inc")
    assert (last.observation, last.reward, last.done) == ("3", 1.0, True)
    assert isinstance(last.reward, float) and inner.steps_seen == [1, 1]
    with pytest.raises(EnvError, match="episode is over"):
        env.step("inc")


def test_adapter_invalid_actions_never_reach_the_wrapped_env():
    env, inner = counter()
    env.reset(2)
    result = env.step("add one")
    assert result == StepResult("2", 0.0, False, {"invalid": True, "truncated": False, "step": 1})
    assert inner.steps_seen == []


def test_adapter_ends_on_max_steps_or_the_wrapped_envs_truncation():
    env, _ = counter(max_steps=3)
    env.reset(0)
    results = play(env, ["inc", "dec", "inc"])
    assert [r.done for r in results] == [False, False, True] and results[-1].info["truncated"] is True
    env, _ = counter(max_steps=10)
    env.reset(0)
    results = play(env, ["dec", "dec", "dec"])  # the counter truncates itself at -3
    assert [r.done for r in results] == [False, False, True] and results[-1].info["truncated"] is True


def test_adapter_state_keys_follow_the_observation():
    env, _ = counter()
    env.reset(0)
    env.step("inc")
    at_one = env.state_key()
    env.reset(1)
    assert env.state_key() == at_one and at_one.startswith("counter:")
    env.step("inc")
    assert env.state_key() != at_one
    custom, _ = counter(state_key=lambda obs: f"count={obs}")
    custom.reset(1)
    assert custom.state_key() == "count=1"


def test_adapter_refuses_overlapping_starts_and_steps_before_reset():
    with pytest.raises(EnvError, match="both training and held-out"):
        GymTextAdapter(CounterEnv(), actions=("inc",), max_steps=5, train_starts=(0, 1), heldout_starts=(1,))
    env, _ = counter()
    with pytest.raises(EnvError, match="has not been reset"):
        env.step("inc")


def test_keydoor_key_reward_is_partial_credit_paid_once_and_checked():
    env = KeyDoor(key_reward=0.5)
    env.reset((3, 0))
    picked = env.step("down")
    assert picked.info["picked_key"] is True and picked.reward == 0.5 and not picked.done
    assert env.step("up").reward == 0.0  # paid once
    with pytest.raises(EnvError, match=r"key_reward must be a number in \[0, 1\)"):
        KeyDoor(key_reward=1.0)
    with pytest.raises(EnvError, match="key_reward"):
        KeyDoor(key_reward=True)
