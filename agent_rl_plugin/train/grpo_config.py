"""Configuration of GRPO training: :class:`GRPOTrainConfig` (online, TRL's ``GRPOTrainer``
generating completions and scoring them with reward plugins) and
:class:`OfflineGRPOTrainConfig` (offline, on logged groups or GiGPO steps with precomputed
advantages, :mod:`agent_rl_plugin.train.offline`). Both extend
:class:`~agent_rl_plugin.train.config.LoRATrainConfig`; see its module doc for the shared
rules (help on every field, validation, hardware-profile fields left ``None``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from agent_rl_plugin.train.config import LoRATrainConfig, TrainConfigError
from agent_rl_plugin.train.fields import option
from agent_rl_plugin.train.stored_tokens import TOKEN_IDS_MODES

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
    token_ids: str = option(
        "auto",
        help="'auto': train rows that carry stored token ids (completion_token_ids, prompt_token_ids) on exactly "
        "those ids, re-tokenising the text only when they are absent or invalid; 'ignore': always re-tokenise.",
        flag="--token-ids",
        choices=TOKEN_IDS_MODES,
    )
    measure_examples: int = option(
        256,
        help="After training, measure the mean token log-prob of up to this many positive- and negative-advantage "
        "examples under the base and the trained adapter (TrainResult.extra['logprobs']); 0: skip.",
    )
    choices: Optional[list[str]] = option(
        None,
        help="A closed answer set (e.g. ['up', 'down', 'left', 'right']): each completion must be one choice, "
        "log-probs are renormalised over the tokens allowed at each position and forced tokens are not trained "
        "(None: the full vocabulary).",
    )
    entropy_coef: float = option(
        0.0,
        help="Entropy bonus: subtract this times the mean entropy of the trained tokens from the loss (over the "
        "allowed tokens with choices, else the full vocabulary); 0: no bonus.",
    )
    target_kl: Optional[float] = option(
        None,
        help="Stop training after an optimizer step whose mean approximate KL between the behaviour log-probs and "
        "the policy exceeds this (needs logged behaviour log-probs; None: never stop early).",
    )
    dual_clip: Optional[float] = option(
        3.0,
        help="Dual-clip constant c (> 1) for negative advantages: a token's policy-gradient term is at most "
        "-c * A however far the policy has moved from the behaviour log-probs (None: plain PPO clipping).",
    )
    skip_zero_advantage: bool = option(
        True,
        help="Leave completions with advantage exactly 0 out of the examples, so epochs count passes over rows "
        "that carry a learning signal.",
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
        _check_controls(self)


def _check_choices(config: OfflineGRPOTrainConfig) -> None:
    choices = config.choices
    if choices is None:
        return
    if isinstance(choices, str) or not isinstance(choices, (list, tuple)):
        raise TrainConfigError(
            f"choices must be a list of strings, got {choices!r}", hint='e.g. ["up", "down", "left", "right"]'
        )
    config.choices = list(choices)
    if len(choices) < 2 or any(not isinstance(c, str) or not c.strip() for c in choices):
        raise TrainConfigError(
            f"choices must hold at least two non-empty strings, got {list(choices)!r}",
            hint="with one choice every token is forced and nothing is trained; leave choices unset for free text",
        )
    if len(set(choices)) != len(choices):
        raise TrainConfigError(f"choices must be distinct, got {list(choices)!r}")
    if config.train_tool_tokens:
        raise TrainConfigError(
            "choices and train_tool_tokens cannot be combined: with a choice set only the answer is trained",
            hint="set train_tool_tokens=False",
        )


def _check_controls(config: OfflineGRPOTrainConfig) -> None:
    _check_choices(config)
    coef = config.entropy_coef
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not 0 <= coef < math.inf:
        raise TrainConfigError(f"entropy_coef must be a finite number >= 0 (0: no entropy bonus), got {coef!r}")
    config.entropy_coef = float(coef)
    target = config.target_kl
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < math.inf:
            raise TrainConfigError(
                f"target_kl must be a finite number > 0 or None, got {target!r}",
                hint="typical values are 0.01-0.1; None never stops early",
            )
        config.target_kl = float(target)
    dual = config.dual_clip
    if dual is not None:
        if isinstance(dual, bool) or not isinstance(dual, (int, float)) or not 1 < dual < math.inf:
            raise TrainConfigError(
                f"dual_clip must be a finite number > 1 or None, got {dual!r}",
                hint="the usual value is 3.0; None turns dual clipping off",
            )
        config.dual_clip = float(dual)
    if not isinstance(config.skip_zero_advantage, bool):
        raise TrainConfigError(f"skip_zero_advantage must be true or false, got {config.skip_zero_advantage!r}")


__all__ = ["GRPOTrainConfig", "OfflineGRPOTrainConfig"]
