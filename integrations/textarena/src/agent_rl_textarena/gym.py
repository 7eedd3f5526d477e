"""A gymnasium-style view of a single-player TextArena environment.

TextArena's environments speak a multi-player protocol: ``reset(num_players, seed)`` returns
nothing, ``get_observation()`` drains ``(player_id, [(from_id, text, ObservationType), ...])``,
``step(action)`` returns ``(done, info)`` and the rewards come only from ``close()`` when the game
is over. :class:`TextArenaGym` turns one into what
:class:`~agent_rl_plugin.envs.GymTextAdapter` wraps: ``reset(seed=...) -> (observation, info)``
and ``step(action) -> (observation, reward, terminated, truncated, info)``.

This module never imports textarena: it drives the object it is given (duck typing), so
importing it, or the package's entry point, stays cheap.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from agent_rl_plugin.envs import EnvError

__all__ = ["RewardMode", "TextArenaGym"]

#: ``"win"``: 1.0 when TextArena's final reward is at least 1.0 (the game was won), else 0.0.
#: ``"textarena"``: TextArena's final reward as is (FrozenLake gives partial credit for progress).
RewardMode = Literal["win", "textarena"]

_BOARD = "GAME_BOARD"
_PROMPT = "PROMPT"
_WARNING = "GAME_ADMIN"
_ACTION = "PLAYER_ACTION"


def _kind(message: tuple[Any, ...]) -> str:
    """The name of a message's ``ObservationType`` (``"GAME_BOARD"``...), without importing textarena."""
    kind = message[2] if len(message) > 2 else None
    return str(getattr(kind, "name", kind))


class TextArenaGym:
    """A single-player TextArena environment with the gymnasium ``reset``/``step`` signatures.

    * ``reset(seed=None)`` calls ``env.reset(num_players=1, seed=seed)`` and returns
      ``(observation, {"prompt": the game's instructions})``. The same seed gives the same game.
    * ``step(action)`` sends ``action_format.format(action)`` (TextArena's games parse
      ``"[up]"``-style actions) and returns ``(observation, reward, terminated, False, info)``:
      ``terminated`` is TextArena's ``done``; ``reward`` is 0.0 until then, and on the last step
      follows ``reward`` (:data:`RewardMode`). ``info`` holds ``messages`` (the game's other
      texts of this step: moves, warnings, the outcome) and, on the last step,
      ``textarena_reward`` (the raw final reward), ``success`` (it is at least 1.0: the game was
      won; a game also ends lost, e.g. in a hole), ``reason`` and ``invalid_move`` (from
      ``close()``'s game info).
    * The observation is the game's latest board (a ``GAME_BOARD`` message) followed by this
      step's warnings (``GAME_ADMIN``: TextArena's "invalid move" notice, which it counts: a
      second invalid move in a row ends the game), so equal boards without a pending warning
      are equal observations whatever the path to them. A game that sends no board is seen
      through all its messages of the step but the echo of the action.

    TextArena seeds the global :mod:`random` module in ``reset``; here the game draws from a
    random state of its own, swapped in around each ``reset``/``step``, so the caller's
    ``random`` stream is left as it was.
    """

    def __init__(self, env: Any, *, reward: RewardMode = "win", action_format: str = "[{}]") -> None:
        if reward not in ("win", "textarena"):
            raise EnvError(f"unknown reward mode {reward!r}", "use reward='win' or reward='textarena'")
        if "{}" not in action_format:
            raise EnvError(f"action_format {action_format!r} has no '{{}}' for the action word", "e.g. '[{}]'")
        self.env = env
        self.reward_mode: RewardMode = reward
        self.action_format = action_format
        self.prompt = ""
        self._rng_state: Any = None
        self._done = True

    @contextmanager
    def _own_random(self) -> Iterator[None]:
        caller = random.getstate()
        if self._rng_state is None:
            self._rng_state = random.Random().getstate()  # seeded from the OS: a seedless first reset
        random.setstate(self._rng_state)
        try:
            yield
        finally:
            self._rng_state = random.getstate()
            random.setstate(caller)

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start a game (``seed``: which one; ``None`` continues the game's own random stream)."""
        with self._own_random():
            self.env.reset(num_players=1, seed=seed)
        _player, messages = self.env.get_observation()
        self.prompt = "\n\n".join(m[1] for m in messages if _kind(m) == _PROMPT)
        self._done = False
        return self._observation(messages), {"prompt": self.prompt}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play ``action`` (an action word); see the class docstring for what comes back."""
        if self._done:
            raise EnvError("the TextArena game is over or was never started", "call reset() first")
        with self._own_random():
            done, step_info = self.env.step(action=self.action_format.format(action))
        _player, messages = self.env.get_observation()
        info: dict[str, Any] = dict(step_info or {})
        info["messages"] = [m[1] for m in messages if _kind(m) not in (_BOARD, _ACTION)]
        reward = 0.0
        if done:
            self._done = True
            rewards, game_info = self.env.close()
            raw = float((rewards or {}).get(0, 0.0))
            player = (game_info or {}).get(0, {})
            info.update(
                textarena_reward=raw,
                success=raw >= 1.0,
                reason=player.get("reason"),
                invalid_move=bool(player.get("invalid_move")),
            )
            reward = raw if self.reward_mode == "textarena" else (1.0 if raw >= 1.0 else 0.0)
        return self._observation(messages), reward, bool(done), False, info

    @staticmethod
    def _observation(messages: list[tuple[Any, ...]]) -> str:
        boards = [m[1] for m in messages if _kind(m) == _BOARD]
        if not boards:
            return "\n\n".join(m[1] for m in messages if _kind(m) not in (_ACTION, _PROMPT))
        warnings = [m[1] for m in messages if _kind(m) == _WARNING]
        return "\n\n".join([boards[-1], *warnings])
