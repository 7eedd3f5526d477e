"""What the ``agent-rl train`` commands share: the config from the options given and an
optional ``--config`` file, the training errors in command-line words, the profile and warning
printers, and the summary.

The work itself (data, training, the record in ``training_runs`` / ``training_metrics``) is
:mod:`agent_rl_plugin.train.runs`; under ``accelerate launch`` / ``torchrun`` only the main
process prints and records (see :mod:`agent_rl_plugin.train.distributed`).
"""

from __future__ import annotations

import atexit
import gc
import os
from datetime import datetime
from typing import Any, Callable

from rich.markup import escape

from agent_rl_plugin.cli.common import UserError, console, db_path, err_console, fail, print_json
from agent_rl_plugin.store.errors import StoreError
from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.distributed import is_distributed, is_main_process, world_size
from agent_rl_plugin.train.inputs import check_model_path
from agent_rl_plugin.train.methods import new_config
from agent_rl_plugin.train.runs import run_errors

#: ``agent-rl train`` method -> the ``method`` of load_config_file and of training_runs.
METHODS = ("kto", "grpo", "offline_grpo", "gigpo")

#: The fix, in command-line words, for a training error about an argument (its ``option``).
CLI_HINTS = {
    "label_rule": "KTO needs both; try --label quantile or --label group, or change --threshold",
    "selection": "record and score rollouts first (agent-rl demo, agent-rl score), or widen --where/--sql",
    "where": "--where is a condition over the tasks table",
    "model_files": "check --model and --out",
    "model_download": "check the name, or give a local model directory with --model; to download it from the "
    "Hugging Face hub add --allow-download (or set AGENT_RL_ALLOW_DOWNLOAD=1)",
    "run": "choose another --run NAME, or add --resume latest to continue that run",
}


