"""Configuration of GRPO training: :class:`GRPOTrainConfig` (online, TRL's ``GRPOTrainer``
generating completions and scoring them with reward plugins) and
:class:`OfflineGRPOTrainConfig` (offline, on logged groups or GiGPO steps with precomputed
advantages, :mod:`agent_rl_plugin.train.offline`). Both extend
:class:`~agent_rl_plugin.train.config.LoRATrainConfig`; see its module doc for the shared
rules (help on every field, validation, hardware-profile fields left ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from agent_rl_plugin.train.config import LoRATrainConfig, TrainConfigError
from agent_rl_plugin.train.fields import option

LOSS_TYPES = ("grpo", "dapo", "dr_grpo", "bnpo")
SCALE_REWARDS = ("group", "batch", "none")
ADVANTAGE_LEVELS = ("episode", "step")
LOSS_NORMALIZATIONS = ("token", "sequence")


def _check_clip(config) -> None:
    if not config.epsilon > 0:
        raise TrainConfigError(f"epsilon must be > 0, got {config.epsilon}")
    if config.epsilon_high is not None and not config.epsilon_high > 0:
        raise TrainConfigError(f"epsilon_high must be > 0 or None, got {config.epsilon_high}")
    if not config.beta >= 0:
        raise TrainConfigError(f"beta must be >= 0 (0: no KL term), got {config.beta}")


@dataclass
class GRPOTrainConfig(LoRATrainConfig):
    """Online GRPO: TRL's ``GRPOTrainer`` samples ``num_generations`` completions per prompt and
    scores them with reward functions (reward plugins wrapped by
    :func:`agent_rl_plugin.train.reward_funcs.reward_functions`)."""

    num_generations: int = option(
        8, help="Completions sampled per prompt (one GRPO group); >= 2.", flag="--num-generations"
    )
    max_completion_length: int = option(
        64, help="Maximum new tokens per sampled completion.", flag="--max-completion-length"
    )
    temperature: float = option(1.0, help="Sampling temperature of the generations (> 0).", flag="--temperature")
    top_p: float = option(1.0, help="Nucleus sampling probability mass, in (0, 1].")
    beta: float = option(
        0.0,
        help="KL coefficient against the adapter-disabled base model (0: no KL term, no reference pass).",
        flag="--beta",
    )
    epsilon: float = option(0.2, help="Lower clipping range of the importance ratio (PPO epsilon).", flag="--epsilon")
    epsilon_high: Optional[float] = option(None, help="Upper clipping range (None: same as epsilon; DAPO uses 0.28).")
    loss_type: str = option(
        "dapo", help="TRL loss normalisation: 'grpo', 'dapo', 'dr_grpo' or 'bnpo'.", choices=LOSS_TYPES
    )
    scale_rewards: str = option(
        "group",
        help="Advantage scaling: 'group' (divide by the group's std), 'batch' or 'none'.",
        choices=SCALE_REWARDS,
    )
    num_iterations: int = option(1, help="Optimisation passes per generated batch (mu in the GRPO paper).")
    mask_truncated_completions: bool = option(
        False, help="Leave completions cut at max_completion_length out of the loss (TRL's default is False)."
    )
    reward_weights: Optional[list[float]] = option(None, help="Weight of each reward function, in order (None: all 1).")
    log_completions: bool = option(False, help="Log a sample of completions and rewards at each logging step.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if (
            isinstance(self.num_generations, bool)
            or not isinstance(self.num_generations, int)
            or self.num_generations < 2
        ):
            raise TrainConfigError(
                f"num_generations must be an integer >= 2 (a group needs several completions to compare), "
                f"got {self.num_generations!r}"
            )
        if self.max_completion_length < 1:
            raise TrainConfigError(f"max_completion_length must be >= 1, got {self.max_completion_length}")
        if not self.temperature > 0:
            raise TrainConfigError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise TrainConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        _check_clip(self)
        if self.num_iterations < 1:
            raise TrainConfigError(f"num_iterations must be >= 1, got {self.num_iterations}")
        if self.reward_weights is not None:
            self.reward_weights = [float(w) for w in self.reward_weights]
        if self.batch_size is not None and self.batch_size % self.num_generations:
            raise TrainConfigError(
                f"batch_size ({self.batch_size}) must be a multiple of num_generations ({self.num_generations}): "
                "TRL fills each batch with whole groups"
            )


@dataclass
class OfflineGRPOTrainConfig(LoRATrainConfig):
    """Offline GRPO / GiGPO on logged completions with precomputed advantages: a clipped
    policy-gradient loss (see :mod:`agent_rl_plugin.train.offline` and ``docs/training.md``)."""

    advantage_level: str = option(
        "episode",
        help="'episode': one advantage per logged completion (GRPO groups); 'step': one per LLM call (GiGPO).",
        flag="--level",
        choices=ADVANTAGE_LEVELS,
    )
    epsilon: float = option(
        0.2,
        help="Lower clipping range of the importance ratio (used when behaviour log-probs were logged).",
        flag="--epsilon",
    )
    epsilon_high: Optional[float] = option(None, help="Upper clipping range (None: same as epsilon).")
    beta: float = option(
        0.0, help="KL coefficient against the adapter-disabled base model (0: no KL term).", flag="--beta"
    )
    loss_normalization: str = option(
        "token",
        help="'token': mean over every trained token of the batch (DAPO); "
        "'sequence': mean per completion, then over completions (GRPO).",
        choices=LOSS_NORMALIZATIONS,
    )
    train_tool_tokens: bool = option(
        False,
        help="Also train on tool results and other non-assistant tokens of the completion "
        "(default False: they are masked out).",
    )
    use_behaviour_logprobs: bool = option(
        True,
        help="Use logged behaviour log-probs (old_logprobs) for the importance ratio when present "
        "and aligned with the tokens.",
    )
    measure_examples: int = option(
        256,
        help="After training, measure the mean token log-prob of up to this many positive- and negative-advantage "
        "examples under the base and the trained adapter (TrainResult.extra['logprobs']); 0: skip.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if (
            isinstance(self.measure_examples, bool)
            or not isinstance(self.measure_examples, int)
            or self.measure_examples < 0
        ):
            raise TrainConfigError(f"measure_examples must be an integer >= 0, got {self.measure_examples!r}")
        _check_clip(self)


__all__ = ["GRPOTrainConfig", "OfflineGRPOTrainConfig"]
