"""``agent-rl tasks import FILE`` and ``agent-rl tasks list``: tasks with their ground truth.

A task file is JSONL (one object per line), JSON (a list of objects) or CSV (a header row).
Each task has ``task_id`` (required), ``prompt``, ``ground_truth`` (any JSON; ``answer`` is
accepted too) and ``metadata`` (an object); any other key goes into ``metadata``. In CSV,
``ground_truth`` and ``metadata`` cells holding JSON are parsed (``42`` is a number, ``Paris``
stays text). Rows replace the stored task with the same ``task_id``.

Import is all or nothing: if any line is bad, the error names each bad line and nothing is
written, unless ``--skip-bad`` (then the good lines are imported and the bad ones reported).
Rewards read ground truth from the rollout's metadata first, then from this table.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import typer

from agent_rl_plugin.store.transaction import arrow_transaction
from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, db_path, print_json, print_rows
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Import tasks with ground truth, and list them.", no_args_is_help=True)

_KNOWN = ("task_id", "prompt", "ground_truth", "answer", "metadata")
MAX_REPORTED = 10


@dataclass
class TaskRow:
    task_id: str
    prompt: str | None
    ground_truth: Any
    metadata: dict[str, Any]
    line: int


@dataclass
class BadLine:
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


def parse_tasks_file(path: str | Path) -> tuple[list[TaskRow], list[BadLine]]:
    """The tasks of a ``.jsonl``/``.json``/``.csv`` file, and its bad lines (1-based numbers;
    for a JSON list, the item number)."""
    file = Path(path)
    if not file.is_file():
        raise UserError(f"no task file at {path}", "pass a .jsonl, .json or .csv file")
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
            raise UserError(f"{path}: the CSV header has no task_id column", "first row: task_id,prompt,ground_truth")
        for row in reader:
            if None in row:
                bad.append(BadLine(reader.line_num, "more cells than header columns"))
                continue
            add({k: (v if v != "" else None) for k, v in row.items()}, reader.line_num, csv_cells=True)
    elif suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UserError(f"{path}: invalid JSON ({exc})", "a .json task file is a list of objects") from None
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            data = data["tasks"]
        if not isinstance(data, list):
            raise UserError(f"{path}: expected a list of task objects", "or use JSONL: one object per line")
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
    """INSERT OR REPLACE the tasks (the last one wins for a repeated id) in one transaction;
    returns (new, replaced)."""
    from agent_rl_plugin.store import connect_writer

    latest = {t.task_id: t for t in tasks}
    if not latest:
        return 0, 0
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    table = pa.table(
        {
            "task_id": pa.array(list(latest), pa.string()),
            "prompt": pa.array([t.prompt for t in latest.values()], pa.string()),
            "ground_truth": pa.array(
                [None if t.ground_truth is None else json.dumps(t.ground_truth, ensure_ascii=False) for t in latest.values()],
                pa.string(),
            ),
            "metadata": pa.array([json.dumps(t.metadata, ensure_ascii=False) for t in latest.values()], pa.string()),
            "imported_at": pa.array([now] * len(latest), pa.timestamp("us")),
        }
    )
    connection = connect_writer(path)
    try:
        with arrow_transaction(connection, {"_arl_new_tasks": table}):
            replaced = connection.execute(
                "SELECT count(*) FROM tasks WHERE task_id IN (SELECT task_id FROM _arl_new_tasks)"
            ).fetchone()[0]
            connection.execute(
                "INSERT OR REPLACE INTO tasks (task_id, prompt, ground_truth, metadata, imported_at) "
                "SELECT task_id, prompt, ground_truth, metadata, imported_at FROM _arl_new_tasks"
            )
    finally:
        connection.close()
    return len(latest) - replaced, replaced


def _bad_summary(file: str, bad: list[BadLine]) -> str:
    shown = "; ".join(f"line {b.line}: {b.error}" for b in bad[:MAX_REPORTED])
    more = f"; and {len(bad) - MAX_REPORTED} more" if len(bad) > MAX_REPORTED else ""
    return f"{len(bad)} bad line{'s' if len(bad) != 1 else ''} in {file}: {shown}{more}"


@app.command("import")
def import_tasks(
    file: str = typer.Argument(..., help="A .jsonl, .json or .csv file of tasks."),
    db: str = DbOption,
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Import the good lines and report the bad ones."),
    json_output: bool = JsonOption,
) -> None:
    """Import tasks (task_id, prompt, ground_truth, metadata), replacing those with the same id."""
    path = db_path(db)
    try:
        tasks, bad = parse_tasks_file(file)
        if bad and not skip_bad:
            raise UserError(_bad_summary(file, bad) + "; nothing was imported",
                            "fix those lines, or pass --skip-bad to import the others")
        new, replaced = write_tasks(path, tasks)
    except UserError as exc:
        fail_plain(str(exc), exc.hint)
    summary = {
        "imported": new + replaced, "new": new, "replaced": replaced, "database": path,
        "bad": [{"line": b.line, "error": b.error} for b in bad],
    }
    if json_output:
        print_json(summary)
        return
    say(f"Imported {new + replaced} tasks into {path} ({new} new, {replaced} replaced).")
    if bad:
        say(f"Skipped {_bad_summary(file, bad)}")


@app.command("list")
def list_tasks(
    db: str = DbOption,
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="How many tasks."),
    json_output: bool = JsonOption,
) -> None:
    """The imported tasks with their ground truth and how many rollouts each has."""
    sql = (
        "select t.task_id, t.prompt, t.ground_truth, t.metadata, "
        "(select count(*) from rollouts r where r.task_id = t.task_id) as rollouts, t.imported_at "
        f"from tasks t order by t.task_id limit {int(limit)}"
    )
    try:
        columns, rows = run_query(db_path(db), sql)
    except UserError as exc:
        fail_plain(str(exc), exc.hint)
    print_rows(columns, rows, "json" if json_output else "table", title="tasks")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="tasks")
