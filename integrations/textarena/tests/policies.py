"""Scripted policies with the interface agent_rl_plugin.loop.episode.play_episode calls:
``generate(messages, *, choices, temperature, greedy)`` returning text, token ids, log-probs and
a version."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from agent_rl_textarena import optimal_actions


@dataclass(frozen=True)
class Answer:
    text: str
    token_ids: list[int]
    logprobs: list[float]
    version: str


@dataclass
class ScriptedPolicy:
    """Answers with ``script``'s words in order (then ``"stay"``); records every call."""

    script: list[str]
    version: str = "scripted-v1"
    calls: list[dict[str, Any]] = field(default_factory=list)

    def generate(self, messages: Any, *, choices: Any = None, temperature: float = 1.0, greedy: bool = False) -> Answer:
        self.calls.append({"messages": messages, "choices": choices, "temperature": temperature, "greedy": greedy})
        word = self.script[len(self.calls) - 1] if len(self.calls) <= len(self.script) else "stay"
        return Answer(word, [len(self.calls), 7], [-0.25, -0.5], self.version)


class OptimalPolicy(ScriptedPolicy):
    """Plays the shortest winning path of the lake seeded ``start``."""

    def __init__(self, start: int) -> None:
        super().__init__(list(optimal_actions(start)), version="optimal")


@dataclass
class RandomPolicy:
    """Picks uniformly among the offered choices plus ``extra`` (words that are not actions)."""

    seed: int
    extra: tuple[str, ...] = ()
    picks: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def generate(self, messages: Any, *, choices: Any = None, temperature: float = 1.0, greedy: bool = False) -> Answer:
        word = self.rng.choice([*choices, *self.extra])
        self.picks.append(word)
        return Answer(word, [1], [-1.0], "random")


def read_board(observation: str) -> dict[str, Any]:
    """TextArena's FrozenLake board text back into its state: the grid ("H", "G" or " "), the
    player's cell and the goal's."""
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in observation.splitlines()
        if line.startswith("|")
    ]
    grid: list[list[str]] = []
    player: tuple[int, int] | None = None
    goal: tuple[int, int] | None = None
    for r, row in enumerate(rows):
        grid.append([])
        for c, cell in enumerate(row):
            player = (r, c) if "P" in cell else player
            goal = (r, c) if "G" in cell else goal
            grid[-1].append("H" if cell == "H" else "G" if "G" in cell else " ")
    return {"grid": grid, "player_pos": player, "goal_pos": goal}


class BoardReadingPolicy(ScriptedPolicy):
    """Reads the board in the observation it is sent and answers the first move of a shortest
    safe path: the observation alone is enough to play perfectly."""

    def __init__(self) -> None:
        super().__init__([], version="board-reader")

    def generate(self, messages: Any, *, choices: Any = None, temperature: float = 1.0, greedy: bool = False) -> Answer:
        from agent_rl_textarena import shortest_path

        self.calls.append({"messages": messages, "choices": choices, "temperature": temperature, "greedy": greedy})
        return Answer(shortest_path(read_board(messages[-1]["content"]))[0], [1], [-0.1], self.version)
