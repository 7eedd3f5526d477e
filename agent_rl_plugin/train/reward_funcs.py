"""Reward plugins as TRL reward functions, for online GRPO (:func:`~agent_rl_plugin.train.train_grpo`).

:func:`reward_functions` turns reward plugin names (resolved like ``agent-rl score`` resolves
them), :class:`~agent_rl_plugin.rewards.RewardPlugin` objects and plain TRL reward callables into
functions with TRL's signature::

    f(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]

Contract of a function made from a plugin (a :class:`PluginRewardFunction`):

* ``__name__`` is the plugin's name, so TRL logs ``rewards/<name>/mean``; ``reward_weight`` is
  its weight (see :func:`reward_functions`); ``stats`` counts what happened.
* Each completion becomes an in-memory :class:`~agent_rl_plugin.rewards.Rollout`
  (:func:`completion_rollouts`): the prompt messages, the completion as the assistant message and
  the ``final_output``, ``ground_truth`` from the dataset's ``ground_truth`` column (JSON text is
  parsed, as the store does), ``task_id`` from the ``task_id`` column, other JSON-able columns in
  ``metadata``, and **one** ``llm`` step (input: the prompt messages, output: the completion,
  ``output_tokens``: the completion's token count). A single-turn completion has no tool calls,
  no events, no human label and no emitted rewards: plugins that score stored steps
  (``tool_success``, ``coordination``...) see only what that gives (usually "not applicable").
  ``prepare()`` is not called: prepare plugins that need it (``learned_reward``) yourself.
* Pointwise plugins are called once per completion; batch plugins once per group (the
  completions of one prompt, which TRL places next to each other), through the scoring engine's
  :func:`~agent_rl_plugin.rewards.workers.evaluate`, so results are coerced exactly as
  ``agent-rl score`` coerces them (number, dict or ``EvaluateResult``; the episode ``score`` is
  used, step rewards are ignored).
* A plugin that raises, returns an invalid value (NaN, a string...), declines (``None``) or
  returns only step rewards gives ``None`` for that completion: TRL treats it as missing (a
  completion for which every function gives ``None`` gets no advantage). Each kind of failure is
  logged once per function (logger ``agent_rl_plugin.train.reward_funcs``), never raised, and
  when TRL passes ``log_metric`` the share of failed completions is logged as
  ``rewards/<name>/failed``.
* **Timeout**: the plugin runs in one daemon thread per call; each unit (completion or group)
  has ``timeout_s`` seconds from the end of the previous one. When a unit runs past it, that
  unit and the ones after it in the call get ``None``. Python cannot kill a thread: the stuck
  call keeps running in the background, and until it returns the plugin is not called again
  (its completions get ``None`` at once), so a hang costs one thread, not one per step. Use
  ``agent-rl score`` (worker processes that are killed) to find plugins that hang.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import threading
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.rollout import Rollout, Step, parse_json, text_of
from agent_rl_plugin.rewards.runner import UnknownRewardError
from agent_rl_plugin.train.common import TrainError

logger = logging.getLogger(__name__)

#: Keyword arguments TRL passes that are not dataset columns (never copied into metadata).
TRL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})
#: Dataset columns with a meaning of their own on the rollout.
ROLLOUT_COLUMNS = frozenset({"ground_truth", "task_id", "metadata", "prompt", "completion"})


class RewardFunctionError(TrainError):
    """A reward could not be turned into a reward function (bad entry, bad weights)."""


class UnknownRewardFunctionError(RewardFunctionError, UnknownRewardError):
    """A reward name that no installed plugin registered (message lists the known names)."""


@dataclass
class RewardFunctionStats:
    """What a :class:`PluginRewardFunction` did so far (counts are completions, but ``calls``)."""

    calls: int = 0
    completions: int = 0
    scored: int = 0
    not_applicable: int = 0
    errors: int = 0
    timeouts: int = 0
    first_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# completions as rollouts


def _messages(value: Any, role: str) -> list[dict[str, Any]]:
    """A prompt or completion as chat messages (text becomes one ``role`` message)."""
    if isinstance(value, list):
        return [dict(m) for m in value if isinstance(m, Mapping)]
    if isinstance(value, Mapping):
        return [dict(value)]
    return [{"role": role, "content": "" if value is None else str(value)}]


def _completion_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    messages = _messages(value, "assistant")
    contents = [m.get("content") for m in messages if m.get("role", "assistant") == "assistant"]
    texts = [t if isinstance(t, str) else (text_of(t) or "") for t in contents if t is not None]
    return "".join(texts) if texts else (text_of(messages) or "")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _group_key(prompt: Any, task_id: Any) -> str:
    return json.dumps([prompt, task_id], sort_keys=True, default=str)


def completion_rollouts(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    completion_ids: Sequence[Sequence[int]] | None = None,
    **columns: Any,
) -> list[Rollout]:
    """One :class:`~agent_rl_plugin.rewards.Rollout` per completion (see the module doc).

    ``prompts``/``completions``: TRL's lists (text, or chat messages); ``columns``: the other
    dataset columns, one value per completion (TRL's ``**kwargs``; its non-column keywords are
    ignored). Completions of the same prompt and task share a ``group_id``.
    """
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    batch = uuid.uuid4().hex[:12]
    columns = {k: v for k, v in columns.items() if k not in TRL_KWARGS and isinstance(v, (list, tuple))}
    groups: dict[str, str] = {}
    rollouts = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        row = {k: v[i] for k, v in columns.items() if i < len(v)}
        prompt_messages = _messages(prompt, "user")
        completion_messages = _messages(completion, "assistant")
        text = _completion_text(completion)
        task_id = row.get("task_id")
        task_id = None if task_id is None else str(task_id)
        group_id = groups.setdefault(_group_key(prompt, task_id), f"grpo-{batch}-g{len(groups)}")
        metadata = parse_json(row.get("metadata"))
        metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        metadata.update({k: v for k, v in row.items() if k not in ROLLOUT_COLUMNS and _jsonable(v)})
        n_tokens = len(completion_ids[i]) if completion_ids is not None and i < len(completion_ids) else None
        step = Step(index=0, kind="llm", input=prompt_messages, output=completion_messages, output_tokens=n_tokens)
        rollouts.append(
            Rollout(
                rollout_id=f"grpo-{batch}-{i}",
                task_id=task_id,
                group_id=group_id,
                name="grpo",
                input=prompt if isinstance(prompt, str) else prompt_messages,
                output=text,
                final_output=text,
                messages=prompt_messages + completion_messages,
                steps=[step],
                output_tokens=n_tokens or 0,
                metadata=metadata,
                ground_truth=parse_json(row.get("ground_truth")),
            )
        )
    return rollouts


# ---------------------------------------------------------------------------------------------
# a plugin as a reward function


class PluginRewardFunction:
    """A reward plugin as a TRL reward function (see the module doc for the contract)."""

    def __init__(self, plugin: RewardPlugin, *, weight: float | None = None, timeout_s: float = 30.0) -> None:
        if not timeout_s > 0:
            raise RewardFunctionError(f"timeout_s must be > 0, got {timeout_s}")
        self.plugin = plugin
        self.__name__ = plugin.name
        self.__qualname__ = plugin.name
        self.__doc__ = plugin.describe().get("description") or None
        self.reward_weight = float(plugin.weight if weight is None else weight)
        self.timeout_s = float(timeout_s)
        self.stats = RewardFunctionStats()
        self._warned: set[str] = set()
        self._busy: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<reward function {self.__name__} (weight {self.reward_weight:g})>"

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            logger.warning("reward %r: %s (logged once; those completions get no reward)", self.__name__, message)

    def _units(self, rollouts: list[Rollout]) -> list[tuple[int, ...]]:
        if self.plugin.mode != "batch":
            return [(i,) for i in range(len(rollouts))]
        groups: dict[str | None, list[int]] = {}
        for i, rollout in enumerate(rollouts):
            groups.setdefault(rollout.group_id, []).append(i)
        return [tuple(members) for members in groups.values()]

    def _run(self, rollouts: list[Rollout]) -> tuple[list[Any], int]:
        """Outcomes by completion (``None`` where not run) and the number of timed-out ones."""
        from agent_rl_plugin.rewards.workers import evaluate

        units = self._units(rollouts)
        outcomes: list[Any] = [None] * len(rollouts)
        progress = threading.Condition()
        state = {"done": 0, "cancelled": False}

        def work() -> None:
            for unit in units:
                with progress:
                    if state["cancelled"]:
                        return
                results = evaluate(self.plugin, [rollouts[i] for i in unit])
                with progress:
                    for i, outcome in zip(unit, results):
                        outcomes[i] = outcome
                    state["done"] += 1
                    progress.notify_all()

        thread = threading.Thread(target=work, name=f"reward-{self.__name__}", daemon=True)
        thread.start()
        with progress:
            seen = 0
            while state["done"] < len(units):

                def advanced(seen: int = seen) -> bool:
                    return state["done"] > seen

                progress.wait_for(advanced, timeout=self.timeout_s)
                if state["done"] == seen:  # no unit finished within the timeout
                    state["cancelled"] = True
                    break
                seen = state["done"]
            finished = state["done"]
            snapshot = list(outcomes)  # a late result of a timed-out unit must not appear later
        if finished < len(units):
            self._busy = thread
            timed_out = sum(len(unit) for unit in units[finished:])
            self._warn(
                "timeout",
                f"no result within {self.timeout_s:g} s; the call goes on in the background "
                "and the plugin is skipped until it returns",
            )
            return snapshot, timed_out
        thread.join()
        return snapshot, 0

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        n = len(completions)
        self.stats.calls += 1
        self.stats.completions += n
        log_metric = kwargs.get("log_metric")
        if self._busy is not None and self._busy.is_alive():
            self.stats.timeouts += n
            self._warn("busy", "an earlier call timed out and is still running; skipping this batch")
            self._log_failed(log_metric, 1.0)
            return [None] * n
        self._busy = None
        try:
            rollouts = completion_rollouts(prompts, completions, completion_ids, **kwargs)
        except Exception as exc:  # noqa: BLE001 - odd inputs must not stop training
            self.stats.errors += n
            self._record_error(f"could not build rollouts: {type(exc).__name__}: {exc}")
            self._log_failed(log_metric, 1.0)
            return [None] * n
        outcomes, timed_out = self._run(rollouts)
        self.stats.timeouts += timed_out
        scores: list[float | None] = []
        failed = timed_out
        for outcome in outcomes:
            if outcome is None:
                scores.append(None)
            elif outcome.status == "error":
                self.stats.errors += 1
                failed += 1
                self._record_error(outcome.error or "error")
                scores.append(None)
            elif outcome.status == "na" or outcome.score is None or not math.isfinite(outcome.score):
                self.stats.not_applicable += 1
                scores.append(None)
            else:
                self.stats.scored += 1
                scores.append(float(outcome.score))
        self._log_failed(log_metric, failed / n if n else 0.0)
        return scores

    def _record_error(self, message: str) -> None:
        if self.stats.first_error is None:
            self.stats.first_error = message
        self._warn("error", message)

    def _log_failed(self, log_metric: Any, share: float) -> None:
        if callable(log_metric):
            try:
                log_metric(f"rewards/{self.__name__}/failed", share)
            except Exception:  # noqa: BLE001 - logging must never stop training
                pass


# ---------------------------------------------------------------------------------------------
# resolving names


def _registered(plugin_manager: Any, config: Any) -> dict[str, Any]:
    from agent_rl_plugin.rewards.registry import collect_registered_rewards

    return collect_registered_rewards(plugin_manager, config).rewards


def _by_name(name: str, registry: dict[str, Any]) -> list[RewardPlugin]:
    from agent_rl_plugin.rewards.runner import select_rewards

    try:
        return [entry.reward for entry in select_rewards(registry, [name]).values()]
    except UnknownRewardError as exc:
        raise UnknownRewardFunctionError(str(exc), exc.hint) from None


def _with_weight(func: Callable[..., Any], weight: float) -> Callable[..., Any]:
    """A plain callable carrying ``reward_weight`` (wrapped, so the caller's object is untouched)."""
    if inspect.iscoroutinefunction(func):
        raise RewardFunctionError(f"give the weight of async reward function {func!r} in config.reward_weights")

    @functools.wraps(func)
    def weighted(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    weighted.reward_weight = float(weight)  # type: ignore[attr-defined]
    return weighted


def _weight_for(weights: Any, name: str, position: int) -> float | None:
    if weights is None:
        return None
    value = weights.get(name) if isinstance(weights, Mapping) else weights[position]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RewardFunctionError(f"weight of reward {name!r} must be a finite number, got {value!r}")
    return float(value)


def reward_functions(
    rewards: Sequence[Any] | str | RewardPlugin | Callable[..., Any],
    *,
    plugin_manager: Any = None,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    timeout_s: float = 30.0,
    config: Any = None,
) -> list[Callable[..., list[float | None]]]:
    """TRL reward functions for ``rewards`` (see the module doc for what each one does).

    ``rewards``: a list (or one) of

    * reward names: resolved through the ``agent_rl_register_rewards`` hook like ``agent-rl
      score --plugin``: a reward's name, or a plugin's name meaning all its rewards
      (``plugin_manager``: default the process-wide one; ``config``: the
      :class:`~agent_rl_plugin.config.RLConfig` whose ``rewards`` settings parametrise them,
      default from the environment). An unknown name raises
      :class:`UnknownRewardFunctionError` listing the installed rewards;
    * :class:`~agent_rl_plugin.rewards.RewardPlugin` instances (``@reward`` functions are) or
      subclasses (built with their defaults);
    * plain callables with TRL's signature, passed through unchanged.

    ``weights``: ``{function name: weight}`` or one weight per returned function, in order. A
    function's weight is ``reward_weight``: the one given, else the plugin's ``weight`` (its
    configured weight in the combined reward), else 1 for plain callables (a plain callable given
    a weight is wrapped to carry it). :func:`~agent_rl_plugin.train.train_grpo` uses them as
    TRL's ``reward_weights`` unless ``config.reward_weights`` is set. ``timeout_s``: per unit
    of work, see the module doc. Raises :class:`RewardFunctionError` for anything else.
    """
    if isinstance(rewards, (str, RewardPlugin)) or (callable(rewards) and not isinstance(rewards, (list, tuple))):
        rewards = [rewards]
    entries = list(rewards)
    if not entries:
        raise RewardFunctionError("no rewards given: name an installed reward plugin (agent-rl plugins lists them)")
    registry: dict[str, Any] | None = None
    resolved: list[RewardPlugin | Callable[..., Any]] = []
    for entry in entries:
        if isinstance(entry, str):
            if registry is None:
                registry = _registered(plugin_manager, config)
            resolved.extend(_by_name(entry, registry))
        elif isinstance(entry, RewardPlugin):
            resolved.append(entry)
        elif inspect.isclass(entry) and issubclass(entry, RewardPlugin):
            resolved.append(entry())
        elif callable(entry):
            resolved.append(entry)
        else:
            raise RewardFunctionError(
                f"{entry!r:.80} is not a reward: give a reward name, a RewardPlugin or a TRL reward function"
            )
    names = [r.name if isinstance(r, RewardPlugin) else getattr(r, "__name__", type(r).__name__) for r in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RewardFunctionError(f"reward {', '.join(map(repr, duplicates))} given twice (TRL logs by name)")
    if weights is not None and not isinstance(weights, Mapping):
        weights = list(weights)
        if len(weights) != len(resolved):
            raise RewardFunctionError(
                f"{len(weights)} weights for {len(resolved)} reward functions ({', '.join(names)})"
            )
    if isinstance(weights, Mapping):
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise RewardFunctionError(f"weights name unknown reward functions {unknown}; the functions are {names}")
    functions: list[Callable[..., Any]] = []
    for position, (name, item) in enumerate(zip(names, resolved)):
        weight = _weight_for(weights, name, position)
        if isinstance(item, RewardPlugin):
            functions.append(PluginRewardFunction(item, weight=weight, timeout_s=timeout_s))
        else:
            functions.append(item if weight is None else _with_weight(item, weight))
    return functions


def reward_weights(functions: Sequence[Callable[..., Any]]) -> list[float]:
    """The ``reward_weight`` of each function (1 when it has none)."""
    return [float(getattr(f, "reward_weight", 1.0)) for f in functions]


__all__ = [
    "PluginRewardFunction",
    "RewardFunctionError",
    "RewardFunctionStats",
    "UnknownRewardFunctionError",
    "completion_rollouts",
    "reward_functions",
    "reward_weights",
]
