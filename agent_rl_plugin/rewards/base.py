"""The reward plugin contract: :class:`RewardPlugin` and the :func:`reward` decorator.

A reward scores stored rollouts (:class:`~agent_rl_plugin.rewards.rollout.Rollout`).

* ``mode = "pointwise"``: :meth:`RewardPlugin.score` gets one rollout.
* ``mode = "batch"``: :meth:`RewardPlugin.score_batch` gets a whole group (rollouts of one
  ``group_id``, or of one task when there is no group) and returns one result per rollout, in
  order, so it can compare them (ranking, relative scores, an LLM judge ranking a group).

Either returns a number, ``None`` (not applicable: nothing is written), a dict, or an
:class:`~agent_rl_plugin.rewards.result.EvaluateResult`. ``name`` and ``version`` go into every
row the plugin writes; bump ``version`` whenever the scoring changes, so re-scoring writes new
rows instead of being skipped as already done. :meth:`RewardPlugin.fingerprint` (the plugin's
parameters) is part of the input hash too.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal, Sequence

from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

Mode = Literal["pointwise", "batch"]
#: Who produced a reward row's verdict: deterministic ``code``, an ``llm`` judge, a ``human``, or a
#: ``heuristic`` (a rough proxy such as ``answer_quality``, weight 0 by default).
Source = Literal["code", "llm", "heuristic", "human"]
ScoreValue = "float | EvaluateResult | dict | None"


@dataclass
class ScoringContext:
    """What :meth:`RewardPlugin.prepare` may use before scoring: read access to the store.

    ``load_rollouts(where=None)`` returns :class:`Rollout` objects matching an SQL condition over
    the ``rollouts`` view (for example a learned reward fitting on labelled rollouts).
    """

    db_path: str
    load_rollouts: Callable[..., list[Rollout]]


class RewardPlugin:
    """Base class of reward plugins. Subclass, set ``name``, implement ``score`` (or batch).

    Class attributes: ``name`` (unique, used as the reward name), ``version``, ``weight`` (default
    weight in the combined reward), ``mode``, ``source`` (code, llm, heuristic or human) and ``description``.
    Constructor keywords are the reward's parameters; keep them JSON-serialisable so
    :meth:`fingerprint` and ``agent-rl plugins`` can show them.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    weight: float = 1.0
    mode: ClassVar[Mode] = "pointwise"
    source: ClassVar[Source] = "code"
    description: ClassVar[str] = ""
    #: True when the score depends on human labels: only then does (re)labelling a rollout
    #: count as a new input for this reward (see :meth:`Rollout.content_hash`).
    uses_labels: ClassVar[bool] = False
    #: False for rewards that need setting up first (e.g. a model fitted on labels): they run
    #: only when named (``agent-rl score --plugin NAME``), not in a plain ``agent-rl score``.
    run_by_default: ClassVar[bool] = True

    def __init__(self, weight: float | None = None, **params: Any) -> None:
        if weight is not None:
            self.weight = float(weight)
        self.params: dict[str, Any] = dict(params)

    def score(self, rollout: Rollout) -> float | EvaluateResult | dict | None:
        """Score one rollout (pointwise mode)."""
        raise TypeError(f"reward {self.name!r} is pointwise but does not implement score()")

    def score_batch(self, rollouts: Sequence[Rollout]) -> list[float | EvaluateResult | dict | None]:
        """Score a group of rollouts (batch mode); the default scores each one pointwise."""
        return [self.score(rollout) for rollout in rollouts]

    def prepare(self, context: ScoringContext) -> None:
        """Called once per ``agent-rl score`` run, before any rollout is scored, in the scoring
        process (the state it builds is inherited by worker processes). Default: nothing."""

    def fingerprint(self) -> str:
        """A short hash of what changes this reward's output besides the rollout: its parameters.

        The weight is left out: it changes how scores combine, not the scores themselves.
        """
        text = json.dumps({"params": self.params}, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> dict[str, Any]:
        """Name, version, mode, source, weight, parameters and description, for listings."""
        return {
            "name": self.name,
            "version": self.version,
            "mode": self.mode,
            "source": self.source,
            "weight": self.weight,
            "params": self.params,
            "description": self.description or (inspect.getdoc(type(self)) or "").split("\n")[0],
        }

    def __repr__(self) -> str:
        return f"<reward {self.name} v{self.version} {self.mode}>"


class FunctionReward(RewardPlugin):
    """A reward made from a function by :func:`reward`."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str,
        version: str,
        weight: float,
        mode: Mode,
        source: Source,
        description: str,
    ) -> None:
        super().__init__(weight=weight)
        self.function = function
        # instance attributes shadow the ClassVars: each function reward has its own identity
        self.name = name  # type: ignore[misc]
        self.version = version  # type: ignore[misc]
        self.mode = mode  # type: ignore[misc]
        self.source = source  # type: ignore[misc]
        self.description = description  # type: ignore[misc]
        functools.update_wrapper(self, function)  # type: ignore[arg-type]

    def score(self, rollout: Rollout) -> Any:
        if self.mode == "batch":
            return self.function([rollout])[0]
        return self.function(rollout)

    def score_batch(self, rollouts: Sequence[Rollout]) -> list[Any]:
        if self.mode == "batch":
            return list(self.function(list(rollouts)))
        return [self.function(rollout) for rollout in rollouts]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


def reward(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    version: str = "1",
    weight: float = 1.0,
    mode: Mode = "pointwise",
    source: Source = "code",
) -> Any:
    """Turn ``f(rollout) -> float | EvaluateResult`` (or, with ``mode="batch"``,
    ``f(rollouts) -> list``) into a :class:`RewardPlugin`.

    Usable bare (``@reward``) or with options (``@reward(name="exact", version="2")``). The
    result is still callable like the function.
    """

    def build(fn: Callable[..., Any]) -> FunctionReward:
        return FunctionReward(
            fn,
            name=name or fn.__name__,
            version=version,
            weight=weight,
            mode=mode,
            source=source,
            description=(inspect.getdoc(fn) or "").split("\n")[0],
        )

    return build(function) if function is not None else build
