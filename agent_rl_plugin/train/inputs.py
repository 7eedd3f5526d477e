"""Checks of a training run's inputs before anything heavy loads: :func:`check_model_path`
(a base model found offline, or downloads allowed) and :func:`load_jsonl_dataset` (a dataset file
written by ``build_*_dataset`` / ``agent-rl dataset build``).

Errors carry ``hint`` (the fix) and ``option`` (the argument to change: ``"model"``,
``"dataset_file"``), so a caller such as the command line can say it in its own words.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

from agent_rl_plugin.train.common import TrainError

E = TypeVar("E", bound=Exception)


def with_hint(error: E, hint: str | None, option: str | None = None) -> E:
    """``error`` with ``hint`` (the fix) and ``option`` (the argument at fault) attached."""
    error.hint = hint  # type: ignore[attr-defined]
    error.option = option  # type: ignore[attr-defined]
    return error


def check_model_path(model: str, allow_download: bool | None = None) -> None:
    """A local model directory must exist and hold config.json; ``org/name`` (not found
    locally) must be in the Hugging Face cache unless downloads are allowed
    (:func:`agent_rl_plugin.train.loading.resolve_model`). Raises
    :class:`~agent_rl_plugin.train.loading.ModelNotFoundError` (a
    :class:`~agent_rl_plugin.train.config.TrainConfigError`) naming where it looked."""
    from agent_rl_plugin.train.loading import resolve_model

    resolve_model(model, allow_download=allow_download)


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
