"""``answer_quality``: a transparent heuristic score of the final answer's text (0..1)."""

from __future__ import annotations

import difflib
import re
from typing import Any, Sequence

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import check_choice, check_number, references, token_f1
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

_HEADING = re.compile(r"^ {0,3}(?:#{1,6}\s+\S.*|\*\*[^*\n]{1,80}\*\*:?|[A-Z][^\n.!?:]{0,60}:)\s*$", re.M)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+\S", re.M)
_EXAMPLE = re.compile(r"\bfor (?:example|instance)\b|\be\.g\.|\bsuch as\b|\bexamples?\b|```", re.I)
_CONNECTIVE = re.compile(
    r"\b(?:because|therefore|thus|hence|since|so that|as a result|consequently|which means|"
    r"this means|due to|in order to|however|whereas|if\b.{0,80}?\bthen)\b",
    re.I,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\$?\d[\d,]*(?:\.\d+)?%?")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_CAPITALISED = re.compile(r"^[A-Z](?:[a-z]+|[A-Z0-9]+)[\w'-]*$")
_LEADING_MARKUP = re.compile(r"^[\s#>*\-+\u2022\d.)]+")

#: Sum of the maximal structure (0.3) and depth (0.4) parts: the divisor without a reference.
NO_REFERENCE_DIVISOR = 0.7


def _fraction(count: float, full_at: float) -> float:
    return min(1.0, count / full_at) if full_at > 0 else 1.0


def named_entities(text: str) -> set[str]:
    """Capitalised words (``Paris``, ``NASA``) that do not start a sentence or line; not ``I``."""
    found: set[str] = set()
    for sentence in _SENTENCE_SPLIT.split(text):
        words = _LEADING_MARKUP.sub("", sentence).split()
        for word in words[1:]:
            word = word.strip("()[]{}\"',;:.!?*_`")
            if len(word) > 1 and _CAPITALISED.match(word):
                found.add(word)
    return found


def structure_parts(text: str) -> dict[str, float]:
    """Headings, lists and paragraphs, 0..0.1 each (see :class:`AnswerQuality`)."""
    paragraphs = [block for block in re.split(r"\n\s*\n", text) if block.strip()]
    return {
        "headings": 0.1 if _HEADING.search(text) else 0.0,
        "lists": 0.1 * _fraction(len(_LIST_ITEM.findall(text)), 3),
        "paragraphs": 0.1 * _fraction(len(paragraphs) - 1, 2),
    }


def depth_parts(text: str, min_words: int, max_words: int) -> dict[str, float]:
    """Examples, reasoning, specificity and length, 0..0.1 each (see :class:`AnswerQuality`)."""
    words = len(text.split())
    if words < min_words:
        length = 0.1 * words / min_words
    elif words > max_words:
        length = 0.1 * max_words / words
    else:
        length = 0.1
    specifics = len(_NUMBER.findall(text)) + len(named_entities(text))
    return {
        "examples": 0.1 * _fraction(len(_EXAMPLE.findall(text)), 2),
        "reasoning": 0.1 * _fraction(len(_CONNECTIVE.findall(text)), 3),
        "specificity": 0.1 * _fraction(specifics, 6),
        "length": length,
    }


def similarity(answer: str, reference: str, method: str = "token_f1") -> float:
    """0..1: token F1 (default) or ``difflib.SequenceMatcher`` ratio of the lower-cased texts."""
    if method == "difflib":
        return difflib.SequenceMatcher(None, answer.lower(), reference.lower(), autojunk=False).ratio()
    return token_f1(answer, reference)


def quality(
    text: str | None,
    refs: Sequence[str] = (),
    *,
    min_words: int = 50,
    max_words: int = 800,
    similarity_method: str = "token_f1",
) -> dict[str, Any]:
    """The parts and the score of a text, as :class:`AnswerQuality` computes them."""
    if text is None or not text.strip():
        return {
            "score": 0.0,
            "structure": 0.0,
            "depth": 0.0,
            "similarity": None,
            "has_reference": bool(refs),
            "empty": True,
        }
    parts: dict[str, Any] = {**structure_parts(text), **depth_parts(text, min_words, max_words)}
    structure = parts["headings"] + parts["lists"] + parts["paragraphs"]
    depth = parts["examples"] + parts["reasoning"] + parts["specificity"] + parts["length"]
    if refs:
        sim = max(similarity(text, ref, similarity_method) for ref in refs)
        parts["similarity"] = 0.3 * sim
        score = structure + depth + 0.3 * sim
    else:
        parts["similarity"] = None
        score = (structure + depth) / NO_REFERENCE_DIVISOR
    return {
        "score": min(1.0, max(0.0, score)),
        "structure": structure,
        "depth": depth,
        **parts,
        "has_reference": bool(refs),
        "empty": False,
    }


class AnswerQuality(RewardPlugin):
    """Scores the final answer's text from 0 to 1: structure, depth and similarity to a reference.

    * **structure** (0..0.3) = headings (0.1 if any line is a Markdown heading, a bold line or a
      short capitalised line ending with ``:``) + lists (0.1 x min(1, list items / 3); items are
      lines starting with ``-``, ``*``, ``+``, a bullet or ``1.``/``1)``) + paragraphs
      (0.1 x min(1, (blank-line separated blocks - 1) / 2)).
    * **depth** (0..0.4) = examples (0.1 x min(1, markers / 2); markers: "for example", "for
      instance", "e.g.", "such as", "example(s)", code fences) + reasoning (0.1 x min(1,
      connectives / 3): because, therefore, thus, hence, since, so that, as a result,
      consequently, which/this means, due to, in order to, however, whereas, if ... then) +
      specificity (0.1 x min(1, (numbers + distinct named entities) / 6); a named entity is a
      capitalised word that does not start a sentence or line) + length (0.1 when the word
      count is within ``[min_words, max_words]``, else 0.1 x words / min_words below,
      0.1 x max_words / words above).
    * **similarity** (0..0.3) = 0.3 x the best similarity to a reference: token F1 (SQuAD-style,
      lower-case word tokens; ``similarity="token_f1"``, default) or the ``difflib``
      SequenceMatcher ratio (``similarity="difflib"``). References: ``ground_truth`` (a string,
      number or list of them), else ``metadata[reference_key]``, else
      ``task_metadata[reference_key]``.

    With a reference, score = structure + depth + similarity. Without one, score =
    (structure + depth) / 0.7, so it still spans 0..1. An empty or missing answer scores 0.
    Every part is in ``metrics``.

    A heuristic (source ``heuristic``, weight 0): it is no correctness signal, so it does not
    count in the combined episode reward unless given a weight.

    Parameters: ``min_words=50``, ``max_words=800``, ``similarity="token_f1"``,
    ``reference_key="reference"``.
    """

    name = "answer_quality"
    version = "1"
    #: A heuristic: scored and shown, but not counted in the combined episode reward unless
    #: given a weight (``[rewards.answer_quality] weight``, ``agent-rl score -r answer_quality=W``).
    weight = 0.0
    source = "heuristic"
    description = "Heuristic answer quality 0..1: structure, depth, similarity to a reference."

    def __init__(
        self,
        min_words: int = 50,
        max_words: int = 800,
        similarity: str = "token_f1",
        reference_key: str = "reference",
        weight: float | None = None,
    ) -> None:
        check_number(self.name, "min_words", min_words, minimum=1)
        check_number(self.name, "max_words", max_words, minimum=min_words)
        check_choice(self.name, "similarity", similarity, ("token_f1", "difflib"))
        if not isinstance(reference_key, str) or not reference_key:
            raise ValueError(f"{self.name}: parameter reference_key must be a non-empty string")
        super().__init__(
            weight=weight,
            min_words=int(min_words),
            max_words=int(max_words),
            similarity=similarity,
            reference_key=reference_key,
        )

    def evaluate_text(self, text: str | None, refs: Sequence[str] = ()) -> dict[str, Any]:
        """The parts and score of ``text`` with this reward's parameters."""
        p = self.params
        return quality(
            text, refs, min_words=p["min_words"], max_words=p["max_words"], similarity_method=p["similarity"]
        )

    def score(self, rollout: Rollout) -> EvaluateResult:
        parts = self.evaluate_text(rollout.final_output, references(rollout, self.params["reference_key"]))
        if parts["empty"]:
            return EvaluateResult(score=0.0, reason="empty answer", metrics=parts)
        sim = "no reference" if parts["similarity"] is None else f"similarity {parts['similarity']:.2f}/0.3"
        reason = f"structure {parts['structure']:.2f}/0.3, depth {parts['depth']:.2f}/0.4, {sim}"
        return EvaluateResult(score=parts["score"], reason=reason, metrics=parts)
