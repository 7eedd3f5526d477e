"""TextArena's FrozenLake as an agent-rl-plugin text environment, and its solver.

FrozenLake-v0 is a 4x4 frozen lake: the player starts at the top-left corner, the goal is the
bottom-right one, and three holes are placed at random (the seed picks them; the generator
keeps only lakes with a safe path). A move into a hole ends the game; so does a second move in a
row into the lake's edge (TextArena counts it as an invalid move and warns after the first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import Any

from agent_rl_plugin.envs import EnvError, GymTextAdapter
from agent_rl_textarena.gym import RewardMode, TextArenaGym

__all__ = [
    "ACTIONS",
    "DEFAULT_HELDOUT_STARTS",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TRAIN_STARTS",
    "make_frozenlake",
    "optimal_actions",
    "shortest_path",
]

#: The action words, in TextArena's order; each is sent as ``"[word]"``.
ACTIONS: tuple[str, ...] = ("up", "down", "left", "right")
_MOVES: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}

#: Seeds of the training lakes and of the held-out ones: ten and five different lakes, no held-out
#: lake among the training ones (seed 101 is skipped: it draws the same holes as a training seed).
DEFAULT_TRAIN_STARTS: tuple[int, ...] = tuple(range(10))
DEFAULT_HELDOUT_STARTS: tuple[int, ...] = (100, 102, 103, 104, 105)
#: The step budget: every default lake is solvable in 6 moves; twice that leaves room to err.
DEFAULT_MAX_STEPS = 12


def make_frozenlake(
    *,
    env_id: str = "FrozenLake-v0-raw",
    max_steps: int = DEFAULT_MAX_STEPS,
    train_starts: tuple[Hashable, ...] = DEFAULT_TRAIN_STARTS,
    heldout_starts: tuple[Hashable, ...] = DEFAULT_HELDOUT_STARTS,
    reward: RewardMode = "win",
    name: str = "frozenlake",
) -> GymTextAdapter:
    """A :class:`~agent_rl_plugin.envs.TextEnv` playing TextArena's ``env_id`` (a FrozenLake).

    Starts are seeds; ``actions`` are :data:`ACTIONS`; ``state_key()`` is ``"frozenlake:"``
    and a hash of the observation (the board, plus TextArena's pending warning if any), so
    equal lakes with the player on the same cell give equal keys. ``reward="win"`` (default):
    1.0 on reaching the goal, else 0.0; ``"textarena"``: TextArena's own final reward (partial
    credit for progress, even when falling into a hole). Raises :class:`EnvError` for an
    ``env_id`` TextArena does not know. Use a ``-raw`` id: the default TextArena wrappers turn
    observations into chat history and would reformat the actions a second time.
    """
    import textarena as ta  # only here: importing this module stays cheap

    try:
        game = ta.make(env_id)
    except ValueError as error:
        raise EnvError(f"TextArena has no environment {env_id!r}", "e.g. 'FrozenLake-v0-raw'") from error
    return GymTextAdapter(
        TextArenaGym(game, reward=reward),
        actions=ACTIONS,
        max_steps=max_steps,
        train_starts=train_starts,
        heldout_starts=heldout_starts,
        name=name,
    )


def shortest_path(game_state: Mapping[str, Any]) -> tuple[str, ...]:
    """A shortest hole-free action sequence from ``game_state["player_pos"]`` to
    ``game_state["goal_pos"]`` on ``game_state["grid"]`` (TextArena's FrozenLake state; ``"H"``
    marks holes). Breadth-first, trying :data:`ACTIONS` in order. Raises :class:`EnvError` when
    the goal cannot be reached."""
    grid = game_state["grid"]
    start, goal = tuple(game_state["player_pos"]), tuple(game_state["goal_pos"])
    size = len(grid)
    paths: dict[tuple[int, ...], tuple[str, ...]] = {start: ()}
    queue: deque[tuple[int, ...]] = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            return paths[cell]
        for word in ACTIONS:
            dr, dc = _MOVES[word]
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < size and 0 <= nxt[1] < size and grid[nxt[0]][nxt[1]] != "H" and nxt not in paths:
                paths[nxt] = (*paths[cell], word)
                queue.append(nxt)
    raise EnvError(f"no safe path from {start} to {goal}", "this lake cannot be solved")


def optimal_actions(start: int, *, env_id: str = "FrozenLake-v0-raw") -> tuple[str, ...]:
    """A shortest winning action sequence of the lake seeded ``start`` (played on a fresh
    TextArena environment, so no adapter's episode is disturbed)."""
    import textarena as ta

    game = ta.make(env_id)
    TextArenaGym(game).reset(seed=start)
    return shortest_path(game.state.game_state)
