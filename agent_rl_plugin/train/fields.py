"""One declaration per training option (TRL's typed configs are the model): a field of a config
dataclass made with :func:`option`, which carries its help text and, when the command line has
it, its flag. Everything else is generated from these fields:

* the config-file schema (:mod:`agent_rl_plugin.train.config_files`: the keys a file may hold,
  their types, the allowed values of choice fields);
* the options of ``agent-rl train kto|grpo|gigpo`` (:mod:`agent_rl_plugin.cli.train_options`);
* the options table of ``docs/training.md`` (:mod:`agent_rl_plugin.train.options_table`).

Contract of the field metadata (``dataclasses.fields(cls)[i].metadata``): ``help`` (always, one
sentence or two, in words that make sense from Python, a config file and the command line),
``flag`` and ``short`` (the command-line option, when there is one), ``choices`` (the allowed
values of a ``str`` field; :func:`check_choices` enforces them), ``implies`` (other fields the
command line sets when the flag is given, e.g. ``save_steps`` turns on
``save_strategy='steps'``) and ``required`` (no usable default: a template leaves it for the user).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence


class _Missing:
    def __repr__(self) -> str:
        return "<required>"


#: The ``default`` of a :class:`TrainOption` that has none (``required``).
REQUIRED = _Missing()


def option(
    default: Any = None,
    *,
    help: str,
    flag: str | None = None,
    short: str | None = None,
    choices: Sequence[str] | None = None,
    implies: Mapping[str, Any] | None = None,
    required: bool = False,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A dataclass field declaring one training option (see the module contract). ``factory``
    replaces ``default`` for mutable defaults (lists)."""
    metadata: dict[str, Any] = {"help": help}
    if flag is not None:
        if not flag.startswith("--"):
            raise ValueError(f"flag must start with '--', got {flag!r}")
        metadata["flag"] = flag
    if short is not None:
        metadata["short"] = short
    if choices is not None:
        metadata["choices"] = tuple(choices)
    if implies:
        metadata["implies"] = dict(implies)
    if required:
        metadata["required"] = True
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class TrainOption:
    """One declared option, as read back from a config class (:func:`train_options`)."""

    name: str
    type: Any
    default: Any
    help: str
    flag: Optional[str] = None
    short: Optional[str] = None
    choices: Optional[tuple[str, ...]] = None
    implies: Mapping[str, Any] = field(default_factory=dict)
    required: bool = False

    def type_name(self) -> str:
        """The type as a reader writes it: ``int``, ``float or none``, ``list of str`` ..."""
        return type_name(self.type)


def type_name(tp: Any) -> str:
    """``int``, ``float or none``, ``list of str``, ``bool, str or none`` for a field type."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        parts = [type_name(t) for t in typing.get_args(tp) if t is not type(None)]
        nullable = type(None) in typing.get_args(tp)
        if nullable:
            parts.append("none")
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return f"list of {type_name(item)}"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _default(f: dataclasses.Field) -> Any:
    if f.metadata.get("required"):
        return REQUIRED
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return REQUIRED


def train_options(cls: type) -> list[TrainOption]:
    """The declared options of config class ``cls``, in field order (base class fields first)."""
    hints = typing.get_type_hints(cls)
    options = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        options.append(
            TrainOption(
                name=f.name,
                type=hints[f.name],
                default=_default(f),
                help=meta.get("help", ""),
                flag=meta.get("flag"),
                short=meta.get("short"),
                choices=meta.get("choices"),
                implies=dict(meta.get("implies", {})),
                required=bool(meta.get("required", False)),
            )
        )
    return options


def check_choices(config: Any, error: Callable[[str], Exception]) -> None:
    """Raise ``error(message)`` when a field declared with ``choices`` holds another value."""
    for f in dataclasses.fields(config):
        choices = f.metadata.get("choices")
        value = getattr(config, f.name)
        if choices and value not in choices:
            allowed = ", ".join(repr(c) for c in choices)
            raise error(f"{f.name} must be one of {allowed}, got {value!r}")


__all__ = ["REQUIRED", "TrainOption", "check_choices", "option", "train_options", "type_name"]
