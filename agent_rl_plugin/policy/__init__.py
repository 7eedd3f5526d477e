"""Policies an agent calls like any LLM while a loop trains them:

* :class:`LocalPolicy`: transformers + PEFT in this process; token ids, behaviour log-probs,
  answers constrained to a choice set, adapters swapped without a restart;
* :class:`PolicyServer`: the same policy behind an OpenAI-compatible chat-completions endpoint
  on 127.0.0.1 (``agent-rl policy serve``), speaking vLLM's extensions (choice constraint,
  token ids, runtime LoRA loading), so agent code runs unchanged against vLLM on a GPU;
* :class:`PolicyClient`: a small client for either, returning :class:`Generation` like
  ``LocalPolicy.generate``; :class:`RemotePolicy` wraps it so a training loop's agent calls its
  policy over HTTP (``train_loop(config, policy=RemotePolicy(PolicyClient(url)))``).
"""

from agent_rl_plugin.policy.client import PolicyClient, PolicyClientError, RemotePolicy
from agent_rl_plugin.policy.local import Generation, LocalPolicy, PolicyError
from agent_rl_plugin.policy.server import PolicyServer, PolicyServerConfigError

__all__ = [
    "Generation",
    "LocalPolicy",
    "PolicyClient",
    "PolicyClientError",
    "PolicyError",
    "PolicyServer",
    "PolicyServerConfigError",
    "RemotePolicy",
]
