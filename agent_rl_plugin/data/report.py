"""What a dataset build did: counts, what was left out and why, and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_rl_plugin.errors import AgentRLError


class DatasetError(AgentRLError, ValueError):
    """A dataset cannot be built as asked (no rollouts match, bad SQL, a NaN reward...).

    The message is one line; ``hint`` says how to fix it when there is something to say.
    """


#: How many rollout ids each "left out" reason keeps as examples.
EXAMPLES_KEPT = 3


@dataclass
class BuildReport:
    """Filled in by the ``build_*_dataset`` functions when passed as ``report=``.

    ``left_out`` counts rollouts (or steps, or groups) dropped, by reason; ``fixes`` holds the
    fix of each reason that has one (:meth:`fix_hint` joins them for an error that nothing was
    left); ``notes`` are warnings that did not drop anything (one-class labels, zero-advantage
    groups, rollouts built from the agent's input/output instead of LLM messages).
    """

    kind: str = ""
    rollouts: int = 0
    rows: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    groups: int | None = None
    mean_group_size: float | None = None
    tokens: int | None = None
    tokens_method: str | None = None
    reward_names: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    fixes: dict[str, str] = field(default_factory=dict)

    def leave_out(
        self, reason: str, ids: list[str] | None = None, count: int | None = None, fix: str | None = None
    ) -> None:
        """Count ``count`` (default ``len(ids)``) items dropped for ``reason``; ``fix``: how to
        keep them (one line), for :meth:`fix_hint`."""
        n = count if count is not None else len(ids or [])
        if n <= 0:
            return
        self.left_out[reason] = self.left_out.get(reason, 0) + n
        if fix:
            self.fixes[reason] = fix
        if ids:
            kept = self.examples.setdefault(reason, [])
            kept.extend(str(i) for i in ids[: max(0, EXAMPLES_KEPT - len(kept))])

    def causes(self) -> str:
        """Every reason something was left out with its count, most frequent first:
        ``"2 no usable episode reward, 1 failed rollout"``."""
        return ", ".join(f"{n} {reason}" for reason, n in sorted(self.left_out.items(), key=lambda kv: -kv[1]))

    def fix_hint(self, fallback: str | None = None) -> str | None:
        """The fixes of the reasons things were left out, most frequent reason first, joined by
        ``"; "`` (each once); ``fallback`` when no reason has a fix."""
        ordered = sorted(self.left_out.items(), key=lambda kv: -kv[1])
        fixes = list(dict.fromkeys(self.fixes[r] for r, _ in ordered if r in self.fixes))
        return "; ".join(fixes) or fallback

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "rollouts": self.rollouts,
            "rows": self.rows,
            "left_out": dict(self.left_out),
            "left_out_examples": {k: list(v) for k, v in self.examples.items()},
            "notes": list(self.notes),
            "reward_names": list(self.reward_names),
        }
        if self.labels:
            data["labels"] = dict(self.labels)
        if self.groups is not None:
            data["groups"] = self.groups
            data["mean_group_size"] = self.mean_group_size
        if self.tokens is not None:
            data["tokens"] = self.tokens
            data["tokens_method"] = self.tokens_method
        data.update(self.extra)
        return data


__all__ = ["BuildReport", "DatasetError"]
