"""Human labels: the one definition of a ``labels`` row, shared by ``agent-rl label`` and the UI.

A label is an append-only row of ``labels`` about a whole rollout (``step_index`` NULL) or one
of its steps:

* ``good`` / ``bad`` / ``skip``: a verdict (``value`` 1.0, 0.0, NULL), what ``agent-rl label``
  writes and what the UI's thumbs up / down write;
* ``score``: a 1-5 grade (``score`` 1..5, ``value`` = (score - 1) / 4, so 5 is 1.0 and 1 is 0.0);
* ``note``: a comment only (``value`` NULL).

**The current label** of a rollout is its latest rollout-level verdict or score row
(:data:`CURRENT_LABEL_ROWS`): notes and step labels never replace it. ``human_label`` (the
reward), ``learned_reward``, the CLI's review queue and the UI all read it this way.
"""

from __future__ import annotations

import getpass
import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent_rl_plugin.errors import AgentRLError

HUMAN_REWARD = "human_label"
#: The verdicts and their values.
LABEL_VALUES: dict[str, float | None] = {"good": 1.0, "bad": 0.0, "skip": None}
#: Every ``labels.label`` value.
LABEL_KINDS = (*LABEL_VALUES, "score", "note")
#: SQL condition (over ``labels``) of the rows that can be a rollout's current label.
CURRENT_LABEL_ROWS = "step_index IS NULL AND label IN ('good', 'bad', 'skip', 'score')"
MAX_NOTE_CHARS = 10_000
MAX_LABELLER_CHARS = 200

LABEL_ALIASES = {
    "g": "good",
    "good": "good",
    "+": "good",
    "1": "good",
    "b": "bad",
    "bad": "bad",
    "-": "bad",
    "0": "bad",
    "s": "skip",
    "skip": "skip",
}

INSERT_LABELS_SQL = (
    "INSERT INTO labels (label_id, rollout_id, label, value, labeller, note, created_at, step_index, score) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


#: Control characters (C0, DEL, C1) and the bidirectional embedding/override/isolate controls that
#: reorder what follows them: never in a labeller's name (shown beside labels in the UI and CLI).
_UNSAFE_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: Notes may hold line breaks and tabs.
_UNSAFE_NOTE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class LabelError(AgentRLError, ValueError):
    """A label that cannot be stored; ``str(error)`` says why, ``hint`` the fix."""


def normalise_label(text: str) -> str:
    """``good``, ``bad`` or ``skip`` from an answer (g, b, s, +, -, 1, 0 accepted)."""
    label = LABEL_ALIASES.get(text.strip().lower())
    if label is None:
        raise LabelError(f"unknown label {text!r}", "use good, bad or skip")
    return label


def default_labeller() -> str:
    """``$USER``, else the login name, else ``unknown``."""
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name available (containers)
        return "unknown"


@dataclass(frozen=True)
class Label:
    """One labelling act, validated: build it with :meth:`make`."""

    rollout_id: str
    label: str
    value: float | None
    labeller: str | None
    note: str | None
    step_index: int | None = None
    score: int | None = None

    @classmethod
    def make(
        cls,
        rollout_id: str,
        *,
        label: str | None = None,
        score: int | None = None,
        note: str | None = None,
        labeller: str | None = None,
        step_index: int | None = None,
    ) -> Label:
        """A label from what a person gave: a verdict (``good``/``bad``/``skip``), a 1-5
        ``score``, a ``note``, or several (the verdict wins the ``label`` column, then the score,
        then the note). Raises :class:`LabelError` for anything else."""
        if not isinstance(rollout_id, str) or not rollout_id.strip() or len(rollout_id) > 200:
            raise LabelError("a label needs the rollout_id of the rollout it is about")
        for name, text in (("rollout_id", rollout_id), ("label", label), ("note", note), ("labeller", labeller)):
            if text is not None and not isinstance(text, str):
                raise LabelError(f"{name} must be text, not {type(text).__name__}")
            if isinstance(text, str) and not _encodable(text):
                raise LabelError(f"{name} is not valid Unicode text (it holds an unpaired surrogate)")
        if label is None and score is None and not note:
            raise LabelError("a label needs a verdict (good, bad, skip), a score (1-5) or a note")
        if label is not None and label not in LABEL_VALUES:
            raise LabelError(f"unknown label {label!r}", "use good, bad or skip (or a score 1-5)")
        if score is not None and (isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5):
            raise LabelError(f"score must be a whole number from 1 to 5, not {score!r}")
        if step_index is not None and (
            isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 0
        ):
            raise LabelError(f"step_index must be a step's index (0 or more), not {step_index!r}")
        if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS):
            raise LabelError(f"a note must be text of at most {MAX_NOTE_CHARS} characters")
        if labeller is not None and len(labeller) > MAX_LABELLER_CHARS:
            raise LabelError(f"labeller must be a name of at most {MAX_LABELLER_CHARS} characters")
        if labeller is not None and _UNSAFE_NAME.search(labeller):
            raise LabelError(
                "labeller must be a plain name: no control characters or bidirectional overrides",
                "use letters, digits, spaces and punctuation",
            )
        if note is not None and _UNSAFE_NOTE.search(note):
            raise LabelError("a note may hold line breaks and tabs but no other control characters")
        if label is not None:
            kind, value = label, LABEL_VALUES[label]
        elif score is not None:
            kind, value = "score", (score - 1) / 4
        else:
            kind, value = "note", None
        return cls(rollout_id, kind, value, (labeller or "").strip() or None, note or None, step_index, score)


def label_rows(labels: list[Label]) -> list[dict[str, Any]]:
    """The ``labels`` rows of ``labels`` (new ids, one ``created_at`` for the batch)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return [
        {
            "label_id": str(uuid.uuid4()),
            "rollout_id": item.rollout_id,
            "label": item.label,
            "value": item.value,
            "labeller": item.labeller,
            "note": item.note,
            "created_at": now,
            "step_index": item.step_index,
            "score": item.score,
        }
        for item in labels
    ]


def insert_label_rows(connection: Any, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` (from :func:`label_rows`) on a writable ``connection``, in one transaction."""
    if not rows:
        return
    connection.execute("BEGIN TRANSACTION")
    try:
        connection.executemany(INSERT_LABELS_SQL, [list(row.values()) for row in rows])
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def write_labels(
    path: str, labels: list[tuple[str, str]] | list[Label], labeller: str | None = None, note: str | None = None
) -> list[dict[str, Any]]:
    """Append labels to the store at ``path`` in one transaction; returns the rows written.
    ``labels``: :class:`Label` objects, or ``(rollout_id, verdict)`` pairs given ``labeller``
    and ``note`` (what ``agent-rl label`` collects)."""
    from agent_rl_plugin.store import connect_writer

    items = [
        item if isinstance(item, Label) else Label.make(item[0], label=item[1], labeller=labeller, note=note)
        for item in labels
    ]
    rows = label_rows(items)
    if not rows:
        return rows
    connection = connect_writer(path)
    try:
        insert_label_rows(connection, rows)
    finally:
        connection.close()
    return rows
