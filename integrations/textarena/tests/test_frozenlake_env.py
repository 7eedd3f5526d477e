"""TextArena's FrozenLake, wrapped by GymTextAdapter over TextArenaGym, follows the TextEnv
protocol: board text observations, the four action words, invalid words flagged and never
played, done at the goal or in a hole, max_steps truncation, seeded determinism, state keys
equal exactly for equal states, disjoint training and held-out lakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_rl_textarena import (
    ACTIONS,
    DEFAULT_HELDOUT_STARTS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TRAIN_STARTS,
    make_frozenlake,
    optimal_actions,
    shortest_path,
)

from agent_rl_plugin.envs import EnvError, GymTextAdapter, StepResult, TextEnv


def game_state(env: GymTextAdapter) -> dict:
    return env.env.env.state.game_state  # adapter -> TextArenaGym -> TextArena's FrozenLakeEnv


def into_hole(state: dict) -> tuple[str, ...]:
    """The shortest path from the player into the nearest hole (the hole taken as the goal)."""
    holes = [(r, c) for r, row in enumerate(state["grid"]) for c, cell in enumerate(row) if cell == "H"]
    paths = []
    for hole in holes:
        grid = [[" " if (r, c) == hole else cell for c, cell in enumerate(row)] for r, row in enumerate(state["grid"])]
        paths.append(shortest_path({"grid": grid, "player_pos": state["player_pos"], "goal_pos": hole}))
    return min(paths, key=len)


def test_frozenlake_is_a_text_env_with_board_observations():
    env = make_frozenlake()
    assert isinstance(env, TextEnv)
    assert env.actions == ACTIONS == ("up", "down", "left", "right")
    assert env.max_steps == DEFAULT_MAX_STEPS
    first = env.reset()
    assert first == env.reset(env.train_starts[0])
    assert first.startswith("Current Board:") and first.count("P") == 1 and first.count("H") == 3
    assert "|  P  |" in first.splitlines()[3]  # the top-left cell: the start
    assert "Welcome to Frozen Lake" in env.env.prompt  # the instructions are kept out of the board


def test_starts_are_disjoint_different_lakes_each_solvable_in_time():
    env = make_frozenlake()
    assert env.train_starts == DEFAULT_TRAIN_STARTS and env.heldout_starts == DEFAULT_HELDOUT_STARTS
    assert not set(env.train_starts) & set(env.heldout_starts)
    train = {env.reset(s) for s in env.train_starts}
    heldout = {env.reset(s) for s in env.heldout_starts}
    assert len(train) == 10 and len(heldout) == 5 and not train & heldout  # no held-out lake is trained on
    for start in env.train_starts + env.heldout_starts:
        assert len(optimal_actions(start)) == 6 <= env.max_steps  # corner to corner, no detour
    with pytest.raises(EnvError, match="both training and held-out"):
        make_frozenlake(heldout_starts=(3,))


@pytest.mark.parametrize("start", DEFAULT_TRAIN_STARTS[:3] + DEFAULT_HELDOUT_STARTS[:2])
def test_the_shortest_path_reaches_the_goal_and_ends_the_episode(start):
    env = make_frozenlake()
    env.reset(start)
    path = optimal_actions(start)
    results = [env.step(word) for word in path]
    assert [r.done for r in results] == [False] * (len(path) - 1) + [True]
    assert [r.reward for r in results] == [0.0] * (len(path) - 1) + [1.0]
    last = results[-1]
    assert "P/G" in last.observation and last.info["reason"] == "Congratulations! You reached the goal!"
    assert last.info["textarena_reward"] == 1.0 and last.info["success"] is True and last.info["truncated"] is False
    with pytest.raises(EnvError, match="episode is over"):
        env.step("up")


@pytest.mark.parametrize("reward, expected", [("win", 0.0), ("textarena", None)])
def test_a_hole_ends_the_episode(reward, expected):
    env = make_frozenlake(reward=reward)
    env.reset(4)
    path = into_hole(game_state(env))
    results = [env.step(word) for word in path]
    assert [r.done for r in results] == [False] * (len(path) - 1) + [True]
    last = results[-1]
    assert last.info["reason"].startswith("You fell into a hole!")
    assert 0.0 < last.info["textarena_reward"] < 1.0  # TextArena's partial credit for the progress
    assert last.info["success"] is False and last.info["truncated"] is False  # lost, not out of steps
    assert last.reward == (last.info["textarena_reward"] if expected is None else expected)


def test_a_word_that_is_not_an_action_is_flagged_and_never_played():
    env = make_frozenlake()
    board = env.reset(0)
    game = env.env.env
    logged = list(game.state.logs)
    result = env.step("jump")
    assert result == StepResult(board, 0.0, False, {"invalid": True, "truncated": False, "step": 1})
    assert game.state.turn == 0 and game.state.logs == logged  # TextArena never saw it
    assert env.step(" down\n").info["invalid"] is False and game.state.turn == 1  # spaces are ignored


def test_two_moves_in_a_row_into_the_edge_end_the_game_as_textarena_rules():
    env = make_frozenlake()
    board = env.reset(0)
    warned = env.step("up")
    assert not warned.done and warned.info["invalid"] is False  # a legal word: TextArena judged it
    assert warned.observation.startswith(board) and "hit a wall" in warned.observation
    moved = env.step("down")  # a valid move clears the warning
    assert "invalid move" not in moved.observation and not moved.done
    env.step("left")
    last = env.step("left")
    assert last.done and last.reward == 0.0 and last.info["invalid_move"] is True
    assert last.info["reason"].startswith("Invalid Move:")


def test_max_steps_truncates():
    env = make_frozenlake(max_steps=4)
    env.reset(0)  # (1, 0) is ice on lake 0: down and up forever is safe
    results = [env.step(w) for w in ("down", "up", "down", "up")]
    assert [r.done for r in results] == [False, False, False, True]
    assert results[-1].info["truncated"] is True and results[-1].reward == 0.0


def trajectory(env: GymTextAdapter, start: int, words: list[str]) -> list:
    env.reset(start)
    keys = [env.state_key()]
    out = []
    for word in words:
        r = env.step(word)
        out.append((r.observation, r.reward, r.done, r.info))
        keys.append(env.state_key())
    return out + keys


WORDS = ["down", "right", "up", "up", "left", "down", "down", "down"]


def test_a_seed_gives_the_same_lake_and_the_same_episode():
    assert trajectory(make_frozenlake(), 7, WORDS) == trajectory(make_frozenlake(), 7, WORDS)
    env = make_frozenlake()
    boards = {env.reset(s) for s in range(8)}
    assert len(boards) == 8  # and different seeds, different lakes


def test_state_keys_are_equal_exactly_for_equal_states():
    env = make_frozenlake()
    env.reset(0)
    start_key = env.state_key()
    assert start_key.startswith("frozenlake:")
    env.step("down")
    below = env.state_key()
    env.step("right")
    via_down = env.state_key()
    env.reset(0)
    assert env.state_key() == start_key  # the same state in a new episode
    env.step("right")
    right_of = env.state_key()
    env.step("down")
    assert env.state_key() == via_down  # (1, 1) reached by another path
    assert len({start_key, below, right_of, via_down}) == 4  # four cells, four keys
    env.reset(1)
    assert env.state_key() != start_key  # same cell, another lake
    env.reset(0)
    env.step("up")  # the start with TextArena's pending warning: a different state
    assert env.state_key() != start_key


def test_state_keys_are_stable_across_processes():
    script = (
        "import json; from agent_rl_textarena import make_frozenlake\n"
        "env = make_frozenlake(); env.reset(0); keys = [env.state_key()]\n"
        "for w in ['down', 'right', 'down']: env.step(w); keys.append(env.state_key())\n"
        "print(json.dumps(keys))"
    )
    env = make_frozenlake()
    env.reset(0)
    keys = [env.state_key()]
    for word in ["down", "right", "down"]:
        env.step(word)
        keys.append(env.state_key())
    environ = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
        cwd=Path(__file__).parent,
    )
    assert json.loads(out.stdout) == keys


def test_other_frozenlake_sizes_via_env_id():
    env = make_frozenlake(env_id="FrozenLake-v0-hardcore-raw", max_steps=20, train_starts=(0,), heldout_starts=(1,))
    board = env.reset(0)
    assert board.count("H") == 6 and len([line for line in board.splitlines() if line.startswith("|")]) == 5
    results = [env.step(w) for w in optimal_actions(0, env_id="FrozenLake-v0-hardcore-raw")]
    assert results[-1].done and results[-1].reward == 1.0


def test_an_unknown_env_id_is_a_clear_error():
    with pytest.raises(EnvError, match="no environment 'FrozenLake-v9'") as caught:
        make_frozenlake(env_id="FrozenLake-v9")
    assert caught.value.hint
