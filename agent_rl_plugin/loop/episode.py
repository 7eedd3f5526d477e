"""One episode of a text environment played by a policy, and the agent a loop runs.

The agent is ordinary user-shaped code: it reads the observation, asks the policy (called like
any LLM: messages in, one answer out, constrained to the environment's action words), steps the
environment, and records each call with :func:`agent_rl_plugin.record_llm_call` (the state key
for GiGPO, the behaviour log-probs and token ids for the importance ratio, the policy version).
At the end it emits the episode's return as the reward :data:`REWARD_NAME`.

A policy here is anything with ``generate(messages, *, choices, temperature, greedy)``
returning an object with ``text``, ``token_ids``, ``logprobs`` and ``version``:
:class:`~agent_rl_plugin.policy.LocalPolicy` in this process, or
:class:`~agent_rl_plugin.policy.client.PolicyClient` for a policy server (local or vLLM).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from agent_rl_plugin.envs import TextEnv
from agent_rl_plugin.instrumentation import emit_reward, record_llm_call

__all__ = ["REWARD_NAME", "EpisodeResult", "Policy", "env_agent", "play_episode", "start_of"]

#: The reward the loop's agent emits: the episode's return (1.0 when the goal was reached).
REWARD_NAME = "env_return"


class Policy(Protocol):
    def generate(
        self, messages: Any, *, choices: Any = None, temperature: float = 1.0, greedy: bool = False
    ) -> Any: ...


@dataclass(frozen=True)
class EpisodeResult:
    """How an episode went: the summed reward, whether it ``succeeded`` (it ended by reaching its
    goal: not truncated, and ``info["success"]`` when the environment says, else the last step's
    reward > 0, so falling into a hole is not a win), the steps taken, and how many actions were
    not legal words."""

    total_reward: float
    succeeded: bool
    steps: int
    invalid_actions: int


def play_episode(
    env: TextEnv,
    start: Hashable,
    policy: Policy,
    *,
    greedy: bool = False,
    temperature: float = 1.0,
    record: bool = False,
    model_name: str = "policy",
) -> EpisodeResult:
    """Play ``env`` from ``start`` with ``policy`` choosing among ``env.actions`` each step;
    with ``record`` every policy call becomes an LLM-call span of the current rollout."""
    observation = env.reset(start)
    total, steps, invalid = 0.0, 0, 0
    while True:
        messages = [{"role": "user", "content": observation}]
        key = env.state_key()
        started = time.perf_counter()
        answer = policy.generate(messages, choices=list(env.actions), temperature=temperature, greedy=greedy)
        if record:
            record_llm_call(
                model_name,
                messages,
                answer.text,
                duration_s=time.perf_counter() - started,
                output_tokens=len(answer.token_ids),
                state_key=key,
                logprobs=answer.logprobs,
                token_ids=answer.token_ids,
                policy_version=answer.version,
            )
        result = env.step(answer.text)
        total += result.reward
        steps += 1
        invalid += bool(result.info.get("invalid"))
        observation = result.observation
        if result.done:
            won = not result.info.get("truncated", False) and bool(result.info.get("success", result.reward > 0))
            return EpisodeResult(total, won, steps, invalid)


def start_of(task: dict[str, Any]) -> Hashable:
    """The start state a loop task names (``metadata["start"]``; lists become tuples)."""
    start = task["metadata"]["start"]
    return tuple(start) if isinstance(start, list) else start


def env_agent(
    make_env: Callable[[], TextEnv], policy: Policy, *, temperature: float = 1.0, model_name: str = "policy"
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The agent :func:`~agent_rl_plugin.rollouts.run_rollouts` runs: plays one recorded
    episode from the task's start, emits :data:`REWARD_NAME`, returns the episode's summary."""

    def agent(task: dict[str, Any]) -> dict[str, Any]:
        result = play_episode(
            make_env(), start_of(task), policy, temperature=temperature, record=True, model_name=model_name
        )
        emit_reward(result.total_reward, name=REWARD_NAME)
        return {"succeeded": result.succeeded, "steps": result.steps, "invalid_actions": result.invalid_actions}

    return agent
