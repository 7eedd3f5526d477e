"""Tiny, deterministic text environments an LLM policy can be trained on.

Every environment here follows :class:`TextEnv`: ``reset(start)`` returns the first observation
(text), ``step(action)`` takes an action word and returns a :class:`StepResult`, ``state_key()``
names the current state (for GiGPO's step groups), and ``train_starts`` / ``heldout_starts`` are
disjoint start states for training and evaluation. An action that is not one of ``actions`` is a
legal no-op step flagged ``info["invalid"] = True``, never an exception.

* :class:`GridWorld`: a 4x4 grid, reach the goal corner within 8 steps (sparse reward).
* :class:`KeyDoor`: a 5x5 room with a wall; fetch the key, then reach the door within 16 steps.
* :class:`GymTextAdapter`: wraps a gymnasium-style text environment in the same protocol.

This layer imports only core modules, so an agent can use an environment without loading
anything else of the package.
"""

from __future__ import annotations

from agent_rl_plugin.envs.base import EnvError, StepResult, TextEnv
from agent_rl_plugin.envs.grid import GridWorld, KeyDoor
from agent_rl_plugin.envs.gym_adapter import GymTextAdapter

__all__ = ["EnvError", "GridWorld", "GymTextAdapter", "KeyDoor", "StepResult", "TextEnv"]
