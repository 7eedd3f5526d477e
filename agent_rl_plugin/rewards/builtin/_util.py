"""Small helpers shared by the built-in rewards: parameter checks, references, tokens."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any, Callable, Iterable

from agent_rl_plugin.rewards.rollout import Rollout

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def check_number(
    reward: str,
    param: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict_minimum: bool = False,
    allow_none: bool = False,
) -> float | None:
    """``value`` as a finite float, or ``ValueError`` naming the reward and the parameter."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{reward}: parameter {param} must be a finite number, got {value!r}")
    value = float(value)
    if minimum is not None and (value <= minimum if strict_minimum else value < minimum):
        relation = ">" if strict_minimum else ">="
        raise ValueError(f"{reward}: parameter {param} must be {relation} {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{reward}: parameter {param} must be <= {maximum:g}, got {value:g}")
    return value


def check_choice(reward: str, param: str, value: Any, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``, else ``ValueError`` listing them."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{reward}: parameter {param} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def callable_name(function: Callable[..., Any] | None) -> str | None:
    """A stable name for a callable (``module.qualname``), for parameters and fingerprints."""
    if function is None:
        return None
    target = function if hasattr(function, "__qualname__") else type(function)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def as_text(value: Any) -> str | None:
    """A reference value as text: strings stay, numbers are written, dicts/lists give JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def references(rollout: Rollout, key: str = "reference") -> list[str]:
    """Reference answers of a rollout: its ``ground_truth`` (a string, a number, or a list of
    them), else ``metadata[key]``, else ``task_metadata[key]``. Empty list when none; ground
    truths of other shapes (dicts, e.g. test cases) are not references."""
    for value in (rollout.ground_truth, rollout.metadata.get(key), rollout.task_metadata.get(key)):
        items = value if isinstance(value, (list, tuple)) else [value]
        candidates = [
            as_text(item)
            for item in items
            if isinstance(item, str) or (isinstance(item, (int, float)) and not isinstance(item, bool))
        ]
        texts = [t for t in candidates if t and t.strip()]
        if texts:
            return texts
    return []


def tokens(text: str) -> list[str]:
    """Lower-case word tokens (letters and digits)."""
    return _TOKEN.findall(text.lower())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style token F1 of two texts (multiset overlap of lower-case word tokens)."""
    pred, ref = tokens(prediction), tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
