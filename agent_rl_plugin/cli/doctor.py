"""``agent-rl doctor``: is what the store holds fit for training? Each problem with a one-line fix.

Runs :func:`agent_rl_plugin.data.health.check_traces` (see docs/doctor.md) and prints a table of
the findings (one line per check, with the per-agent counts), then each finding's message,
example ids and fix; ``--json`` prints the report as JSON instead.

Exit codes: 0 when no check found an error (warnings and info findings may remain), 1 when any
check found an error (traces unfit for training), 2 when the checks could not run (a bad
option, ``--where`` or tokenizer, a database that cannot be opened, or any unexpected failure:
one line ``error: the checks could not run: ...``, never a traceback with exit code 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from agent_rl_plugin.cli.common import DbOption, JsonOption, console, db_path, fail, print_json
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    from agent_rl_plugin.data.health import HealthReport

#: Exit code when the checks could not run (Click's usage-error code).
USAGE_EXIT = 2
_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def doctor(
    db: str = DbOption,
    tokenizer: Optional[str] = typer.Option(
        None,
        "--tokenizer",
        help="Tokenizer (a local path or model id) to compare stored token ids with: completion ids "
        "against the recorded output, prompt ids against its chat template.",
    ),
    where: Optional[str] = typer.Option(
        None,
        "--where",
        "-w",
        help="Only rollouts matching this SQL condition over the rollouts view (store-wide span checks are skipped).",
    ),
    max_token_checks: int = typer.Option(
        2000, "--max-token-checks", min=0, help="Most LLM calls with stored token ids to compare (oldest first)."
    ),
    json_output: bool = JsonOption,
) -> None:
    """Check the recorded traces for what makes them unfit for training, with a fix for each.

    Exit code 0: no error found (warnings may remain); 1: errors found; 2: the checks could not run.
    """
    from agent_rl_plugin.data.health import check_traces

    path = db_path(db)
    try:
        report = check_traces(path, tokenizer=tokenizer, where=where, max_token_checks=max_token_checks)
    except AgentRLError as exc:
        message, _, inline = str(exc).partition(" Fix: ")
        fail(escape(message), escape(exc.hint or inline) if (exc.hint or inline) else None, code=USAGE_EXIT)
    except Exception as exc:  # a bug or an unforeseen store: a clear message and exit 2, not a traceback and 1
        fail(
            escape(f"the checks could not run: {type(exc).__name__}: {exc}"),
            "rerun without --tokenizer to see whether the tokenizer checks are the cause, and report this error",
            code=USAGE_EXIT,
        )
    if json_output:
        print_json(report.to_dict())
    else:
        _print(report)
    raise typer.Exit(report.exit_code)


def _print(report: HealthReport) -> None:
    """The report as a table that fits 80 columns, then each finding's details."""
    scope = f" where {report.where}" if report.where else ""
    console.print(
        f"[bold]Capture health[/] of {escape(report.database)}{escape(scope)}: {report.rollouts:,} rollouts, "
        f"{report.llm_calls:,} LLM calls, {report.spans:,} spans ({report.seconds:.2f} s)",
        highlight=False,
    )
    overall = report.overall()
    if not overall:
        console.print("[bold green]healthy[/]: every check passed.", highlight=False)
    else:
        table = Table(header_style="bold", show_lines=False)
        table.add_column("severity", no_wrap=True)
        table.add_column("check", no_wrap=True)
        table.add_column("count", justify="right", no_wrap=True)
        table.add_column("by agent", overflow="fold")
        for finding in overall:
            agents = report.by_agent(finding.code)
            by_agent = ", ".join(f"{name} {f.count:,}" for name, f in sorted(agents.items()))
            style = _STYLE.get(finding.severity, "")
            table.add_row(
                f"[{style}]{finding.severity}[/]",
                finding.code,
                f"{finding.count:,}/{finding.total:,}",
                escape(by_agent),
            )
        console.print(table)
        for finding in overall:
            style = _STYLE.get(finding.severity, "")
            console.print(
                f"[{style}]{finding.severity}[/] [bold]{finding.code}[/]: {escape(finding.message)}", highlight=False
            )
            if finding.examples:
                console.print(
                    Padding(f"e.g. {escape(', '.join(finding.examples))}", (0, 0, 0, 2), expand=False), highlight=False
                )
            console.print(Padding(f"[green]fix:[/] {escape(finding.fix)}", (0, 0, 0, 2), expand=False), highlight=False)
    if report.skipped:
        skipped = ", ".join(sorted(report.skipped))
        console.print(f"[dim]not checked: {escape(skipped)}[/]", highlight=False)
    errors, warnings = len(report.errors), len(report.warnings)
    console.print(
        f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"
        + (" (exit code 1)" if errors else ""),
        highlight=False,
    )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("doctor")(doctor)
