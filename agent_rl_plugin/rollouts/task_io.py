"""Task files and the ``tasks`` table: :func:`parse_tasks_file` reads a task file into
:class:`TaskRow` objects, :func:`write_tasks` stores them.

A task file is JSONL (one object per line), JSON (a list of objects, or ``{"tasks": [...]}``)
or CSV (a header row). Each task has ``task_id`` (required, text or an integer), ``prompt``,
``ground_truth`` (any JSON; ``answer`` is accepted too) and ``metadata`` (an object); any other
key goes into ``metadata``. In CSV, ``ground_truth`` and ``metadata`` cells holding JSON are
parsed (``42`` is a number, ``Paris`` stays text).

Contract: a file that cannot be read as a whole (missing, invalid JSON, a CSV without a
``task_id`` column) raises :class:`TaskFileError` with a ``hint``; a bad line does not raise: it
is returned as a :class:`BadLine` (1-based number; for a JSON list, the item number) next to
the good rows, and the caller decides (all or nothing, or skip the bad lines).
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_rl_plugin.errors import AgentRLError

_KNOWN = ("task_id", "prompt", "ground_truth", "answer", "metadata")


class TaskFileError(AgentRLError, ValueError):
    """Bad tasks (a bad line, a missing file, a repeated ``task_id``); ``hint`` says the fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class TaskRow:
    """One task: what an agent receives (``task_id``, ``prompt``, ``ground_truth``,
    ``metadata``) and the ``line`` (or item number) it came from."""

    task_id: str
    prompt: str | None
    ground_truth: Any
    metadata: dict[str, Any]
    line: int


@dataclass
class BadLine:
    """A line (or item) of a task file that is not a task, and why."""

    line: int
    error: str


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def task_from_object(obj: Any, line: int, csv_cells: bool = False) -> TaskRow:
    """A :class:`TaskRow` from one parsed object; ``ValueError`` says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected an object with task_id, got {type(obj).__name__}")
    task_id = obj.get("task_id")
    if task_id is None or (isinstance(task_id, str) and not task_id.strip()):
        raise ValueError("task_id is missing")
    if not isinstance(task_id, (str, int)) or isinstance(task_id, bool):
        raise ValueError(f"task_id must be text or an integer, got {type(task_id).__name__}")
    prompt = obj.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        prompt = json.dumps(prompt, ensure_ascii=False)
    metadata = obj.get("metadata")
    if csv_cells and isinstance(metadata, str):
        metadata = _maybe_json(metadata)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be an object, got {type(metadata).__name__}")
    ground_truth = obj.get("ground_truth")
    answer = obj.get("answer")
    if ground_truth is None and answer is not None:
        ground_truth = answer
    elif answer is not None:
        metadata = {"answer": answer, **metadata}
    if csv_cells and isinstance(ground_truth, str):
        ground_truth = _maybe_json(ground_truth)
    extra = {k: v for k, v in obj.items() if k not in _KNOWN and not (csv_cells and v is None)}
    return TaskRow(str(task_id).strip(), prompt, ground_truth, {**extra, **metadata}, line)


def parse_tasks_file(path: str | os.PathLike[str]) -> tuple[list[TaskRow], list[BadLine]]:
    """The tasks of a ``.jsonl``/``.json``/``.csv`` file, and its bad lines (see the module
    contract). Raises :class:`TaskFileError` when the file cannot be read as a whole."""
    file = Path(path)
    if not file.is_file():
        raise TaskFileError(f"no task file at {path}", "give a .jsonl, .json or .csv file")
    text = file.read_text(encoding="utf-8-sig")
    suffix = file.suffix.lower()
    tasks: list[TaskRow] = []
    bad: list[BadLine] = []

    def add(obj: Any, line: int, csv_cells: bool = False) -> None:
        try:
            tasks.append(task_from_object(obj, line, csv_cells))
        except ValueError as exc:
            bad.append(BadLine(line, str(exc)))

    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or "task_id" not in reader.fieldnames:
            raise TaskFileError(
                f"{path}: the CSV header has no task_id column", "first row: task_id,prompt,ground_truth"
            )
        for row in reader:
            if None in row:
                bad.append(BadLine(reader.line_num, "more cells than header columns"))
                continue
            add({k: (v if v != "" else None) for k, v in row.items()}, reader.line_num, csv_cells=True)
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise TaskFileError(f"{path}: invalid JSON ({exc})", "a .json task file is a list of objects") from None
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            data = data["tasks"]
        if not isinstance(data, list):
            raise TaskFileError(f"{path}: expected a list of task objects", "or use JSONL: one object per line")
        for number, obj in enumerate(data, start=1):
            add(obj, number)
    else:
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                bad.append(BadLine(number, f"invalid JSON ({exc})"))
                continue
            add(obj, number)
    return tasks, bad


def write_tasks(path: str, tasks: list[TaskRow]) -> tuple[int, int]:
    """INSERT OR REPLACE the tasks in ``path``'s ``tasks`` table (the last one wins for a
    repeated id) in one transaction; returns (new, replaced)."""
    # duckdb and pyarrow load only when tasks are written: parsing tasks (the runner's path) needs neither
    import pyarrow as pa

    from agent_rl_plugin.store import connect_writer
    from agent_rl_plugin.store.transaction import arrow_transaction

    latest = {t.task_id: t for t in tasks}
    if not latest:
        return 0, 0
    now = datetime.now(UTC).replace(tzinfo=None)
    table = pa.table(
        {
            "task_id": pa.array(list(latest), pa.string()),
            "prompt": pa.array([t.prompt for t in latest.values()], pa.string()),
            "ground_truth": pa.array(
                [
                    None if t.ground_truth is None else json.dumps(t.ground_truth, ensure_ascii=False)
                    for t in latest.values()
                ],
                pa.string(),
            ),
            "metadata": pa.array([json.dumps(t.metadata, ensure_ascii=False) for t in latest.values()], pa.string()),
            "imported_at": pa.array([now] * len(latest), pa.timestamp("us")),
        }
    )
    connection = connect_writer(path)
    try:
        with arrow_transaction(connection, {"_arl_new_tasks": table}):
            counted = connection.execute(
                "SELECT count(*) FROM tasks WHERE task_id IN (SELECT task_id FROM _arl_new_tasks)"
            ).fetchone()
            assert counted is not None  # count(*) always gives one row
            replaced = counted[0]
            connection.execute(
                "INSERT OR REPLACE INTO tasks (task_id, prompt, ground_truth, metadata, imported_at) "
                "SELECT task_id, prompt, ground_truth, metadata, imported_at FROM _arl_new_tasks"
            )
    finally:
        connection.close()
    return len(latest) - replaced, replaced


__all__ = ["BadLine", "TaskFileError", "TaskRow", "parse_tasks_file", "task_from_object", "write_tasks"]
