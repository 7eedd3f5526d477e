"""``llm_judge``: an LLM grades each answer ("Score: N/10") or ranks a group ("Ranking: 2 > 1").

Without a judge it falls back to :class:`KeywordJudge`, and says so: its rows are named
``llm_judge_heuristic`` with source ``heuristic`` (never ``llm``), and its weight is 0 unless
one is given, so the heuristic does not count in the combined episode reward by default.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any, Callable, Sequence

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import callable_name, check_choice, references, tokens
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

Judge = Callable[[list[dict[str, str]]], Any]
#: The name and source of the rows :class:`LLMJudge` writes when no judge is configured.
HEURISTIC_NAME = "llm_judge_heuristic"
HEURISTIC_SOURCE = "heuristic"
DEFAULT_RUBRIC = "Correct, complete and clearly explained; no unsupported claims."
_SCORE = re.compile(
    r"\b(?:score|rating|grade)\s*[:=]?\s*\**\s*(-?\d+(?:\.\d+)?)\s*\**\s*(?:(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?", re.I
)
_RANKING = re.compile(r"\branking\s*[:=]\s*\**\s*([^\n]+)", re.I)
_STOPWORDS = frozenset("a an the of and or to in on at for is are was were be by with as it this that from".split())


def reply_text(reply: Any) -> str:
    """The text of a judge's reply: a string, ``{"content": ...}``, or an OpenAI-style
    response (``reply.choices[0].message.content`` or the same keys in a dict)."""
    if isinstance(reply, str):
        return reply
    try:
        if isinstance(reply, dict):
            if isinstance(reply.get("content"), str):
                return reply["content"]
            return str(reply["choices"][0]["message"]["content"])
        return str(reply.choices[0].message.content)
    except (AttributeError, IndexError, KeyError, TypeError):
        raise ValueError(f"judge returned {type(reply).__name__}, expected the reply text") from None


def parse_score(text: str) -> float:
    """``"... Score: 7/10"`` -> 0.7 (the last score in the reply; ``/10`` assumed when no scale is
    given; ``8 out of 10`` and ``Rating: 85/100`` work too). ``ValueError`` when unparsable."""
    matches = _SCORE.findall(text)
    if not matches:
        raise ValueError(f"no 'Score: N/10' in the judge's reply: {text[-200:]!r}")
    value, scale = float(matches[-1][0]), float(matches[-1][1] or 10)
    if scale <= 0 or not 0 <= value <= scale:
        raise ValueError(f"judge score {value:g}/{scale:g} is out of range")
    return value / scale


def parse_ranking(text: str, n: int) -> list[float]:
    """``"Ranking: 2 > 1 = 3"`` over ``n`` answers -> scores by answer (best 1.0, worst 0.0,
    linear in position; tied answers share their average position). ``ValueError`` unless the
    last ranking line lists every id 1..n exactly once."""
    lines = _RANKING.findall(text)
    if not lines:
        raise ValueError(f"no 'Ranking: i > j > ...' in the judge's reply: {text[-200:]!r}")
    tiers = [[int(i) for i in re.findall(r"\d+", tier)] for tier in lines[-1].split(">")]
    tiers = [tier for tier in tiers if tier]
    listed = sorted(i for tier in tiers for i in tier)
    if listed != list(range(1, n + 1)):
        raise ValueError(f"ranking {lines[-1].strip()!r} must list every answer 1..{n} exactly once")
    scores = [0.0] * n
    position = 0
    for tier in tiers:
        average = position + (len(tier) - 1) / 2
        for i in tier:
            scores[i - 1] = 1.0 - average / (n - 1) if n > 1 else 1.0
        position += len(tier)
    return scores


def overlap(answer: str, reference: str) -> float:
    """Share of the reference's distinct content words (no stopwords) found in the answer."""
    wanted = {t for t in tokens(reference) if t not in _STOPWORDS} or set(tokens(reference))
    return len(wanted & set(tokens(answer))) / len(wanted) if wanted else 0.0


