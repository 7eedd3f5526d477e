"""``task_completion``: is the final answer the ground truth? (exact, normalised, numeric, contains)"""

from __future__ import annotations

import math
import re
import string
from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import as_text, check_choice, check_number
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

MODES = ("auto", "exact", "normalised", "numeric", "contains")
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+]?)\$?(?P<sign2>[-+]?)"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?P<exp>[eE][-+]?\d+)?(?P<pct>%?)"
)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def parse_numbers(text: str) -> list[tuple[float, bool]]:
    """Every number in ``text`` as ``(value, is_percent)``: handles ``1,234.5``, ``$12``,
    ``-$3``, ``50%``, ``1e-3``."""
    found = []
    for m in _NUMBER.finditer(text):
        sign = "-" if "-" in m.group("sign") + m.group("sign2") else ""
        value = float(sign + m.group("digits").replace(",", "") + (m.group("exp") or ""))
        if math.isfinite(value):
            found.append((value, bool(m.group("pct"))))
    return found


def as_number(value: Any) -> tuple[float, bool] | None:
    """A ground truth as a number: an int/float, or a text that is exactly one number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return (float(value), False) if math.isfinite(value) else None
    if isinstance(value, str):
        m = _NUMBER.fullmatch(value.strip())
        return parse_numbers(value.strip())[0] if m else None
    return None


def normalise(text: str) -> str:
    """Lower case; punctuation removed; articles a/an/the dropped; whitespace collapsed."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _candidates(value: float, percent: bool) -> list[float]:
    return [value, value / 100.0] if percent else [value]


class TaskCompletion(RewardPlugin):
    """1.0 when the final answer matches the ground truth, else 0.0.

    Modes (``mode``):

    * ``exact``: the answer equals the ground truth after stripping surrounding whitespace.
    * ``normalised``: equal after lower-casing, removing punctuation (SQuAD-style: ``1,234`` -> ``1234``),
      dropping the articles a/an/the and collapsing whitespace.
    * ``numeric``: the **last** number in the answer (``1,234.5``, ``$12``, ``-3``, ``50%``,
      ``1e-3`` understood) is ``math.isclose`` to the ground truth number with ``rel_tol`` and
      ``abs_tol``; a percentage also matches as a fraction (``50%`` matches 50 and 0.5).
    * ``contains``: the normalised ground truth appears in the normalised answer as whole words.
    * ``auto`` (default): ``numeric`` when the ground truth is a number (or a text that is
      exactly one number), else ``normalised``; decided per acceptable answer.

    The ground truth may be a list of acceptable answers (any match scores 1.0) or a dict with
    the answer under ``answer_key``. With ``extract`` (a regex), the answer is its first match
    (group 1 if the regex has a group), or the whole text when it does not match. A missing or
    empty answer scores 0.0. Not applicable (``None``) without a ground truth.

    Parameters: ``mode="auto"``, ``rel_tol=1e-6``, ``abs_tol=1e-9``, ``extract=None``,
    ``answer_key="answer"``.
    """

    name = "task_completion"
    version = "1"
    weight = 1.5
    description = "1.0 when the final answer matches the ground truth (exact/normalised/numeric/contains)."

    def __init__(
        self,
        mode: str = "auto",
        rel_tol: float = 1e-6,
        abs_tol: float = 1e-9,
        extract: str | None = None,
        answer_key: str = "answer",
        weight: float | None = None,
    ) -> None:
        check_choice(self.name, "mode", mode, MODES)
        check_number(self.name, "rel_tol", rel_tol, minimum=0)
        check_number(self.name, "abs_tol", abs_tol, minimum=0)
        self._extract = None
        if extract is not None:
            try:
                self._extract = re.compile(extract, re.S)
            except (re.error, TypeError) as exc:
                raise ValueError(f"{self.name}: invalid extract regular expression {extract!r}: {exc}") from None
        super().__init__(
            weight=weight,
            mode=mode,
            rel_tol=float(rel_tol),
            abs_tol=float(abs_tol),
            extract=extract,
            answer_key=answer_key,
        )

    def acceptable(self, rollout: Rollout) -> list[Any]:
        """The acceptable answers (empty when the rollout has no usable ground truth)."""
        truth = rollout.ground_truth
        if isinstance(truth, dict):
            truth = truth.get(self.params["answer_key"])
        items = truth if isinstance(truth, (list, tuple)) else [truth]
        return [item for item in items if item is not None and not (isinstance(item, str) and not item.strip())]

    def answer_text(self, text: str) -> str:
        """The part of the answer that is compared (see ``extract``)."""
        if self._extract is not None:
            m = self._extract.search(text)
            if m:
                return m.group(1) if m.re.groups else m.group(0)
        return text

    def matches(self, answer: str, truth: Any) -> tuple[bool, str]:
        """Whether ``answer`` matches one acceptable ``truth``, and the mode used."""
        mode = self.params["mode"]
        number = as_number(truth)
        if mode == "auto":
            mode = "numeric" if number is not None else "normalised"
        truth_text = as_text(truth) or ""
        if mode == "exact":
            return answer.strip() == truth_text.strip(), mode
        if mode == "normalised":
            return normalise(answer) == normalise(truth_text), mode
        if mode == "contains":
            needle = normalise(truth_text)
            return bool(needle) and f" {needle} " in f" {normalise(answer)} ", mode
        if number is None:
            raise ValueError(f"{self.name}: mode numeric but the ground truth {truth!r} is not a number")
        found = parse_numbers(answer)
        if not found:
            return False, mode
        tol = {"rel_tol": self.params["rel_tol"], "abs_tol": self.params["abs_tol"]}
        return any(math.isclose(a, t, **tol) for a in _candidates(*found[-1]) for t in _candidates(*number)), mode

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        truths = self.acceptable(rollout)
        if not truths:
            return None
        text = rollout.final_output
        if text is None or not text.strip():
            return EvaluateResult(
                score=0.0, reason="no final answer", metrics={"matched": False, "n_acceptable": len(truths)}
            )
        answer = self.answer_text(text)
        mode = self.params["mode"]
        for truth in truths:
            ok, mode = self.matches(answer, truth)
            if ok:
                return EvaluateResult(
                    score=1.0,
                    reason=f"answer matches {as_text(truth)!r:.80} ({mode})",
                    metrics={
                        "matched": True,
                        "mode": mode,
                        "matched_answer": as_text(truth),
                        "n_acceptable": len(truths),
                    },
                )
        shown = ", ".join(repr(as_text(t))[:40] for t in truths[:3])
        return EvaluateResult(
            score=0.0,
            reason=f"answer {answer.strip()[:60]!r} does not match {shown} ({mode})",
            metrics={"matched": False, "mode": mode, "n_acceptable": len(truths)},
        )
