"""``agent-rl score``: run reward plugins over stored rollouts into the ``rewards`` table.

Every registered reward (built-in or installed) scores the selected rollouts, each in a worker
process with a timeout; results become episode rows (``step_index`` NULL) and step rows. Running
it again skips what is already scored (same rollout content, reward version and parameters);
``--rescore`` writes new rows anyway. Exit code 0 only when every reward succeeded on every
rollout; failures are error rows, listed by
``agent-rl query "select * from rewards where error is not null"``.

``-r/--reward NAME[=W]`` picks rewards to run (repeatable) and, with ``=W``, the weight they
count with in the combined episode reward; the weight of every reward run is recorded in the
store (``reward_weights``), so ``rollouts.total_reward`` applies exactly the weights shown.
``--plugin NAME`` runs all rewards of a plugin. ``--explain ROLLOUT`` (an id or a unique
prefix) scores nothing: it prints each component of that rollout's episode reward, its weight,
its contribution and the sum, which is ``rollouts.total_reward``.
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
from rich.text import Text

from agent_rl_plugin.cli.common import (
    DbOption,
    JsonOption,
    UserError,
    console,
    db_path,
    err_console,
    fail,
    parse_reward_items,
    print_json,
    print_rows,
)
from agent_rl_plugin.cli.table_layout import visible_text
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


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def explain_command(path: str, rollout: str, json_output: bool) -> None:
    """Print (or ``--json``) the explanation of one rollout's episode reward."""
    from agent_rl_plugin.rewards.weights import ExplainError, explain
    from agent_rl_plugin.store import open_reader

    connection = open_reader(path)
    try:
        result = explain(connection, rollout)
    except ExplainError as exc:
        fail_plain(str(exc), exc.hint)
    finally:
        connection.close()
    if json_output:
        print_json(result.to_dict())
        return
    table = Table(
        title=Text(f"episode reward of {visible_text(result.rollout_id)}"),
        header_style="bold",
        box=box.SIMPLE,
        pad_edge=False,
        collapse_padding=True,
    )
    for column, justify in (
        ("reward", "left"),
        ("value", "right"),
        ("weight", "right"),
        ("w x value / sum w", "right"),
    ):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("source", no_wrap=True)
    for c in result.components:
        weight = _number(c.weight) + ("" if c.weight_from == "recorded" else " (default)")
        table.add_row(
            Text(visible_text(c.name)),
            _number(c.value),
            weight,
            _number(c.contribution),
            Text(visible_text(c.source or "")),
        )
    console.print(table)
    if not result.components:
        say("This rollout has no usable episode-level reward: score it first (agent-rl score).")
    say(f"sum of weights: {_number(result.weight_sum)}")
    say(f"total_reward = sum(w x value) / sum(w) = {_number(result.total_reward)}")
    for name, counts in result.not_counted.items():
        say(f"not counted: {visible_text(name)}: {counts['error_rows']} error rows, {counts['step_rows']} step rows")


def score_command(
    db: str = DbOption,
    reward: Optional[list[str]] = typer.Option(
        None,
        "--reward",
        "-r",
        metavar="NAME[=W]",
        help="Reward to run, as NAME or NAME=WEIGHT (its weight in the combined episode reward, recorded "
        "in the store); repeat for several. Default: every reward that runs by default.",
    ),
    plugin: Optional[list[str]] = typer.Option(
        None,
        "--plugin",
        metavar="PLUGIN",
        help="Run every reward of this plugin (see `agent-rl plugins`); repeat for several.",
    ),
    explain_rollout: Optional[str] = typer.Option(
        None,
        "--explain",
        metavar="ROLLOUT",
        help="Score nothing; show how the episode reward of this rollout (id or unique prefix) is combined.",
    ),
    where: Optional[str] = typer.Option(
        None, "--where", "-w", help="SQL condition over the rollouts view, e.g. \"task_id = 'shop-0'\"."
    ),
    rescore: bool = typer.Option(False, "--rescore", help="Score again rollouts already scored (new rows)."),
    workers: int = typer.Option(
        2, "--concurrency", "-j", min=0, help="Worker processes; 0 runs in-process without timeouts."
    ),
    workers_alias: Optional[int] = typer.Option(None, "--workers", min=0, hidden=True),
    timeout: float = typer.Option(30.0, "--timeout", min=0.001, help="Seconds per rollout (per group in batch mode)."),
    stop_after_timeouts: int = typer.Option(
        3,
        "--stop-after-timeouts",
        min=0,
        help="Stop a reward whose first N rollouts all timed out (its others get 'not run' error rows); 0: never.",
    ),
    config: Optional[str] = typer.Option(
        None,
        "--config",
        "-c",
        metavar="FILE",
        help="TOML or JSON file with \\[rewards.NAME] settings (parameters and weight).",
    ),
    json_output: bool = JsonOption,
) -> None:
    """Score rollouts with the installed reward plugins and write the rows into `rewards`."""
    from agent_rl_plugin.rewards.registry import RewardRegistrationError
    from agent_rl_plugin.rewards.runner import ScoringError, score
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    if explain_rollout is not None:
        if reward or plugin or where or rescore or config:
            fail_plain(
                "--explain reads the stored rewards and scores nothing",
                "run `agent-rl score` with those options first, then --explain alone",
            )
        explain_command(path, explain_rollout, json_output)
        return
    if workers_alias is not None:
        workers = workers_alias
    try:
        names, weights = parse_reward_items(reward)
        names += [p for p in plugin or [] if p not in names]
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
                rewards=names or None,
                where=where,
                rescore=rescore,
                workers=workers,
                timeout_s=timeout,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                config=settings,
                stop_after_timeouts=stop_after_timeouts,
                weights=weights or None,
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
        _say_nothing_to_score(path, where)
    elif not report.rewards:
        say("No reward plugins are registered: install one (see `agent-rl plugins`).")
    else:
        columns = ["reward", "weight", "scored", "steps", "skipped", "n/a", "errors", "plugin, version"]
        rows = [
            (
                s.name,
                report.weights.get(s.name),
                s.scored,
                s.step_rows,
                s.skipped,
                s.not_applicable,
                s.errors,
                f"{s.plugin} {s.plugin_version}",
            )
            for s in report.rewards.values()
        ]
        print_rows(columns, rows, title="rewards")  # fits the terminal; full rows with --json
        say(
            f"{report.rollouts} rollouts, {report.rows_written} rows written in {report.elapsed_s:.2f} s "
            f"({report.rollouts_per_s:.0f} rollouts/s)."
        )
        say("total_reward = sum(weight x value) / sum(weight); per rollout: agent-rl score --explain ROLLOUT")
    if not report.ok:
        hint = f"see the rows: {ERRORS_QUERY}" + (f" --db {path}" if db else "")
        fail_plain(_failure_line(report), hint)


def _say_nothing_to_score(path: str, where: str | None) -> None:
    """Why nothing was scored, naming the cause: an empty store (and how to record rollouts),
    never blamed on ``--where``; else the filter that matched none of the stored rollouts."""
    from agent_rl_plugin.cli.query import run_query
    from agent_rl_plugin.rl.hints import RECORD_HINT

    _, rows = run_query(path, "select count(*) from rollouts")
    if not rows or not rows[0][0]:
        say(f"No rollouts to score: the store holds no rollouts ({path}). Fix: {RECORD_HINT}.")
        return
    matching = f" matching {where!r}" if where else ""
    say(f"No rollouts to score in {path}{matching} (the store holds {rows[0][0]}).")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("score")(score_command)
