"""The protocol every text environment follows, its step result and its error."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agent_rl_plugin.errors import AgentRLError

__all__ = ["EnvError", "StepResult", "TextEnv"]


class EnvError(AgentRLError, ValueError):
    """An environment was used wrongly: an unknown start state, or a step after the episode ended."""


@dataclass(frozen=True)
class StepResult:
    """What one step returns.

    ``observation`` is the text the policy sees next; ``reward`` the reward of this step;
    ``done`` whether the episode is over (goal reached, or ``max_steps`` steps taken);
    ``info`` details: always ``"invalid"`` (the action was not one of ``actions``),
    ``"truncated"`` (the episode ended on ``max_steps`` without success) and ``"step"``
    (steps taken so far, this one included), plus whatever the environment adds.
    """

    observation: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class TextEnv(Protocol):
    """A text-in, text-out environment.

    * ``reset(start=None)`` starts an episode from ``start`` (one of ``train_starts`` or
      ``heldout_starts``, or any state the environment accepts; ``None``: the first training
      start) and returns the first observation.
    * ``step(action)`` applies one action word. A word not in ``actions`` is a legal no-op step:
      the state stays, the step counts, ``info["invalid"]`` is ``True``. Stepping after ``done``
      raises :class:`EnvError`.
    * ``state_key()`` is a stable id of the current state: equal states give equal keys across
      episodes and processes, different states different keys (GiGPO groups steps by it).
    * ``actions`` are the legal action words; ``max_steps`` the step budget of an episode;
      ``train_starts`` and ``heldout_starts`` disjoint start states.
    """

    @property
    def actions(self) -> tuple[str, ...]: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def train_starts(self) -> tuple[Hashable, ...]: ...

    @property
    def heldout_starts(self) -> tuple[Hashable, ...]: ...

    def reset(self, start: Hashable | None = None) -> str: ...

    def step(self, action: str) -> StepResult: ...

    def state_key(self) -> str: ...
