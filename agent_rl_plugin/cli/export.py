"""``agent-rl export``: export a trained LoRA adapter.

    agent-rl export --adapter runs/kto-x/adapter --out exported/adapter          # the adapter alone
    agent-rl export --adapter runs/kto-x/adapter --merge --out exported/merged   # merged into its base
    agent-rl export --run 3f2a --merge --out exported/merged [--db FILE]         # a recorded run's adapter
    agent-rl export ... --base MODEL --dtype bfloat16 --overwrite --json

``--run`` has no short flag: ``-r`` is ``--reward`` in every command (docs/cli.md).

With ``--merge`` the adapter is merged into its base model (:func:`agent_rl_plugin.train.export.
merge_adapter`) and the result loads with plain ``AutoModelForCausalLM.from_pretrained``; without
it the adapter directory is copied without a checkpoint's trainer state. What was written (path,
size on disk, parameter count) is printed, or given as JSON with ``--json``.

The group takes subcommands too (``agent-rl export parquet ...``, from
:mod:`agent_rl_plugin.cli.export_parquet`); the options above belong to ``export`` itself. With
neither ``--adapter`` nor ``--run`` and no subcommand, the help is printed.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, console, db_path, fail, print_json
from agent_rl_plugin.cli.export_parquet import parquet_command
from agent_rl_plugin.hookspecs import hookimpl

app = typer.Typer(help="Export trained adapters (the adapter alone, or merged into its base model) and recorded data.")
app.command("parquet")(parquet_command)


def human_size(size: int) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def run_export(
    *,
    adapter: str | None = None,
    run: str | None = None,
    db: str | None = None,
    out: str | None = None,
    merge: bool = False,
    base: str | None = None,
    dtype: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Do the export and return its summary (``kind``, ``path``, ``bytes``, ``parameters``,
    ``files``, ``adapter_path``, ``base_model``, ``run_id``, ``seconds``). Raises
    :class:`UserError`."""
    from agent_rl_plugin.store.errors import StoreError
    from agent_rl_plugin.train.export import (
        ExportError,
        adapter_base_model,
        adapter_of_run,
        directory_stats,
        export_adapter,
        merge_adapter,
        resolve_adapter_dir,
    )

    if adapter and run:
        raise UserError("give --adapter or --run, not both")
    if not adapter and not run:
        raise UserError("give the adapter with --adapter DIR, or a recorded run with --run RUN_ID")
    if not out:
        raise UserError("give the output directory with --out DIR")
    if dtype and not merge:
        raise UserError("--dtype applies to --merge only", "add --merge, or drop --dtype")
    started = time.perf_counter()
    try:
        recorded_base = None
        if run:
            adapter, recorded_base = adapter_of_run(db_path(db), run)
        adapter_dir = resolve_adapter_dir(adapter or "")
        base_model = base or recorded_base or adapter_base_model(adapter_dir)
        if merge:
            with contextlib.redirect_stdout(sys.stderr):  # library chatter; stdout stays for the summary
                path = merge_adapter(adapter_dir, out, base_model=base_model, dtype=dtype, overwrite=overwrite)
        else:
            path = export_adapter(adapter_dir, out, overwrite=overwrite)
    except ExportError as exc:
        raise UserError(str(exc), exc.hint) from None
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        raise UserError(message, hint or None) from None
    stats = directory_stats(path)
    return {
        "kind": "merged" if merge else "adapter",
        "path": path,
        "bytes": stats["bytes"],
        "parameters": stats["parameters"],
        "files": stats["files"],
        "adapter_path": str(adapter_dir),
        "base_model": base_model,
        "run_id": run,
        "seconds": round(time.perf_counter() - started, 2),
    }


def print_summary(summary: dict[str, Any]) -> None:
    what = "merged model" if summary["kind"] == "merged" else "adapter"
    params = summary["parameters"]
    params_text = "unknown" if params is None else f"{params:,}"
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    say(f"Wrote the {what} to {summary['path']} in {summary['seconds']} s.")
    say(f"  size on disk: {human_size(summary['bytes'])} in {len(summary['files'])} files")
    say(f"  parameters: {params_text}" + (" (LoRA)" if summary["kind"] == "adapter" else ""))
    say(f"  adapter: {summary['adapter_path']}" + (f" (run {summary['run_id']})" if summary["run_id"] else ""))
    if summary["base_model"]:
        say(f"  base model: {summary['base_model']}")
    if summary["kind"] == "merged":
        say("  load it with: AutoModelForCausalLM.from_pretrained(path) (no peft needed)")
    else:
        say("  load it with: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), path)")


@app.callback(invoke_without_command=True)
def export_command(
    ctx: typer.Context,
    adapter: Optional[str] = typer.Option(
        None, "--adapter", "-a", help="Adapter directory (<output_dir>/adapter of a run)."
    ),
    run: Optional[str] = typer.Option(
        None,
        "--run",
        metavar="RUN",
        help="A recorded training run: its id, or the first characters of it (-r is --reward, not this).",
    ),
    db: str = DbOption,
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Directory to write (must not exist or be empty)."),
    merge: bool = typer.Option(False, "--merge", help="Merge the adapter into its base model (loads without peft)."),
    base: Optional[str] = typer.Option(
        None, "--base", help="Base model to merge into (default: the adapter's or the run's)."
    ),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="With --merge: float32, bfloat16, float16 or auto."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a non-empty --out directory."),
    json_output: bool = JsonOption,
) -> None:
    """Export a trained LoRA adapter (--adapter or --run) to --out, merged with --merge."""
    own_options = adapter or run or db or out or merge or base or dtype or overwrite or json_output
    if ctx.invoked_subcommand is not None:
        if own_options:
            fail(
                f"options given before `{ctx.invoked_subcommand}` belong to `agent-rl export` itself, "
                f"not to `agent-rl export {ctx.invoked_subcommand}`; put them after the subcommand",
                f"see agent-rl export {ctx.invoked_subcommand} --help",
            )
        return
    if not adapter and not run:
        console.print(ctx.get_help(), markup=False, highlight=False)
        raise typer.Exit(0)
    try:
        summary = run_export(
            adapter=adapter, run=run, db=db, out=out, merge=merge, base=base, dtype=dtype, overwrite=overwrite
        )
    except UserError as exc:
        fail(escape(str(exc)), escape(exc.hint) if exc.hint else None)
    if json_output:
        print_json(summary)
    else:
        print_summary(summary)


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="export")