class KeywordJudge:
    """A deterministic stand-in for an LLM judge, for tests and demos.

    It reads the prompt :class:`LLMJudge` builds: the reference in ``<{reference_key}>...</...>``
    and the answers in ``<answer>`` (pointwise) or ``<answer id="i">`` (batch) tags, scores each
    answer by :func:`overlap` with the reference, and replies like an LLM: a sentence, then
    ``Score: N/10`` (N = round(10 x overlap)) or ``Ranking: 2 > 1 = 3`` (equal overlaps tie).
    Without a reference it replies that it cannot grade (which does not parse).
    """

    def __init__(self, reference_key: str = "reference") -> None:
        self.reference_key = reference_key

    def __call__(self, messages: list[dict[str, str]]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        ref = re.search(
            rf"<{re.escape(self.reference_key)}>\n?(.*?)\n?</{re.escape(self.reference_key)}>", prompt, re.S
        )
        if not ref:
            return "I cannot grade these answers without a reference answer."
        answers = re.findall(r'<answer(?: id="(\d+)")?>\n?(.*?)\n?</answer>', prompt, re.S)
        if len(answers) == 1 and not answers[0][0]:
            share = overlap(answers[0][1], ref.group(1))
            return f"The answer covers {share:.0%} of the reference's key terms.\nScore: {round(10 * share)}/10"
        shares = {int(i): round(overlap(text, ref.group(1)), 6) for i, text in answers}
        order = sorted(shares, key=lambda i: (-shares[i], i))
        ranking = str(order[0])
        for prev, cur in zip(order, order[1:]):
            ranking += (" = " if shares[cur] == shares[prev] else " > ") + str(cur)
        details = ", ".join(f"answer {i}: {shares[i]:.0%}" for i in sorted(shares))
        return f"Key-term coverage: {details}.\nRanking: {ranking}"


def resolve_judge(judge: Judge | str | None) -> Judge | None:
    """``judge`` as a callable: a callable as is; ``"package.module:name"`` imported (so a config
    file can name one: ``[rewards.llm_judge] judge = "my_pkg.judges:grade"``), a class found
    that way instantiated without arguments; ``None`` stays ``None``. ``ValueError`` otherwise."""
    if judge is None or (callable(judge) and not isinstance(judge, str)):
        return judge
    if not isinstance(judge, str) or ":" not in judge:
        raise ValueError(
            "llm_judge: parameter judge must be a callable judge(messages) -> str "
            f"or 'package.module:function', got {judge!r:.80}"
        )
    module_name, _, attr = judge.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"llm_judge: cannot import judge {judge!r}: {type(exc).__name__}: {exc}") from None
    if inspect.isclass(found):
        found = found()
    if not callable(found):
        raise ValueError(f"llm_judge: judge {judge!r} is not callable")
    return found


