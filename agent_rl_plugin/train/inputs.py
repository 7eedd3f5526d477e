"""Checks of a training run's inputs before anything heavy loads: :func:`check_model_path`
(a base model that ``from_pretrained`` can find) and :func:`load_jsonl_dataset` (a dataset file
written by ``build_*_dataset`` / ``agent-rl dataset build``).

Errors carry ``hint`` (the fix) and ``option`` (the argument to change: ``"model"``,
``"dataset_file"``), so a caller such as the command line can say it in its own words.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

from agent_rl_plugin.train.common import TrainError
from agent_rl_plugin.train.config import TrainConfigError

E = TypeVar("E", bound=Exception)


def with_hint(error: E, hint: str | None, option: str | None = None) -> E:
    """``error`` with ``hint`` (the fix) and ``option`` (the argument at fault) attached."""
    error.hint = hint  # type: ignore[attr-defined]
    error.option = option  # type: ignore[attr-defined]
    return error


def check_model_path(model: str) -> None:
    """A local model directory must exist and hold config.json; ``org/name`` (one slash, not
    found locally) is left to ``from_pretrained`` as a model name. Raises
    :class:`~agent_rl_plugin.train.config.TrainConfigError`."""
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        if not os.path.isfile(os.path.join(expanded, "config.json")):
            raise with_hint(
                TrainConfigError(f"model directory {model} has no config.json"),
                "give a directory saved with save_pretrained",
                "model",
            )
        return
    looks_like_name = not model.startswith((".", "/", "~")) and model.count("/") <= 1 and "\\" not in model
    if os.path.exists(expanded) or not looks_like_name:
        raise with_hint(
            TrainConfigError(f"model path {model} does not exist (or is not a directory)"),
            "give a local model directory saved with save_pretrained, or a model name such as Qwen/Qwen2.5-0.5B-Instruct",
            "model",
        )


def load_jsonl_dataset(
    path: str, kind: str = "KTO", columns: tuple[str, ...] = ("prompt", "completion", "label")
) -> Any:
    """A ``datasets.Dataset`` from a JSONL file (one row per line) whose rows have ``columns``;
    raises :class:`~agent_rl_plugin.train.common.TrainError` naming the file (and the line)."""
    # `datasets` (and pyarrow under it) load only when a dataset file is read
    from datasets import Dataset

    hint = f"give a .jsonl file with one {kind} row ({', '.join(columns)}) per line"
    if not os.path.isfile(path):
        raise with_hint(TrainError(f"dataset file {path} does not exist"), hint, "dataset_file")
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise with_hint(TrainError(f"{path} line {number} is not JSON"), hint, "dataset_file") from None
    if not rows:
        raise with_hint(TrainError(f"{path} has no rows"), hint, "dataset_file")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise with_hint(
            TrainError(f"{path} rows have no {', '.join(missing)} (they have {', '.join(rows[0])})"),
            hint,
            "dataset_file",
        )
    return Dataset.from_list(rows)


__all__ = ["check_model_path", "load_jsonl_dataset", "with_hint"]
