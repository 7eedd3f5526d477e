"""Tasks for the runner, and the database the runner and the chat import record into.

* :func:`load_tasks` accepts a task file (parsed by
  :func:`agent_rl_plugin.rollouts.task_io.parse_tasks_file`, as ``agent-rl tasks import`` does:
  JSONL, JSON or CSV), or a list of
  :class:`~agent_rl_plugin.rollouts.task_io.TaskRow` objects or dicts (``task_id`` required,
  ``prompt``, ``ground_truth`` or ``answer``, ``metadata``, other keys into ``metadata``). Bad
  lines or items, and a ``task_id`` given twice, raise :class:`TaskFileError` naming each.
* :func:`task_payload` is the dict an agent receives.
* :func:`use_database` points recording at a file; :func:`store_tasks` writes the tasks into
  its ``tasks`` table (:func:`agent_rl_plugin.rollouts.task_io.write_tasks`, through
  :func:`agent_rl_plugin.store.connect_writer`: a cursor of this process's live exporter when it
  writes that file).
"""

from __future__ import annotations

import copy
import hashlib
import os
from typing import Any, Iterable, Mapping, Sequence

from agent_rl_plugin.rollouts.task_io import (
    BadLine,
    TaskFileError,
    TaskRow,
    parse_tasks_file,
    task_from_object,
    write_tasks,
)

MAX_REPORTED = 10

#: The keys of the dict an agent receives (:func:`task_payload`), in order.
TASK_PAYLOAD_FIELDS = ("task_id", "prompt", "ground_truth", "metadata", "sample_index", "seed")
#: Its per-sample keys: the runner's bookkeeping, different in every rollout of a task. The
#: default GiGPO state key of a rollout's first action leaves them out
#: (:mod:`agent_rl_plugin.rl.state_keys`), so the rollouts of one task start in one state.
PER_SAMPLE_FIELDS = ("sample_index", "seed")


def describe_bad(source: str, bad: Sequence[Any], unit: str = "line") -> str:
    """``N bad lines in SOURCE: line 3: ...; line 7: ...`` (the first :data:`MAX_REPORTED`)."""
    shown = "; ".join(f"{unit} {b.line}: {b.error}" for b in bad[:MAX_REPORTED])
    more = f"; and {len(bad) - MAX_REPORTED} more" if len(bad) > MAX_REPORTED else ""
    return f"{len(bad)} bad {unit}{'s' if len(bad) != 1 else ''} in {source}: {shown}{more}"


def load_tasks(tasks: str | os.PathLike[str] | Iterable[Any]) -> list[TaskRow]:
    """The tasks as :class:`~agent_rl_plugin.rollouts.task_io.TaskRow` objects (see the module
    contract); an empty file or list gives ``[]``."""
    if isinstance(tasks, (str, os.PathLike)):
        rows, bad = parse_tasks_file(tasks)
        if bad:
            raise TaskFileError(
                describe_bad(os.fspath(tasks), bad), "fix those lines (one JSON object per line with a task_id)"
            )
        unit = "line"
    elif isinstance(tasks, Mapping):
        raise TaskFileError("tasks must be a list of task dicts or a task file, not one dict", "wrap it in a list")
    else:
        rows, bad = [], []
        for number, item in enumerate(tasks, start=1):
            if isinstance(item, TaskRow):
                rows.append(item)
                continue
            try:
                rows.append(task_from_object(dict(item) if isinstance(item, Mapping) else item, number))
            except ValueError as exc:
                bad.append(BadLine(number, str(exc)))
        if bad:
            raise TaskFileError(describe_bad("the task list", bad, unit="item"), "each task is a dict with a task_id")
        unit = "item"
    seen: dict[str, int] = {}
    for row in rows:
        if row.task_id in seen:
            raise TaskFileError(
                f"task_id {row.task_id!r} appears twice ({unit}s {seen[row.task_id]} and {row.line})",
                "give each task its own task_id (group_size sets how many rollouts each gets)",
            )
        seen[row.task_id] = row.line
    return rows


def rollout_seed(seed: int | None, task_id: str, sample_index: int) -> int | None:
    """A stable 31-bit seed for one rollout from the run's ``seed`` (``None`` stays ``None``):
    the same on every machine and process, different for each task and sample."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{task_id}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def task_payload(row: TaskRow, sample_index: int, seed: int | None) -> dict[str, Any]:
    """The dict an agent receives (keys :data:`TASK_PAYLOAD_FIELDS`): ``task_id``, ``prompt``,
    ``ground_truth``, ``metadata``, and the per-sample ``sample_index`` (0 .. group_size-1) and
    ``seed`` (``None`` unless the run has a seed). A fresh copy for each rollout, so an agent
    may change it."""
    return {
        "task_id": row.task_id,
        "prompt": row.prompt,
        "ground_truth": copy.deepcopy(row.ground_truth),
        "metadata": copy.deepcopy(row.metadata),
        "sample_index": sample_index,
        "seed": seed,
    }


def use_database(db: str | os.PathLike[str] | None) -> str | None:
    """Record into ``db`` from now on (other settings kept); with ``None``, the database
    recording is configured with. Returns that path, or ``None`` when no file is written."""
    import agent_rl_plugin.tracing as tracing  # the recorder (OpenTelemetry): only for runs that record

    if db is not None:
        path = os.fspath(db)
        config = tracing.STATE.config
        if config is None:
            tracing.configure(db_path=path)
        elif config.db_path != path:
            tracing.configure(config, db_path=path)
        return path
    config = tracing.current_config()
    return config.db_path if config.enable_rl else None


def store_tasks(rows: Sequence[TaskRow], db: str | None) -> None:
    """Insert or replace ``rows`` in ``db``'s ``tasks`` table (nothing when ``db`` is None)."""
    if db is None or not rows:
        return
    write_tasks(db, list(rows))


__all__ = [
    "PER_SAMPLE_FIELDS",
    "TASK_PAYLOAD_FIELDS",
    "BadLine",
    "TaskFileError",
    "TaskRow",
    "describe_bad",
    "load_tasks",
    "rollout_seed",
    "store_tasks",
    "task_payload",
    "use_database",
]
