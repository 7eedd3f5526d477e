"""Training configs in YAML or TOML files: :func:`load_config_file`, :func:`dump_config` and
:func:`config_template`.

File layout (YAML ``.yaml``/``.yml`` read with ``yaml.safe_load``; TOML ``.toml``)::

    method: grpo            # kto | grpo | offline_grpo | gigpo (optional when the caller names it)
    model: ./models/base    # fields of the method's config, at top level ...
    train:                  # ... and/or in a `train` table ...
      learning_rate: 1e-5
    grpo:                   # ... and/or in a table named by the method
      num_generations: 8

Contract:

* Methods and their configs (:mod:`agent_rl_plugin.train.methods`): ``kto`` ->
  :class:`~agent_rl_plugin.train.config.KTOTrainConfig`, ``grpo`` ->
  :class:`~agent_rl_plugin.train.grpo_config.GRPOTrainConfig`, ``offline_grpo`` ->
  :class:`~agent_rl_plugin.train.grpo_config.OfflineGRPOTrainConfig`, ``gigpo`` -> the offline
  config with ``advantage_level='step'`` (``-`` and ``_`` are interchangeable in method and key
  names).
* The schema is generated from the config class (:func:`schema`): the keys are its fields, the
  types their annotations, and a field declared with ``choices`` accepts only those values
  (:func:`agent_rl_plugin.train.fields.option`).
* Values are merged from the top level, then the ``train`` table, then the method's table (a
  later place wins), then ``overrides`` (CLI flags; ``None`` values are ignored). Tables named by
  another method are ignored, so one file can hold a section per method; when neither the file
  nor the caller names the method, the one method table present names it.
* The ``method`` argument (the CLI subcommand) must agree with the file's ``method``
  (``offline_grpo`` and ``gigpo`` agree, giving ``gigpo``); otherwise, and for an unknown key, a
  value of the wrong type or a config that fails validation,
  :class:`~agent_rl_plugin.train.config.TrainConfigError` is raised naming the file and the field
  (unknown keys come with the closest valid name and the list of valid names; a value outside a
  field's choices with the allowed values).
* Coercion: YAML 1.1 and TOML quirks are absorbed: ``"1e-5"`` (a string in YAML) becomes a float,
  ``3.0`` or ``"3"`` an int field's 3, ``"yes"``/``"false"`` a bool, ``"none"``/``"null"`` (TOML has
  no null) ``None`` for a field that accepts it, a single string a one-element list, and YAML's
  ``no`` (read as ``False``) for ``save_strategy`` the string ``"no"``. Relative paths are kept
  as written (relative to the working directory, like the CLI flags).
* :func:`dump_config` writes every field (``method`` first) so that :func:`load_config_file` gives
  an equal config back; :func:`config_template` gives a commented template of a method's fields
  with their defaults.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import typing
from pathlib import Path
from typing import Any, Mapping, Union

from agent_rl_plugin.train.config import TrainConfigError
from agent_rl_plugin.train.fields import REQUIRED, TrainOption, train_options
from agent_rl_plugin.train.methods import (
    METHODS,
    PRESETS,
    AnyTrainConfig,
    method_of_config,
    normalize_method,
)

#: Method names that may be given for the same config (``gigpo`` is offline GRPO at step level).
_COMPATIBLE = {("offline_grpo", "gigpo"): "gigpo", ("gigpo", "offline_grpo"): "gigpo"}
YAML_SUFFIXES = (".yaml", ".yml")
TOML_SUFFIXES = (".toml",)
_NONE_WORDS = ("none", "null", "~")
_TRUE_WORDS = ("true", "yes", "on", "1")
_FALSE_WORDS = ("false", "no", "off", "0")


def _agree(from_caller: str | None, from_file: str | None, path: str) -> str | None:
    if from_caller is None or from_file is None or from_caller == from_file:
        return from_caller or from_file
    if (from_caller, from_file) in _COMPATIBLE:
        return _COMPATIBLE[(from_caller, from_file)]
    raise TrainConfigError(
        f"{path}: the file is a {from_file!r} config but {from_caller!r} training was asked for; "
        f"change `method` in the file or run `agent-rl train {from_file.replace('_', '-')}`"
    )


# -- reading ----------------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any]:
    suffix = path.suffix.lower()
    if not path.is_file():
        raise TrainConfigError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    if suffix in YAML_SUFFIXES:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TrainConfigError(f"{path} is not valid YAML: {exc}") from None
    elif suffix in TOML_SUFFIXES:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TrainConfigError(f"{path} is not valid TOML: {exc}") from None
    else:
        raise TrainConfigError(f"{path}: unknown config format {suffix!r}; use .yaml, .yml or .toml")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TrainConfigError(f"{path}: the top level must be a mapping of config fields, got {type(data).__name__}")
    return data


def _key(name: Any) -> str:
    return str(name).strip().replace("-", "_")


def schema(method: str) -> dict[str, TrainOption]:
    """The keys a config file of ``method`` may hold (every field of its config class, the
    method's preset fields included) -> their declaration (type, allowed values)."""
    return {o.name: o for o in train_options(METHODS[normalize_method(method)])}


def _unknown_keys_error(unknown: list[str], valid: list[str], method: str, where: str) -> TrainConfigError:
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return TrainConfigError(
        f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
        f"valid fields for {method}: {', '.join(valid)}"
    )


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def coerce_value(name: str, value: Any, tp: Any) -> Any:
    """``value`` converted to the field type ``tp`` (see the module contract); raises
    :class:`TrainConfigError` naming ``name`` when it cannot be."""
    origin = typing.get_origin(tp)
    if origin is Union:
        options = typing.get_args(tp)
        if type(None) in options and (
            value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS)
        ):
            return None
        # exact type matches first, so that a str stays a str in Union[bool, str, None]
        for option in options:
            if option is not type(None) and typing.get_origin(option) is None and type(value) is option:
                return value
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce_value(name, value, option)
            except TrainConfigError:
                continue
        raise TrainConfigError(f"{name}: expected {_type_name(tp)}, got {value!r}")
    if value is None:
        raise TrainConfigError(f"{name}: expected {_type_name(tp)}, got null (this field cannot be none)")
    if origin is list:
        (item_type,) = typing.get_args(tp) or (Any,)
        if isinstance(value, str) and value.strip().lower() in _NONE_WORDS + ("",):
            return []
        items = [value] if isinstance(value, (str, int, float)) else value
        if not isinstance(items, (list, tuple)):
            raise TrainConfigError(f"{name}: expected a list of {_type_name(item_type)}, got {value!r}")
        return [coerce_value(f"{name}[{i}]", item, item_type) for i, item in enumerate(items)]
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS + _FALSE_WORDS:
            return value.strip().lower() in _TRUE_WORDS
        raise TrainConfigError(f"{name}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise TrainConfigError(f"{name}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            text = value.strip().replace("_", "")
            try:
                return int(text)
            except ValueError:
                try:
                    number = float(text)
                except ValueError:
                    number = math.nan
                if math.isfinite(number) and number.is_integer():
                    return int(number)
        raise TrainConfigError(f"{name}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise TrainConfigError(f"{name}: expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip().replace("_", ""))
            except ValueError:
                pass
        raise TrainConfigError(f"{name}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, bool):
            if name == "save_strategy" and value is False:
                return "no"  # YAML 1.1 reads an unquoted `no` as false
            raise TrainConfigError(f"{name}: expected a string, got {value!r} (quote it in YAML)")
        if isinstance(value, (str, int, float)):
            return value if isinstance(value, str) else str(value)
        raise TrainConfigError(f"{name}: expected a string, got {value!r}")
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise TrainConfigError(f"{name}: expected {_type_name(tp)}, got {value!r}")


def _collect(data: Mapping[str, Any], method: str | None, path: str) -> tuple[str, dict[str, Any]]:
    """``(method, values)`` merged from the top level, ``train`` and the method's table."""
    data = {_key(k): v for k, v in data.items()}
    file_method = data.pop("method", None)
    if file_method is not None:
        file_method = normalize_method(file_method)
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    top = {k: v for k, v in data.items() if not isinstance(v, dict)}
    method_tables = [k for k in tables if k in METHODS or k == "offline"]
    resolved = _agree(method, file_method, path)
    if resolved is None and len(method_tables) == 1:
        resolved = normalize_method(method_tables[0])
    if resolved is None:
        raise TrainConfigError(
            f"{path}: no training method: add `method: kto|grpo|offline_grpo|gigpo` to the file, "
            "or name it (the method argument; on the command line, agent-rl train <method>)"
        )
    values = dict(top)
    for name in tables:
        if name != "train" and name not in method_tables:
            values[name] = tables[name]  # reported below as an unknown key
    applicable = {resolved, "offline_grpo"} if resolved == "gigpo" else {resolved}
    ordered = sorted(
        (t for t in method_tables if normalize_method(t) in applicable), key=lambda t: normalize_method(t) == resolved
    )
    for name in ["train"] + ordered:
        table = tables.get(name)
        if table is not None:
            values.update({_key(k): v for k, v in table.items()})
    return resolved, values


def build_config(method: str, values: Mapping[str, Any], *, where: str = "config") -> AnyTrainConfig:
    """A config of ``method`` from ``values`` (field name -> value, coerced to the field types);
    raises :class:`TrainConfigError` for unknown keys, wrong types and invalid values."""
    method = normalize_method(method)
    cls = METHODS[method]
    options = schema(method)
    values = {_key(k): v for k, v in values.items()}
    unknown = [k for k in values if k not in options]
    if unknown:
        raise _unknown_keys_error(unknown, list(options), method, where)
    kwargs = {name: coerce_value(name, value, options[name].type) for name, value in values.items()}
    for name, value in kwargs.items():
        choices = options[name].choices
        if choices and value not in choices:
            raise TrainConfigError(
                f"{where}: {name}: expected one of {', '.join(repr(c) for c in choices)}, got {value!r}"
            )
    for name, preset in PRESETS.get(method, {}).items():
        value = kwargs.setdefault(name, preset)
        if value != preset:
            raise TrainConfigError(
                f"{where}: {name} {value!r} contradicts method {method!r}, which sets {name}={preset!r}; "
                f"remove {name}, or use another method"
            )
    try:
        return cls(**kwargs)
    except TrainConfigError as exc:
        raise TrainConfigError(f"{where}: {exc}") from None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def load_config_file(
    path: str | os.PathLike[str],
    method: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
) -> AnyTrainConfig:
    """Read a YAML or TOML training config (see the module contract for the layout, the merge
    order and the coercions). ``method``: the method asked for (the CLI subcommand), which must
    agree with the file's; ``overrides``: values that win over the file's (``None`` ignored);
    ``defaults``: values used only where neither the file nor ``overrides`` gives one (e.g. a
    generated ``output_dir``); an empty string or null in the file, as a template writes a
    field it leaves to the user, counts as not given. Raises :class:`TrainConfigError`."""
    path = Path(path)
    data = _read(path)
    wanted = normalize_method(method) if method is not None else None
    resolved, values = _collect(data, wanted, str(path))
    for key, value in (defaults or {}).items():
        if value is not None and _blank(values.get(_key(key))):
            values[_key(key)] = value
    for key, value in (overrides or {}).items():
        if value is not None:
            values[_key(key)] = value
    return build_config(resolved, values, where=str(path))


# -- writing ----------------------------------------------------------------------------------


def _format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        fmt = fmt.lower()
        if fmt in ("yaml", "yml"):
            return "yaml"
        if fmt == "toml":
            return "toml"
        raise TrainConfigError(f"format must be 'yaml' or 'toml', got {fmt!r}")
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in TOML_SUFFIXES:
        return "toml"
    raise TrainConfigError(f"{path}: cannot tell the format from {suffix!r}; use .yaml, .yml or .toml")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".enai") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TrainConfigError(f"cannot write {value!r} ({type(value).__name__}) to TOML")


def _yaml_value(value: Any) -> str:
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def _config_values(config: Any) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


#: What a template says after a required field it leaves empty.
_TEMPLATE_NOTES = {
    "model": "required: a local model directory or a cached model name (or give --model)",
    "output_dir": "empty: the command line's default, ./runs/<method>-<timestamp> (./runs/NAME with --run NAME)",
}


def _render(method: str, cls: type, values: Mapping[str, Any], fmt: str, *, comments: bool) -> str:
    lines: list[str] = []
    if comments:
        lines += [
            f"# agent-rl training config: {method} ({cls.__name__}).",
            "# Fields left none are filled from the detected hardware or derived (see the help of each field).",
            "",
        ]
    sep = " = " if fmt == "toml" else ": "
    lines.append(f"method{sep}{_toml_value(method) if fmt == 'toml' else method}")
    options = {o.name: o for o in train_options(cls)}
    for name, value in values.items():
        declared = options[name]
        if comments:
            lines.append("")
            lines.append(f"# {declared.help}")
        if value is None and comments and declared.required:
            note = _TEMPLATE_NOTES.get(name, "required")
            lines.append(f'{name}{sep}""  # {note}')
        elif value is None:
            if fmt == "yaml":
                lines.append(f"{name}: null")
            elif declared.default is None:
                lines.append(f"# {name} = none (the default)")
            else:
                lines.append(f'{name} = "none"')  # TOML has no null; load_config_file reads "none" as None
        else:
            lines.append(f"{name}{sep}{_toml_value(value) if fmt == 'toml' else _yaml_value(value)}")
    return "\n".join(lines) + "\n"


def dump_config(config: AnyTrainConfig, path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """Write every field of ``config`` (``method`` first) as YAML or TOML (``fmt``, else from the
    suffix) to ``path``, creating its folder; :func:`load_config_file` reads back an equal
    config. Returns the path."""
    path = Path(path)
    fmt = _format(path, fmt)
    method = method_of_config(config)
    text = _render(method, type(config), _config_values(config), fmt, comments=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def config_template(method: str, fmt: str = "yaml", values: Mapping[str, Any] | None = None) -> str:
    """A commented template of ``method``'s config: each field's help as a comment above the
    field set to its default (``values`` fill or replace some, e.g. ``model`` and ``output_dir``,
    which have no default). YAML templates load as they are once ``model`` and ``output_dir``
    are filled; in TOML, fields whose default is none are commented out."""
    method = normalize_method(method)
    fmt = _format(Path("template"), fmt)
    cls = METHODS[method]
    fields = {o.name: None if o.default is REQUIRED else o.default for o in train_options(cls)}
    fields.update(PRESETS.get(method, {}))
    given = {_key(k): v for k, v in (values or {}).items()}
    unknown = [k for k in given if k not in fields]
    if unknown:
        raise _unknown_keys_error(unknown, list(fields), method, "config_template")
    fields.update(given)
    return _render(method, cls, fields, fmt, comments=True)


__all__ = [
    "METHODS",
    "PRESETS",
    "build_config",
    "coerce_value",
    "config_template",
    "dump_config",
    "load_config_file",
    "method_of_config",
    "normalize_method",
    "schema",
]
