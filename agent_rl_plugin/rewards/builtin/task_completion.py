"""``task_completion``: is the final answer the ground truth? (normalized, exact, equal, contains, numeric)"""

from __future__ import annotations

import math
import re
import string
from collections import deque
from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import as_text, check_choice, check_number
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

#: The modes, the default first.
MODES = ("normalized", "exact", "equal", "contains", "numeric")
#: Older spellings still accepted: ``auto`` and ``normalised`` are ``normalized``.
MODE_ALIASES = {"auto": "normalized", "normalised": "normalized"}
#: Characters that write a sign: ASCII, the minus sign U+2212, figure and en dashes, small and
#: fullwidth plus/minus (``−42`` is minus 42, not 42).
_MINUS = "-\u2212\u2012\u2013\ufe63\uff0d"
_SIGN = f"[{_MINUS}+\ufe62\uff0b]?"  # "-" first: a literal, not a range
_NUMBER = re.compile(
    rf"(?<![\w.])(?P<sign>{_SIGN})\$?(?P<sign2>{_SIGN})"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?P<exp>[eE][-+]?\d+)?(?P<pct>%?)"
)
#: Where an answer states its result: ``\boxed{..}``, ``#### ..``, ``answer is ..``, ``answer: ..``.
_MARKER = re.compile(r"\\boxed\{|####|\banswer\s*(?:is|was|=|:)|\bresult\s*(?:is|=|:)|\btotal\s*(?:is|=|:)", re.I)
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
#: Separators of a list of alternatives (see :func:`hedged`).
_LIST_SPLIT = re.compile(r"[,;/|\n]+")
_OR = re.compile(r"\bor\b|\beither\b|\balternatively\b", re.I)
#: Separators of a list of alternatives, words included (see :func:`hedged`).
_ITEM_SPLIT = re.compile(r"[,;/|&\n]+|\b(?:and|nor|maybe|perhaps|possibly|probably|versus|vs)\b", re.I)
#: A negation right before a reference or number, in :func:`normalise`d text: ``not 42``,
#: ``isn't Paris``, ``not exactly 42`` (see :func:`negated`).
_NEGATION = re.compile(
    r"\b(?:not|never|nor|neither|isnt|arent|wasnt|werent|doesnt|dont|didnt|cannot|cant|wont|wouldnt|"
    r"shouldnt|couldnt|aint|hardly)\s+(?:(?:exactly|quite|really|just|simply|actually|necessarily|equal to|"
    r"equal|same as|only)\s+)?$"
)
#: How much text before a match :func:`negated` looks at.
_NEGATION_WINDOW = 40
_BOXED = re.compile(r"\\boxed\{([^{}]{0,200})\}")


def parse_numbers(text: str) -> list[tuple[float, bool]]:
    """Every number in ``text`` as ``(value, is_percent)``: handles ``1,234.5``, ``$12``,
    ``-$3``, ``50%``, ``1e-3``."""
    return [number for number, _ in _numbers(text)]


def _value(m: re.Match[str]) -> tuple[float, bool] | None:
    signs = m.group("sign") + m.group("sign2")
    sign = "-" if any(c in _MINUS for c in signs) else ""
    value = float(sign + m.group("digits").replace(",", "") + (m.group("exp") or ""))
    return (value, bool(m.group("pct"))) if math.isfinite(value) else None


def _numbers(text: str, offset: int = 0) -> list[tuple[tuple[float, bool], int]]:
    """Every finite number in ``text`` with where it starts (plus ``offset``)."""
    found = []
    for m in _NUMBER.finditer(text):
        number = _value(m)
        if number is not None:
            found.append((number, m.start() + offset))
    return found


def negated(text: str, start: int) -> bool:
    """True when the words right before ``text[start:]`` negate it: ``not 42``, ``isn't Paris``,
    ``never exactly 3`` (a negation word, at most one softener such as ``exactly`` between)."""
    before = normalise(text[max(0, start - _NEGATION_WINDOW) : start])
    return bool(_NEGATION.search(before + " ")) if before else False


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


def _tail(text: str) -> str:
    """Where an answer states its result: the text after its last answer marker, else its last
    non-empty line's last sentence."""
    markers = list(_MARKER.finditer(text))
    if markers:
        return text[markers[-1].end() :]
    lines = [line for line in text.strip().splitlines() if line.strip()] or [""]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", lines[-1].strip()) if s]
    return sentences[-1] if sentences else ""


def committed_number(text: str) -> tuple[float, bool] | None:
    """The one number an answer commits to: the first number after its last answer marker
    (``\\boxed{``, ``####``, ``answer is``/``answer:``, ``result is``, ``total is``) when there
    is one, else its **last** number; ``None`` when it has no number. Listing many candidates
    therefore gains nothing: only one of them counts."""
    found = _committed(text)
    return found[0] if found is not None else None


