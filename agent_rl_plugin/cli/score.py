"""``agent-rl score``: run reward plugins over stored rollouts into the ``rewards`` table.

Every registered reward (built-in or installed) scores the selected rollouts, each in a worker
process with a timeout; results become episode rows (``step_index`` NULL) and step rows. Running
it again skips what is already scored (same rollout content, reward version and parameters);
``--rescore`` writes new rows anyway. Exit code 0 only when every reward succeeded on every
rollout; failures are error rows, listed by
``agent-rl query "select * from rewards where error is not null"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn, Optional

import typer
from pydantic import ValidationError
from rich import box
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agent_rl_plugin.cli.common import (
    DbOption,
    JsonOption,
    UserError,
    console,
    db_path,
    err_console,
    fail,
    print_json,
)
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.hookspecs import hookimpl

ERRORS_QUERY = 'agent-rl query "select * from rewards where error is not null"'


def say(text: str) -> None:
    """Print plain text (no markup, no wrapping inside words or paths) on stdout."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def fail_plain(message: str, hint: str | None = None) -> NoReturn:
    """:func:`~agent_rl_plugin.cli.common.fail` for text that is not rich markup (SQL, errors)."""
    fail(escape(message), escape(hint) if hint else None)


def load_config_file(path: str | None) -> RLConfig:
    """An :class:`RLConfig` from a TOML or JSON file (``[rewards.NAME]`` tables), over the
    environment; ``RLConfig.from_env()`` when ``path`` is None."""
    if path is None:
        return RLConfig.from_env()
    file = Path(path)
    if not file.is_file():
        raise UserError(f"no config file at {path}", "pass a .toml or .json file with [rewards.NAME] tables")
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            try:
                import tomllib  # Python 3.11+
            except ModuleNotFoundError:  # pragma: no cover - Python 3.10
                try:
                    import tomli as tomllib  # type: ignore[no-redef]
                except ModuleNotFoundError:
                    raise UserError(
                        "reading TOML needs Python 3.11 or the tomli package", "use a .json config"
                    ) from None
            data = tomllib.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError
        raise UserError(f"cannot parse {path}: {exc}", "check the file's syntax") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a table/object, e.g. [rewards.efficiency] weight = 0.5")
    try:
        return RLConfig.from_env(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(
            f"bad config {path}: {where}: {first['msg']}", "reward settings go under [rewards.NAME]"
        ) from None


def _failure_line(report: Any) -> str:
    parts = []
    for stats in report.failures():
        tried = stats.scored + stats.errors + stats.not_applicable
        example = stats.error_examples[0] if stats.error_examples else "error"
        parts.append(f"reward {stats.name!r} failed on {stats.errors} of {tried} rollouts ({example})")
    for plugin, message in report.registration_errors.items():
        parts.append(f"plugin {plugin!r} could not register its rewards ({message})")
    return "; ".join(parts)


def score_command(
    db: str = DbOption,
    plugin: Optional[list[str]] = typer.Option(
        None,
        "--plugin",
        "--reward",
        "-p",
        help="Reward name (or plugin name: all its rewards) to run; repeat for several. Default: all.",
    ),
    where: Optional[str] = typer.Option(
        None, "--where", "-w", help="SQL condition over the rollouts view, e.g. \"task_id = 'shop-0'\"."
    ),
    rescore: bool = typer.Option(False, "--rescore", help="Score again rollouts already scored (new rows)."),
    workers: int = typer.Option(2, "--workers", min=0, help="Worker processes; 0 runs in-process without timeouts."),
    timeout: float = typer.Option(30.0, "--timeout", min=0.001, help="Seconds per rollout (per group in batch mode)."),
    stop_after_timeouts: int = typer.Option(
        3,
        "--stop-after-timeouts",
        min=0,
        help="Stop a reward whose first N rollouts all timed out (its others get 'not run' error rows); 0: never.",
    ),
    config: Optional[str] = typer.Option(None, "--config", help="TOML or JSON file with [rewards.NAME] settings."),
    json_output: bool = JsonOption,
) -> None:
    """Score rollouts with the installed reward plugins and write the rows into `rewards`."""
    from agent_rl_plugin.rewards.registry import RewardRegistrationError
    from agent_rl_plugin.rewards.runner import ScoringError, score
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    try:
        settings = load_config_file(config)
        with Progress(
            TextColumn("[bold]scoring[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=json_output,
        ) as bar:
            task = bar.add_task("scoring", total=None)
            report = score(
                path,
                rewards=plugin or None,
                where=where,
                rescore=rescore,
                workers=workers,
                timeout_s=timeout,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                config=settings,
                stop_after_timeouts=stop_after_timeouts,
            )
    except (ScoringError, UserError) as exc:
        fail_plain(str(exc), getattr(exc, "hint", None))
    except RewardRegistrationError as exc:
        fail_plain(str(exc))
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or None)
    if json_output:
        print_json(report.to_dict())
    elif report.rollouts == 0:
        say(f"No rollouts to score in {path}" + (f" matching {where!r}" if where else "") + ".")
    elif not report.rewards:
        say("No reward plugins are registered: install one (see `agent-rl plugins`).")
    else:
        table = Table(title="rewards", header_style="bold", box=box.SIMPLE, pad_edge=False, collapse_padding=True)
        table.add_column("reward", no_wrap=True)
        for column in ("scored", "steps", "skipped", "n/a", "errors"):
            table.add_column(column, justify="right", no_wrap=True)
        table.add_column("plugin, version", overflow="fold")
        for s in report.rewards.values():
            table.add_row(
                escape(s.name),
                str(s.scored),
                str(s.step_rows),
                str(s.skipped),
                str(s.not_applicable),
                f"[red]{s.errors}[/]" if s.errors else "0",
                escape(f"{s.plugin} {s.plugin_version}"),
            )
        console.print(table)
        say(
            f"{report.rollouts} rollouts, {report.rows_written} rows written in {report.elapsed_s:.2f} s "
            f"({report.rollouts_per_s:.0f} rollouts/s)."
        )
    if not report.ok:
        hint = f"see the rows: {ERRORS_QUERY}" + (f" --db {path}" if db else "")
        fail_plain(_failure_line(report), hint)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("score")(score_command)
