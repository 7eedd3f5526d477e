"""``agent-rl import chats FILE.jsonl``: saved conversations become rollouts you can score.

Each line is an OpenAI-format conversation: a bare list of messages, or an object with
``messages`` and optionally ``task_id``, ``group_id``, ``metadata``, ``reward`` (a number or
``{"name": value}``), ``model`` and ``agent``. Each becomes one rollout whose steps are its
assistant turns (LLM calls) and tool results (tool calls matched by ``tool_call_id``), with the
rewards emitted. Import is all or nothing unless ``--skip-bad``; importing a file twice makes
new rollouts unless ``--dedupe`` (lines whose content hash was imported before are skipped).
See ``docs/rollouts.md``.
"""

from __future__ import annotations

from typing import Optional

import typer

from agent_rl_plugin.cli.common import DbOption, JsonOption, db_path, print_json
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Import history recorded elsewhere as rollouts.", no_args_is_help=True)


@app.command("chats")
def chats(
    file: str = typer.Argument(..., help="JSONL file: one OpenAI-format conversation per line."),
    db: str = DbOption,
    task_key: Optional[str] = typer.Option(
        None,
        "--task-key",
        help="Dotted key of each line object holding the task id when it has no task_id (e.g. metadata.ticket).",
    ),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Import the good lines and report the bad ones."),
    dedupe: bool = typer.Option(
        False, "--dedupe", help="Skip lines whose content was imported into this database before."
    ),
    json_output: bool = JsonOption,
) -> None:
    """Record each conversation of FILE as a rollout (LLM and tool steps, emitted rewards)."""
    from agent_rl_plugin import tracing
    from agent_rl_plugin.rollouts.chat_import import ChatImportError, import_chats
    from agent_rl_plugin.rollouts.tasks import describe_bad
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        report = import_chats(file, db=path, task_key=task_key, dedupe=dedupe, skip_bad=skip_bad)
    except ChatImportError as exc:
        tracing.shutdown()
        fail_plain(str(exc), exc.hint)
    except StoreError as exc:
        tracing.shutdown()
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or None)
    tracing.shutdown()  # flushes and releases the database file
    if json_output:
        print_json(report.to_dict())
        return
    say(
        f"Imported {report.imported} conversations from {file} into {report.database} as rollouts "
        f"({report.llm_calls} LLM calls, {report.tool_calls} tool calls, {report.rewards} rewards)."
    )
    if report.duplicates:
        say(f"Skipped {report.duplicates} already imported (--dedupe).")
    if report.bad:
        say(f"Skipped {describe_bad(file, report.bad)}")
    if report.imported:
        say(f"Next: agent-rl score --db {report.database}")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="import")