def _committed(text: str) -> tuple[tuple[float, bool], int] | None:
    """:func:`committed_number` with where it starts in ``text``. Linear in ``len(text)`` and
    converting one number: only the last match is kept while scanning."""
    markers = deque(_MARKER.finditer(text), maxlen=1)
    if markers:
        for m in _NUMBER.finditer(text, markers[0].end()):
            number = _value(m)
            if number is not None:
                return number, m.start()
    numbers = deque(_NUMBER.finditer(text), maxlen=1)
    if not numbers:
        return None
    last = numbers[0]
    number = _value(last)
    if number is not None:
        return number, last.start()
    found = _numbers(text)  # the last one is not finite (1e999): the last finite one
    return found[-1] if found else None


def commits_to_alternatives(text: str) -> bool:
    """True when the part of ``text`` that states the result (after the last answer marker,
    else the last sentence) offers alternatives: ``42 or 43``, ``either 4 or 5``."""
    if _OR.search(_tail(text)):
        return True
    boxed = set()
    for m in _BOXED.finditer(text):  # \boxed{41} ... \boxed{42}: two different results
        boxed.add(normalise(m.group(1)))
        if len(boxed) > 1:
            return True
    return False


def normalise(text: str) -> str:
    """``\\boxed{x}`` read as ``x``; lower case; punctuation removed (``1,234`` -> ``1234``);
    articles a/an/the dropped; whitespace collapsed."""
    text = _BOXED.sub(r" \1 ", text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def hedged(text: str) -> bool:
    """True when ``text`` offers alternatives instead of one answer: it has the word ``or`` /
    ``either`` / ``alternatively``, or, at commas, semicolons, slashes, bars or line breaks (not those inside
    numbers such as ``1,000``), it splits into three or more items of at most two words each
    (``Paris, London, Berlin``), or it is nothing but two or more such items joined by those
    separators or by ``and``, ``&``, ``nor``, ``maybe``, ``perhaps``, ``possibly``, ``probably``,
    ``vs`` (``Paris and London``, ``Paris, London``; so ``Paris, France`` does not contain
    ``Paris`` either: name one answer)."""
    if _OR.search(text):
        return True
    masked = _NUMBER.sub("0", text)
    items = [normalise(item) for item in _LIST_SPLIT.split(masked)]
    if sum(1 for item in items if item and len(item.split()) <= 2) >= 3:
        return True
    # nothing but two or more short items: "Paris and London", "Paris, London", "yes and no"
    parts = [normalise(item) for item in _ITEM_SPLIT.split(masked)]
    parts = [item for item in parts if item]
    return len(parts) >= 2 and all(len(item.split()) <= 2 for item in parts)


def _candidates(value: float, percent: bool) -> list[float]:
    return [value, value / 100.0] if percent else [value]


class TaskCompletion(RewardPlugin):
    """1.0 when the final answer matches the ground truth, else 0.0.

    Modes (``mode``):

    * ``normalized`` (default; ``auto`` and ``normalised`` are accepted spellings): per
      acceptable answer,

      - a **number** (an int/float, or a text that is exactly one number: ``"3.50"``,
        ``"1,000"``, ``"$12"``, ``"50%"``) matches when the number the answer commits to
        (:func:`committed_number`: the first number after the last ``answer is``/``answer:``/
        ``\\boxed{``/``####``/``result is``/``total is``, else the last number) within
        ``rel_tol``/``abs_tol`` and the answer's result is not given as alternatives
        (:func:`commits_to_alternatives`: ``42 or 43``, two different ``\\boxed{}``) and is
        not :func:`negated` (``not 42``); a sign is ASCII or Unicode (``\u221242`` is -42);
        ``"3.5"`` == ``"3.50"``,
        ``"1,000"`` == ``"1000"``; a percentage also matches as a fraction (``50%`` matches 50 and 0.5);
      - a **text** matches when the answer equals it after :func:`normalise`, or contains it
        as a whole word sequence ("The capital of France is Paris." contains ``Paris``) and
        the answer has at most ``max_words`` words, is not :func:`hedged` (no ``or``, not a
        list of short items) and no occurrence is :func:`negated` (``It is not Paris.``).

      So a policy gains nothing by stuffing candidates: of many numbers only the committed one
      counts, and a list or an "X or Y" answer matches nothing but an equal reference.
    * ``exact``: the answer equals the ground truth after stripping surrounding whitespace.
    * ``equal``: equal after :func:`normalise` (lower case, no punctuation, no articles a/an/the,
      whitespace collapsed), nothing else.
    * ``contains``: the normalised ground truth appears in the normalised answer as a whole word
      sequence, no occurrence :func:`negated`, and the answer is not :func:`hedged` (any
      length). A number ground truth must instead be the answer's only number value, not negated
      (``1, 2, ..., 42, ...`` does not contain 42).
    * ``numeric``: :func:`committed_number` of the answer is close to the ground truth number,
      not negated and not given as alternatives (an error when the ground truth is not a number).

    The ground truth may be a list of acceptable answers (any match scores 1.0) or a dict with
    the answer under ``answer_key``. With ``extract`` (a regex), the answer is its first match
    (group 1 if the regex has a group), or the whole text when it does not match. A missing or
    empty answer scores 0.0. Not applicable (``None``) without a ground truth. ``metrics`` say
    which mode and rule (``equal``, ``contains``, ``number``) matched.

    Parameters: ``mode="normalized"``, ``rel_tol=1e-6``, ``abs_tol=1e-9``, ``extract=None``,
    ``answer_key="answer"``, ``max_words=50``. Set them in ``[rewards.task_completion]``.
    """

    name = "task_completion"
    version = "2"
    weight = 1.5
    description = "1.0 when the final answer matches the ground truth (normalized/exact/equal/contains/numeric)."

    def __init__(
        self,
        mode: str = "normalized",
        rel_tol: float = 1e-6,
        abs_tol: float = 1e-9,
        extract: str | None = None,
        answer_key: str = "answer",
        max_words: int = 50,
        weight: float | None = None,
    ) -> None:
        mode = MODE_ALIASES.get(mode, mode) if isinstance(mode, str) else mode
        check_choice(self.name, "mode", mode, MODES)
        check_number(self.name, "rel_tol", rel_tol, minimum=0)
        check_number(self.name, "abs_tol", abs_tol, minimum=0)
        check_number(self.name, "max_words", max_words, minimum=1)
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
            max_words=int(max_words),
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

    def _close(self, found: tuple[float, bool] | None, number: tuple[float, bool]) -> bool:
        if found is None:
            return False
        tol = {"rel_tol": self.params["rel_tol"], "abs_tol": self.params["abs_tol"]}
        return any(math.isclose(a, t, **tol) for a in _candidates(*found) for t in _candidates(*number))

    def _committed_close(self, answer: str, number: tuple[float, bool]) -> bool:
        """The committed number of ``answer`` is ``number`` and is not negated (``not 42``)."""
        found = _committed(answer)
        return found is not None and self._close(found[0], number) and not negated(answer, found[1])

    def _only_number(self, answer: str, number: tuple[float, bool]) -> bool:
        """Every number of ``answer`` is ``number``, none negated, and there is one; stops at
        the first that is not."""
        seen = False
        for m in _NUMBER.finditer(answer):
            found = _value(m)
            if found is None:
                continue
            if not self._close(found, number) or negated(answer, m.start()):
                return False
            seen = True
        return seen

    def _contains(self, answer: str, truth_text: str) -> bool:
        needle = normalise(truth_text)
        if not needle:
            return False
        haystack = f" {normalise(answer)} "
        at = haystack.find(f" {needle} ")
        if at < 0 or hedged(answer):
            return False
        while at >= 0:  # every occurrence must be stated, none negated ("Paris, not Paris")
            if negated(haystack, at + 1):
                return False
            at = haystack.find(f" {needle} ", at + 1)
        return True

    def matches(self, answer: str, truth: Any) -> tuple[bool, str]:
        """Whether ``answer`` matches one acceptable ``truth``, and the rule that decided
        (``exact``, ``equal``, ``contains`` or ``number``)."""
        mode = self.params["mode"]
        number = as_number(truth)
        truth_text = as_text(truth) or ""
        if mode == "exact":
            return answer.strip() == truth_text.strip(), "exact"
        if mode == "equal":
            return normalise(answer) == normalise(truth_text), "equal"
        if mode == "numeric":
            if number is None:
                raise ValueError(f"{self.name}: mode numeric but the ground truth {truth!r} is not a number")
            ok = not commits_to_alternatives(answer) and self._committed_close(answer, number)
            return ok, "number"
        if mode == "contains":
            if number is not None:
                return self._only_number(answer, number), "contains"
            return self._contains(answer, truth_text), "contains"
        if number is not None:  # normalized, a number
            ok = not commits_to_alternatives(answer) and self._committed_close(answer, number)
            return ok, "number"
        if normalise(answer) == normalise(truth_text):
            return True, "equal"
        short = len(answer.split()) <= self.params["max_words"]
        return short and self._contains(answer, truth_text), "contains"

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        truths = self.acceptable(rollout)
        if not truths:
            return None
        text = rollout.final_output
        mode = self.params["mode"]
        if text is None or not text.strip():
            return EvaluateResult(
                score=0.0,
                reason="no final answer",
                metrics={"matched": False, "mode": mode, "n_acceptable": len(truths)},
            )
        answer = self.answer_text(text)
        rules = []
        for truth in truths:
            ok, rule = self.matches(answer, truth)
            rules.append(rule)
            if ok:
                return EvaluateResult(
                    score=1.0,
                    reason=f"answer matches {as_text(truth)!r:.80} ({mode}: {rule})",
                    metrics={
                        "matched": True,
                        "mode": mode,
                        "rule": rule,
                        "matched_answer": as_text(truth),
                        "n_acceptable": len(truths),
                    },
                )
        shown = ", ".join(repr(as_text(t))[:40] for t in truths[:3])
        return EvaluateResult(
            score=0.0,
            reason=f"answer {answer.strip()[:60]!r} does not match {shown} ({mode})",
            metrics={"matched": False, "mode": mode, "rules": sorted(set(rules)), "n_acceptable": len(truths)},
        )
