"""The options of ``agent-rl train kto|grpo|gigpo``, generated from the training options'
declarations (:mod:`agent_rl_plugin.train.fields`): a config field declared with a ``flag``
becomes a typer option with that flag, short flag, type, allowed values and help, in the
"Training settings" panel of ``--help``; a ``bool`` field (``Optional[bool]`` too) becomes a
``--x/--no-x`` flag with no value shown (an ``Optional[bool]`` left out stays ``None``: auto).

:func:`with_settings` decorates a command function that takes ``settings: dict[str, Any]``:
typer sees the generated options in place of ``settings``; the function receives the values
given on the command line (field name -> value, with the fields a flag implies, e.g.
``--save-steps`` turns on ``save_strategy='steps'``), options not given left out, so a
``--config`` file or the field default decides them.
"""

from __future__ import annotations

import functools
import inspect
import typing
from enum import Enum
from typing import Any, Callable, Optional

import typer

from agent_rl_plugin.train.fields import REQUIRED, TrainOption
from agent_rl_plugin.train.methods import method_options

PANEL = "Training settings (the same keys work in a --config file)"
#: What the command line adds to a field's help.
CLI_NOTES = {"output_dir": "Default: ./runs/<method>-<timestamp>, or ./runs/NAME with --run NAME."}
SETTINGS = "settings"


def command_options(*methods: str) -> list[TrainOption]:
    """The options with a flag of ``methods`` (a command may train several, e.g. ``grpo`` and
    ``offline_grpo``), each once, in declaration order."""
    found: dict[str, TrainOption] = {}
    for method in methods:
        for declared in method_options(method):
            if declared.flag and declared.name not in found:
                found[declared.name] = declared
    return list(found.values())


def option_help(declared: TrainOption) -> str:
    """The ``--help`` text of an option: the field's help, what the flag implies, CLI notes and
    the field's default (not typer's: the option itself defaults to "not given")."""
    parts = [declared.help]
    if declared.implies:
        parts.append("Given here, it also sets " + ", ".join(f"{k}={v!r}" for k, v in declared.implies.items()) + ".")
    if declared.name in CLI_NOTES:
        parts.append(CLI_NOTES[declared.name])
    shown = _shown_default(declared)
    if shown:
        parts.append(f"Default: {shown}.")
    return " ".join(parts)


def _cli_type(declared: TrainOption) -> Any:
    if declared.choices:
        return Enum(f"{declared.name}_choices", {c: c for c in declared.choices}, type=str)  # type: ignore[misc]
    tp = declared.type
    if typing.get_origin(tp) is typing.Union:
        options = [t for t in typing.get_args(tp) if t is not type(None)]
        tp = options[0] if len(options) == 1 else str  # e.g. bool | str: a directory or 'latest'
    return tp


def _shown_default(declared: TrainOption) -> str | None:
    """The default worth showing: not for required fields, ``None`` (the help says what it
    means) or a flag that implies other fields (not giving it means more than its default)."""
    if declared.default is REQUIRED or declared.default is None or declared.implies:
        return None
    return str(declared.default)


def typer_parameter(declared: TrainOption, prefix: str = "") -> inspect.Parameter:
    """The keyword-only parameter, typed and with its ``typer.Option``, of one option
    (``prefix``: put before its help, e.g. which mode of the command it belongs to)."""
    tp = _cli_type(declared)
    flag = declared.flag
    assert flag is not None
    decls = [f"{flag}/--no-{flag[2:]}"] if tp is bool else [flag]
    if declared.short:
        decls.append(declared.short)
    info = typer.Option(
        None,
        *decls,
        help=(prefix + " " if prefix else "") + option_help(declared),
        show_default=False,
        rich_help_panel=PANEL,
        metavar="" if tp is bool else None,  # a --x/--no-x flag takes no value: no <bool> in --help
    )
    return inspect.Parameter(declared.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=Optional[tp])


def with_settings(
    *methods: str, modes: dict[str, str] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the generated options of ``methods`` (see the module doc). ``modes``:
    method -> the label of the command's mode that trains it (e.g. ``"--offline:"``); an
    option only some of the methods have gets their labels before its help."""
    options = command_options(*methods)
    owners = {o.name: [m for m in methods if o.name in {d.name for d in command_options(m)}] for o in options}

    def prefix(declared: TrainOption) -> str:
        if not modes or len(owners[declared.name]) == len(methods):
            return ""
        return " ".join(modes[m] for m in owners[declared.name] if m in modes)

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func)
        if SETTINGS not in signature.parameters:
            raise TypeError(f"{func.__name__} needs a `{SETTINGS}` parameter for the generated options")
        clash = [o.name for o in options if o.name in signature.parameters]
        if clash:
            raise TypeError(f"{func.__name__}: parameters {clash} clash with generated training options")
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name == SETTINGS:
                parameters += [typer_parameter(o, prefix(o)) for o in options]
            else:
                parameters.append(
                    parameter.replace(
                        annotation=hints.get(parameter.name, parameter.annotation), kind=inspect.Parameter.KEYWORD_ONLY
                    )
                )

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            settings: dict[str, Any] = {}
            for declared in options:
                value = kwargs.pop(declared.name)
                if value is None:
                    continue
                settings[declared.name] = value.value if isinstance(value, Enum) else value
                for name, implied in declared.implies.items():
                    settings.setdefault(name, implied)
            return func(**kwargs, **{SETTINGS: settings})

        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        del command.__wrapped__  # typer must read the generated signature, not the function's
        return command

    return decorate


#: Options every ``agent-rl train`` command shares (here, not with one command, so that a command's
#: module imports no other command's).
ConfigOption = typer.Option(None, "--config", "-c", help="A YAML/TOML training config; options given here win over it.")
WhereOption = typer.Option(None, "--where", "-w", help="SQL condition over the rollouts view.")
SqlOption = typer.Option(None, "--sql", help="A full read-only query returning rollout_id.")
RunOption = typer.Option(
    None,
    "--run",
    help="Name this training run: its run_id in training_runs, and its output directory (./runs/NAME) "
    "unless --out is given. Default: a new id.",
)


__all__ = [
    "CLI_NOTES",
    "PANEL",
    "ConfigOption",
    "RunOption",
    "SqlOption",
    "WhereOption",
    "command_options",
    "option_help",
    "typer_parameter",
    "with_settings",
]