def say(text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def warn(text: str) -> None:
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def profile_printer(quiet: bool) -> Callable[[str], None]:
    """Where the hardware profile line goes: stdout, or stderr when stdout carries JSON."""
    target = err_console if quiet else console
    return lambda text: target.print(text, markup=False, highlight=False, soft_wrap=True)


def default_out(method: str, run_name: str | None = None) -> str:
    """``runs/NAME`` for a named run, else ``runs/<method>-<timestamp>``."""
    if run_name:
        return os.path.join("runs", run_name)
    return os.path.join("runs", f"{method.replace('_', '-')}-" + datetime.now().strftime("%Y%m%d-%H%M%S"))


def store_error(exc: Exception) -> UserError:
    message, _, hint = str(exc).partition(" Fix: ")
    return UserError(message, hint or getattr(exc, "hint", None))


def user_error(exc: Exception) -> UserError:
    """A training, dataset or store error as a :class:`UserError`, its fix in flag words."""
    if isinstance(exc, StoreError):
        return store_error(exc)
    hint = CLI_HINTS.get(getattr(exc, "option", None) or "", getattr(exc, "hint", None))
    return UserError(str(exc), hint)


def check_sources(*values: Any) -> None:
    """At most one data source (``--where``, ``--sql``, ``--dataset``) given."""
    if len([value for value in values if value]) > 1:
        raise UserError("give one of --where, --sql or --dataset, not several")


def build_config(method: str, config_file: str | None, settings: dict[str, Any], run_name: str | None = None) -> Any:
    """The config of ``method`` from ``config_file`` (if any), with the options given on the
    command line (``settings``) on top, and ``./runs/NAME`` (``run_name``) or
    ``./runs/<method>-<timestamp>`` where no output directory is given (an empty
    ``output_dir`` in the file, as a template writes it, counts as not given). The model must
    be found offline unless ``--allow-download``. Raises :class:`UserError`."""
    overrides = {k: v for k, v in settings.items() if v is not None}
    default_dir = default_out(method, run_name)
    try:
        if config_file:
            if not os.path.isfile(config_file):
                raise UserError(f"config file {config_file} does not exist", "give a .yaml/.yml/.toml file")
            from agent_rl_plugin.train.config_files import load_config_file

            config = load_config_file(
                config_file, method=method, overrides=overrides, defaults={"output_dir": default_dir}
            )
        else:
            if not overrides.get("model"):
                raise UserError("no model given", "pass --model PATH (or a --config file with model: PATH)")
            overrides.setdefault("output_dir", default_dir)
            config = new_config(method, **overrides)
        check_model_path(config.model, config.allow_download)
    except TrainConfigError as exc:
        raise user_error(exc) from None
    except TypeError as exc:  # an unknown field given programmatically
        raise UserError(str(exc)) from None
    if config.output_dir == default_dir and not run_name and is_distributed():
        # the timestamped default can differ between processes started a second apart
        raise UserError(
            f"{world_size()} training processes need one output directory, given explicitly",
            "pass --out DIR or --run NAME (or set output_dir in the --config file)",
        )
    return config


def source_db(db: str | None, needed: bool) -> str:
    """The database path when the data comes from the store (it must exist); else (a
    ``--dataset`` run) the database the run is recorded in, created when missing."""
    if not needed:
        return db_path(db)
    path = db_path(db)
    if not os.path.exists(path):
        raise UserError(f"database {path} does not exist", "record rollouts first (agent-rl demo), or pass --db")
    return path


_exit_freeze_registered = False


def freeze_heap_at_exit() -> None:
    """Freeze every object still tracked by the collector when the interpreter exits (once per
    process, however often it is called): a training command leaves ~450k objects of the
    training stack behind, and the interpreter's collections at exit scanned them all, ~1-3 s
    of a short run's wall time. Frozen, they are freed as modules are cleared, as before; only
    the collection of reference cycles at exit is skipped. Registered with :mod:`atexit`, so it
    runs after the handlers registered later (the store, telemetry flushes) and changes nothing
    in a process that keeps running (a test calling the command in-process)."""
    global _exit_freeze_registered
    if not _exit_freeze_registered:
        atexit.register(gc.freeze)
        _exit_freeze_registered = True


def report(run: Callable[[], dict[str, Any]], json_output: bool) -> None:
    """Run a command's work; print its summary (or JSON), or its error as one line plus the fix.
    The process's exit then skips the collection of the training stack (:func:`freeze_heap_at_exit`)."""
    freeze_heap_at_exit()
    try:
        summary = run()
    except UserError as exc:
        fail(escape(str(exc)), escape(exc.hint) if exc.hint else None)
    except run_errors() as exc:
        error = user_error(exc)
        fail(escape(str(error)), escape(error.hint) if error.hint else None)
    if not is_main_process():  # accelerate launch: one summary, from the process that recorded the run
        return
    if json_output:
        print_json(summary)
    else:
        print_summary(summary)


def print_summary(summary: dict) -> None:
    say(
        f"Trained {summary['method'].upper()} (LoRA) on {summary['rows']} rows from {summary['dataset']} "
        f"in {summary['seconds']} s."
    )
    if "labels" in summary:
        labels = summary["labels"]
        say(
            f"  labels: {labels['desirable']} desirable / {labels['undesirable']} undesirable "
            f"(weights {summary['weights']['desirable']:.3g} / {summary['weights']['undesirable']:.3g})"
        )
    loss = summary["final_loss"]
    first = summary["first_loss"]
    loss_text = "n/a" if loss is None else f"{loss:.4f}" + ("" if first is None else f" (first {first:.4f})")
    say(f"  steps: {summary['steps']}, final loss: {loss_text}")
    for line in summary.get("extra_lines", []):
        say(f"  {line}")
    for line in summary.get("warnings", []):
        say(f"  {line}")
    if summary.get("resumed_from"):
        say(f"  resumed from: {summary['resumed_from']}")
    say(f"  adapter: {summary['adapter_path']}")
    if summary["run_id"]:
        say(f"  run_id: {summary['run_id']} (select * from training_metrics where run_id = '{summary['run_id']}')")


__all__ = [
    "CLI_HINTS",
    "METHODS",
    "build_config",
    "check_sources",
    "default_out",
    "freeze_heap_at_exit",
    "print_summary",
    "profile_printer",
    "report",
    "say",
    "source_db",
    "store_error",
    "user_error",
    "warn",
]
