"""``agent-rl loop``: run a closed training loop (:func:`agent_rl_plugin.loop.train_loop`) from a
config file and/or flags, showing held-out success per round; ``--json`` prints the rounds.
``--run NAME`` names the loop (``--name`` is its old, hidden spelling), ``-o/--out`` its folder
(``--output-dir``, hidden); the base model loads offline unless ``--allow-download``."""

from __future__ import annotations

import time
from typing import Any, Optional

import typer

from agent_rl_plugin.cli.common import JsonOption, UserError, console, err_console, print_json, print_rows
from agent_rl_plugin.hookspecs import hookimpl


def round_line(row: Any) -> str:
    """One human line for a finished round."""
    heldout = "-" if row.heldout_success is None else f"{row.heldout_success:.2f}"
    train = "" if row.train_success is None else f"  train success {row.train_success:.2f}"
    took = sum(row.seconds.values())
    status = "" if row.status == "done" else f"  [{row.status}]"
    bar = "#" * round((row.heldout_success or 0) * 20)
    return f"round {row.round:>2}  held-out success {heldout} {bar:<20}{train}  {took:5.1f} s{status}"


def print_rounds(result: Any, title: str) -> None:
    """The per-round table: success, and wall seconds of the two big phases and in all (every
    phase and the policy version: ``--json`` or the ``loop_rounds`` table)."""
    rows = [
        [
            r.round,
            r.status,
            "" if r.train_success is None else f"{r.train_success:.2f}",
            "" if r.heldout_success is None else f"{r.heldout_success:.2f}",
            f"{r.seconds.get('rollouts', 0):.1f}",
            f"{r.seconds.get('train', 0):.1f}",
            f"{sum(r.seconds.values()):.1f}",
        ]
        for r in result.rounds
    ]
    print_rows(["round", "status", "train", "held-out", "rollouts s", "train s", "total s"], rows, title=title)


def run_with_progress(config: Any, *, quiet: bool) -> Any:
    """Run the loop printing one line per round and the phase in progress (on stderr when
    ``quiet``: stdout stays JSON; the phase only on a terminal)."""
    from agent_rl_plugin.loop import train_loop

    out = err_console if quiet else console
    started = time.perf_counter()
    out.print(
        f"loop {config.loop_id()}: {config.env}, {config.method}, {config.rounds} rounds of "
        f"{config.group_size} rollouts per start; held-out success is greedy, on starts never trained on",
        highlight=False,
        markup=False,
    )
    with out.status("starting", spinner="dots") as status:

        def on_phase(round_number: int, phase: str) -> None:
            status.update(f"round {round_number}: {phase}")

        def on_round(row: Any) -> None:
            out.print(round_line(row), highlight=False, markup=False)

        result = train_loop(config, progress=False, on_round=on_round, on_phase=on_phase)
    out.print(f"done in {time.perf_counter() - started:.1f} s", highlight=False, markup=False)
    return result


def loop(
    config_file: Optional[str] = typer.Option(None, "--config", "-c", help="A YAML or JSON file of loop settings."),
    env: Optional[str] = typer.Option(None, "--env", help="Environment: grid or keydoor."),
    method: Optional[str] = typer.Option(None, "--method", help="Advantages: grpo, rloo, dr_grpo or gigpo."),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, help="Training rounds."),
    group_size: Optional[int] = typer.Option(None, "--group-size", min=2, help="Rollouts per training start."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Seed (model, sampling, training)."),
    model: Optional[str] = typer.Option(
        None, "--model", "-m", help="Base model: a local directory or a cached name (default: a tiny one)."
    ),
    allow_download: Optional[bool] = typer.Option(
        None,
        "--allow-download/--no-allow-download",
        metavar="",
        show_default=False,
        help="Download --model from the Hugging Face hub when it is neither local nor cached (default: offline).",
    ),
    output_dir: Optional[str] = typer.Option(None, "--out", "-o", help="Where adapters and the database go."),
    output_dir_old: Optional[str] = typer.Option(None, "--output-dir", hidden=True),  # the old spelling of --out
    db: Optional[str] = typer.Option(None, "--db", help="DuckDB file (default: OUT/loop.duckdb)."),
    name: Optional[str] = typer.Option(None, "--run", help="Loop id; running the same id again resumes it."),
    name_old: Optional[str] = typer.Option(None, "--name", hidden=True),  # the old spelling of --run
    json_output: bool = JsonOption,
) -> None:
    """Train an agent's policy in closed rounds: rollouts -> rewards -> advantages -> LoRA -> reload -> eval."""
    from agent_rl_plugin.loop import LoopConfig, load_loop_config

    flags: dict[str, Any] = dict(
        env=env,
        method=method,
        rounds=rounds,
        group_size=group_size,
        seed=seed,
        model=model,
        allow_download=allow_download,
        output_dir=output_dir or output_dir_old,
        db=db,
        name=name or name_old,
    )
    if config_file:
        config = load_loop_config(config_file, **flags)
    else:
        config = LoopConfig(**{k: v for k, v in flags.items() if v is not None})
    from agent_rl_plugin.policy import PolicyError
    from agent_rl_plugin.train.loading import cli_hint

    try:
        result = run_with_progress(config, quiet=json_output)
    except PolicyError as exc:  # the base model did not load: the fix in flag words
        raise UserError(str(exc), cli_hint(exc.hint)) from None
    if json_output:
        print_json(result.to_dict())
        return
    print_rounds(result, f"loop {result.loop_id} ({result.db_path})")


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("loop")(loop)