class LLMJudge(RewardPlugin):
    """An LLM judge: pointwise "Score: N/10" -> N/10, or a group ranking -> 1.0 (best) .. 0.0.

    ``judge`` is any callable ``judge(messages) -> str`` taking OpenAI-style chat messages (a
    system and a user message); wrap your client call in it. The user message holds the task
    prompt in ``<task>``, the reference (``ground_truth``, else ``metadata[reference_key]``, else
    the task's) in ``<reference>`` when there is one, the answer(s) and ``rubric``.

    * ``mode="pointwise"``: one call per rollout asking for a final line ``Score: N/10``; the
      last such line is parsed (``N/M`` and ``N out of M`` accepted) and the score is N/M. An
      empty answer scores 0.0 without a call.
    * ``mode="batch"``: one call per group showing every answer as ``<answer id="i">`` and asking
      for ``Ranking: i > j > ...`` (``=`` for ties); answer at position p of n scores
      1 - p/(n - 1) (ties share their average position). A group of one is judged pointwise.
      The task and reference are the first rollout's.

    An unparsable reply or a failing call gives an error result (for the whole group in batch
    mode), never a guessed score.

    **No judge configured** (``judge=None``, or a :class:`KeywordJudge`): the reward is the
    keyword heuristic, and labelled as such. Its instance is named ``llm_judge_heuristic``
    (:data:`HEURISTIC_NAME`) with source ``heuristic``, so its rows never pass for an LLM's
    verdict, and its weight is 0 unless one is given (``weight=``, ``[rewards.llm_judge]`` or
    ``[rewards.llm_judge_heuristic] weight``, ``agent-rl score -r llm_judge_heuristic=W``): it
    is scored and shown, but not counted in the combined episode reward. It scores when the
    rollout (batch: the group's first rollout) has a reference; otherwise not applicable
    (``None``). ``agent-rl score -r llm_judge`` still selects it.

    Parameters: ``judge=None`` (a callable, or ``"package.module:function"`` to import one; only
    its name goes into the parameters), ``mode="pointwise"``, ``rubric`` (default: correct,
    complete, clearly explained, no unsupported claims), ``reference_key="reference"``.
    """

    name = "llm_judge"
    version = "1"
    weight = 1.0
    source = "llm"
    description = "LLM-as-a-judge: pointwise Score N/10 or a group ranking."

    def __init__(
        self,
        judge: Judge | str | None = None,
        mode: str = "pointwise",
        rubric: str = DEFAULT_RUBRIC,
        reference_key: str = "reference",
        weight: float | None = None,
    ) -> None:
        check_choice(self.name, "mode", mode, ("pointwise", "batch"))
        judge = resolve_judge(judge)
        if not isinstance(rubric, str) or not rubric.strip():
            raise ValueError(f"{self.name}: parameter rubric must be a non-empty string")
        self.mode = mode  # type: ignore[misc,assignment]  # per instance: the runner batches groups when "batch"
        self._judge = judge
        #: True when no real judge is configured: rows are the keyword heuristic's
        self.heuristic = judge is None or isinstance(judge, KeywordJudge)
        if self.heuristic:  # per instance, like FunctionReward: its own row name and source
            self.name = HEURISTIC_NAME  # type: ignore[misc]
            self.source = HEURISTIC_SOURCE  # type: ignore[misc,assignment]
            self.description = "Keyword-overlap heuristic standing in for an LLM judge (no judge configured)."  # type: ignore[misc]
            if weight is None:
                weight = 0.0
        super().__init__(
            weight=weight, judge=callable_name(judge), mode=mode, rubric=rubric, reference_key=reference_key
        )

    def _judge_for(self, rollout: Rollout) -> Judge | None:
        if self._judge is not None:
            return self._judge
        return KeywordJudge() if references(rollout, self.params["reference_key"]) else None

    def messages(self, rollout: Rollout, answers: Sequence[str], batch: bool) -> list[dict[str, str]]:
        """The chat messages sent to the judge."""
        refs = references(rollout, self.params["reference_key"])
        parts = [f"<task>\n{rollout.prompt or '(no task prompt recorded)'}\n</task>"]
        if refs:
            parts.append("<reference>\n" + "\n---\n".join(refs) + "\n</reference>")
        if batch:
            parts += [f'<answer id="{i}">\n{a or "(empty)"}\n</answer>' for i, a in enumerate(answers, 1)]
            ask = f"Rank the {len(answers)} answers from best to worst. End with one line: Ranking: i > j > ... listing every answer id once (use = for ties)."
        else:
            parts.append(f"<answer>\n{answers[0]}\n</answer>")
            ask = "Grade the answer. End with one line: Score: N/10, N an integer from 0 to 10."
        parts.append(f"Rubric: {self.params['rubric']}\n{ask}")
        system = "You are a strict, impartial grader of answers to a task" + (
            ", using the reference answer as the gold standard." if refs else "."
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]

    def _call(self, judge: Judge, messages: list[dict[str, str]]) -> str:
        try:
            return reply_text(judge(messages))
        except Exception as exc:  # noqa: BLE001 - a failing judge is an error result, not a crash
            raise RuntimeError(f"judge call failed: {type(exc).__name__}: {exc}") from exc

    def score(self, rollout: Rollout) -> EvaluateResult | None:
        judge = self._judge_for(rollout)
        if judge is None:
            return None
        answer = rollout.final_output
        if answer is None or not answer.strip():
            return EvaluateResult(score=0.0, reason="empty answer", metrics={"judge": callable_name(judge)})
        try:
            reply = self._call(judge, self.messages(rollout, [answer], batch=False))
            value = parse_score(reply)
        except (RuntimeError, ValueError) as exc:
            return EvaluateResult(error=str(exc))
        return EvaluateResult(
            score=value,
            reason=reply.strip()[-300:],
            metrics={"judge_score": value * 10, "judge": callable_name(judge), "heuristic": self.heuristic},
        )

    def score_batch(self, rollouts: Sequence[Rollout]) -> list[float | EvaluateResult | dict[Any, Any] | None]:
        if self.mode != "batch" or len(rollouts) < 2:
            return [self.score(r) for r in rollouts]
        judge = self._judge_for(rollouts[0])
        if judge is None:
            return [None] * len(rollouts)
        try:
            reply = self._call(judge, self.messages(rollouts[0], [r.final_output or "" for r in rollouts], batch=True))
            scores = parse_ranking(reply, len(rollouts))
        except (RuntimeError, ValueError) as exc:
            return [EvaluateResult(error=str(exc)) for _ in rollouts]
        ranking = _RANKING.findall(reply)[-1].strip()
        return [
            EvaluateResult(
                score=value,
                reason=f"answer {i} of {len(rollouts)}; judge ranking: {ranking}",
                metrics={
                    "answer_id": i,
                    "group_size": len(rollouts),
                    "ranking": ranking,
                    "judge": callable_name(judge),
                    "heuristic": self.heuristic,
                },
            )
            for i, value in enumerate(scores, 1)
        ]
