"""Wrap a gymnasium-style text environment in the :class:`~agent_rl_plugin.envs.TextEnv` protocol.

Gymnasium is not a dependency: any object with ``reset(seed=...) -> (observation, info)`` and
``step(action) -> (observation, reward, terminated, truncated, info)`` works. Start states are
seeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import Any

from agent_rl_plugin.envs.base import EnvError, StepResult

__all__ = ["GymTextAdapter"]


class GymTextAdapter:
    """A gymnasium-style environment seen through the text protocol.

    ``actions`` are the legal action words; ``to_env_action`` maps a word to what the wrapped
    environment's ``step`` takes (default: the word itself). A word not in ``actions`` is a no-op
    step that the wrapped environment never sees. Observations pass through ``str``. The episode
    ends when the wrapped environment terminates or truncates, or after ``max_steps`` steps.
    ``state_key`` maps an observation to the state's id; by default a hash of the observation
    text, so equal observations are equal states. ``train_starts`` and ``heldout_starts`` are
    seeds for ``reset(seed=...)``; they must not overlap.
    """

    def __init__(
        self,
        env: Any,
        *,
        actions: tuple[str, ...],
        max_steps: int,
        train_starts: tuple[Hashable, ...] = (0,),
        heldout_starts: tuple[Hashable, ...] = (),
        to_env_action: Callable[[str], Any] | None = None,
        state_key: Callable[[str], str] | None = None,
        name: str = "gym",
    ) -> None:
        if not actions:
            raise EnvError("a text environment needs at least one action word", "pass actions=(...)")
        if max_steps < 1:
            raise EnvError(f"max_steps must be at least 1, got {max_steps}")
        if not train_starts:
            raise EnvError("a text environment needs at least one training start", "pass train_starts=(seed, ...)")
        shared = set(train_starts) & set(heldout_starts)
        if shared:
            raise EnvError(
                f"seeds {sorted(map(repr, shared))} are both training and held-out starts",
                "make train_starts and heldout_starts disjoint",
            )
        self.env = env
        self.actions = tuple(actions)
        self.max_steps = max_steps
        self.train_starts = tuple(train_starts)
        self.heldout_starts = tuple(heldout_starts)
        self.name = name
        self._to_env_action = to_env_action
        self._state_key = state_key
        self._observation = ""
        self._steps = 0
        self._done = True
        self._started = False

    def reset(self, start: Hashable | None = None) -> str:
        """Reset the wrapped environment with seed ``start`` (``None``: the first training start)."""
        seed = self.train_starts[0] if start is None else start
        observation, _info = self.env.reset(seed=seed)
        self._observation = str(observation)
        self._steps = 0
        self._done = False
        self._started = True
        return self._observation

    def step(self, action: str) -> StepResult:
        """Apply one action word; a word not in ``actions`` is a no-op flagged ``info["invalid"]``."""
        if not self._started:
            raise EnvError(f"the {self.name} environment has not been reset", "call reset() first")
        if self._done:
            raise EnvError(f"the {self.name} episode is over", "call reset() to start a new episode")
        self._steps += 1
        word = action.strip() if isinstance(action, str) else ""
        info: dict[str, Any]
        if word in self.actions:
            env_action = self._to_env_action(word) if self._to_env_action else word
            observation, reward, terminated, truncated, env_info = self.env.step(env_action)
            self._observation = str(observation)
            info = dict(env_info or {})
            reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
            invalid = False
        else:
            info, reward, terminated, truncated, invalid = {}, 0.0, False, False, True
        truncated = truncated or (not terminated and self._steps >= self.max_steps)
        self._done = terminated or truncated
        info.update(invalid=invalid, truncated=truncated, step=self._steps)
        return StepResult(self._observation, reward, self._done, info)

    def state_key(self) -> str:
        """The current state's id: ``state_key(observation)``, or a hash of the observation text."""
        if self._state_key is not None:
            return self._state_key(self._observation)
        digest = hashlib.sha256(self._observation.encode("utf-8")).hexdigest()[:16]
        return f"{self.name}:{digest}"
