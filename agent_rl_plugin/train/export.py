"""Exporting trained LoRA adapters: :func:`merge_adapter` (a merged model that loads with plain
``transformers``, no peft), :func:`export_adapter` (the adapter alone), :func:`adapter_of_run`
(a recorded run's adapter and base model from the store) and :func:`directory_stats`.

Contract:

* ``adapter_path`` is a directory holding ``adapter_config.json`` (saved by
  ``PeftModel.save_pretrained`` / ``trainer.save_model``: ``<output_dir>/adapter`` or a
  ``checkpoint-N``); a run's ``output_dir`` is accepted too when ``<output_dir>/adapter`` is one.
* The base model is ``base_model`` when given, else the adapter's ``base_model_name_or_path``.
* ``out_dir`` must not exist or be empty, unless ``overwrite=True``: then its old content is
  replaced, but only after the new export succeeded (it is written next to it first), and never
  when ``out_dir`` is (or contains) the adapter, the base model, the working directory, the
  home directory or a filesystem root.
* Everything a user can fix raises :class:`ExportError` (a ``ValueError``) with a ``hint``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import warnings
from pathlib import Path
from typing import Any

from agent_rl_plugin.errors import AgentRLError

ADAPTER_CONFIG = "adapter_config.json"
#: Files of a trainer checkpoint that an adapter-only export leaves out.
TRAINER_STATE_FILES = ("optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "training_args.bin")
_TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "tokenizer.model", "vocab.json")
_DTYPES = ("auto", "float32", "float16", "bfloat16")


class ExportError(AgentRLError, ValueError):
    """An export that cannot be done as asked; ``hint`` says how to fix it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


# -- finding the adapter and the base -----------------------------------------------------------


def resolve_adapter_dir(adapter_path: str | os.PathLike[str]) -> Path:
    """The directory holding ``adapter_config.json``: ``adapter_path`` itself or its ``adapter``
    subdirectory (a run's output directory). Raises :class:`ExportError`."""
    path = Path(adapter_path).expanduser()
    if not path.exists():
        raise ExportError(
            f"adapter path {path} does not exist", "give the adapter directory (<output_dir>/adapter) of a training run"
        )
    if not path.is_dir():
        raise ExportError(f"adapter path {path} is not a directory", "give the directory the adapter was saved to")
    if (path / ADAPTER_CONFIG).is_file():
        return path
    if (path / "adapter" / ADAPTER_CONFIG).is_file():
        return path / "adapter"
    raise ExportError(
        f"{path} is not a LoRA adapter (no {ADAPTER_CONFIG})",
        "give the adapter directory saved by agent-rl train (<output_dir>/adapter) or a checkpoint-N directory",
    )


def adapter_base_model(adapter_dir: str | os.PathLike[str]) -> str | None:
    """``base_model_name_or_path`` from the adapter's ``adapter_config.json`` (``None`` if unset)."""
    path = Path(adapter_dir) / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(
            f"cannot read {path}: {exc}", "the adapter directory looks damaged; save the adapter again"
        ) from None
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    return str(base) if base else None


def _looks_local(name: str) -> bool:
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or os.path.isabs(name)


def _check_base(base: str | None, adapter_dir: Path) -> str:
    if not base:
        raise ExportError(
            f"the adapter {adapter_dir} does not name its base model (no base_model_name_or_path)",
            "pass the base model with --base (base_model=)",
        )
    expanded = os.path.expanduser(base)
    if os.path.isdir(expanded):
        if not os.path.isfile(os.path.join(expanded, "config.json")):
            raise ExportError(
                f"base model directory {base} has no config.json",
                "give a directory saved with save_pretrained (--base)",
            )
        return expanded
    if os.path.exists(expanded) or _looks_local(base):
        raise ExportError(
            f"base model {base} does not exist", "pass the base model's directory or name with --base (base_model=)"
        )
    return base  # a model name: found in the Hugging Face cache, or downloaded when allowed


# -- output directory ---------------------------------------------------------------------------


def _is_same_or_parent(parent: Path, child: Path) -> bool:
    return child == parent or parent in child.parents


def _check_out_dir(out_dir: Path, overwrite: bool, protected: list[Path]) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"output path {out_dir} exists and is not a directory", "choose another --out")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ExportError(
            f"output directory {out_dir} exists and is not empty", "choose another --out, or pass --overwrite"
        )
    resolved = out_dir.resolve()
    guarded = [p.resolve() for p in protected] + [Path.cwd().resolve(), Path.home().resolve()]
    for path in guarded:
        if _is_same_or_parent(resolved, path):
            raise ExportError(
                f"refusing to write to {out_dir}: it is or contains {path}", "choose a new, separate --out directory"
            )
    if resolved == Path(resolved.anchor):
        raise ExportError(
            f"refusing to write to the filesystem root {out_dir}", "choose a new, separate --out directory"
        )


def _staging_dir(out_dir: Path) -> Path:
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.export-", dir=out_dir.parent))


def _publish(staging: Path, out_dir: Path) -> None:
    """Move the finished ``staging`` directory to ``out_dir`` (replacing what is there)."""
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        out_dir.rename(old)
        staging.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staging.rename(out_dir)


# -- exports ------------------------------------------------------------------------------------


def _torch_dtype(dtype: Any) -> Any:
    if dtype is None or not isinstance(dtype, str):
        return dtype
    name = dtype.strip().lower().replace("torch.", "")
    name = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16"}.get(name, name)
    if name not in _DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}", f"use one of {', '.join(_DTYPES)}")
    if name == "auto":
        return "auto"
    import torch

    return getattr(torch, name)


def merge_adapter(
    adapter_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    base_model: str | None = None,
    dtype: Any = None,
    overwrite: bool = False,
    allow_download: bool | None = None,
) -> str:
    """Merge a LoRA adapter into its base model and save the result with its tokenizer to
    ``out_dir``; returns ``out_dir``. The result loads with
    ``transformers.AutoModelForCausalLM.from_pretrained(out_dir)`` (no peft, no
    ``adapter_config.json``). ``base_model`` overrides the adapter's base; ``dtype``
    (``"float32"``, ``"bfloat16"``, ``"float16"``, ``"auto"`` or a ``torch.dtype``; ``None``:
    transformers' default) is the dtype the base is loaded, merged and saved in. The tokenizer is
    the adapter directory's when one was saved there, else the base model's. The base loads
    offline unless ``allow_download`` (:mod:`agent_rl_plugin.train.loading`). See the module
    contract for ``out_dir`` and ``overwrite``."""
    adapter_dir = resolve_adapter_dir(adapter_path)
    base = _check_base(base_model or adapter_base_model(adapter_dir), adapter_dir)
    out = Path(out_dir).expanduser()
    protected = [adapter_dir] + ([Path(base)] if os.path.isdir(base) else [])
    _check_out_dir(out, overwrite, protected)
    torch_dtype = _torch_dtype(dtype)

    from peft import PeftModel

    from agent_rl_plugin.train.loading import ModelNotFoundError, load_causal_lm, load_tokenizer

    kwargs = {} if torch_dtype is None else {"dtype": torch_dtype}
    try:
        model = load_causal_lm(base, allow_download=allow_download, **kwargs)
    except ModelNotFoundError as exc:
        raise ExportError(f"cannot load the base model {base}: {exc}", exc.hint) from None
    except OSError as exc:
        raise ExportError(
            f"cannot load the base model {base}: {exc}", "pass the base model's local directory with --base"
        ) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # deprecations inside peft/transformers
            merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    except (ValueError, RuntimeError, KeyError) as exc:
        raise ExportError(
            f"the adapter {adapter_dir} does not fit the base model {base}: {exc}",
            "pass the base model the adapter was trained on with --base",
        ) from None
    tokenizer_source = str(adapter_dir) if any((adapter_dir / f).is_file() for f in _TOKENIZER_FILES) else base
    try:
        tokenizer = load_tokenizer(tokenizer_source, allow_download=allow_download, pad=False)
    except (OSError, ValueError) as exc:
        raise ExportError(
            f"cannot load the tokenizer from {tokenizer_source}: {exc}", "pass the base model with --base"
        ) from None
    staging = _staging_dir(out)
    try:
        merged.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        _publish(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return str(out)


def export_adapter(
    adapter_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, overwrite: bool = False
) -> str:
    """Copy the adapter (and the tokenizer saved with it) to ``out_dir`` without a checkpoint's
    trainer state (optimizer, scheduler, RNG states); returns ``out_dir``. Loads with
    ``peft.PeftModel.from_pretrained(base, out_dir)``."""
    adapter_dir = resolve_adapter_dir(adapter_path)
    out = Path(out_dir).expanduser()
    _check_out_dir(out, overwrite, [adapter_dir])
    if _is_same_or_parent(adapter_dir.resolve(), out.resolve()):
        raise ExportError(
            f"refusing to copy the adapter {adapter_dir} into itself ({out})", "choose an --out outside the adapter"
        )

    def skip(directory: str, names: list[str]) -> list[str]:
        return [n for n in names if n in TRAINER_STATE_FILES or n.startswith("rng_state")]

    staging = _staging_dir(out)
    try:
        shutil.copytree(adapter_dir, staging, ignore=skip, dirs_exist_ok=True)
        _publish(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return str(out)


# -- the store ----------------------------------------------------------------------------------


def adapter_of_run(db_path: str | os.PathLike[str], run_id_or_prefix: str) -> tuple[str, str]:
    """``(adapter_path, base_model)`` of the training run whose ``run_id`` is
    ``run_id_or_prefix`` or starts with it, from the store's ``training_runs`` table. Raises
    :class:`ExportError` when no run or several runs match, or the run saved no adapter, and
    the store's ``StoreError`` when the database cannot be opened."""
    import duckdb

    from agent_rl_plugin.store.connection import open_reader

    wanted = (run_id_or_prefix or "").strip()
    if not wanted:
        raise ExportError(
            "give a run id (or its first characters)", 'list runs with: agent-rl query "select * from training_runs"'
        )
    connection = open_reader(db_path)
    try:
        try:
            rows = connection.execute(
                "SELECT run_id, adapter_path, model, status, error FROM training_runs "
                "WHERE starts_with(run_id, ?) ORDER BY run_id",
                [wanted],
            ).fetchall()
        except duckdb.CatalogException:
            raise ExportError(f"{db_path} has no training_runs table", "train with agent-rl train first") from None
    finally:
        connection.close()
    exact = [r for r in rows if r[0] == wanted]
    rows = exact or rows
    if not rows:
        raise ExportError(
            f"no training run {wanted!r} in {db_path}",
            'list runs with: agent-rl query "select run_id, method, model, finished_at from training_runs"',
        )
    if len(rows) > 1:
        ids = ", ".join(r[0] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
        raise ExportError(
            f"{len(rows)} training runs start with {wanted!r}: {ids}", "give more characters of the run id"
        )
    run_id, adapter, model, status, error = rows[0]
    if not adapter:
        reason = f" (status {status}: {error})" if status != "ok" else ""
        raise ExportError(
            f"training run {run_id} saved no adapter{reason}", "export a run that finished with status ok"
        )
    if not model:
        raise ExportError(
            f"training run {run_id} has no base model recorded", "pass --adapter and --base instead of --run"
        )
    return str(adapter), str(model)


# -- what was written ---------------------------------------------------------------------------


def _safetensors_numel(path: Path) -> int:
    """Elements of every tensor in a safetensors file, read from its header only."""
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in info.get("shape", []):
            count *= int(dim)
        total += count
    return total


def directory_stats(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"path", "bytes", "files", "parameters"}`` of an exported directory: the size on disk,
    the file names, and the number of parameters stored in its ``*.safetensors`` files (read from
    their headers; ``None`` when there are none)."""
    root = Path(path)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    weights = [p for p in files if p.suffix == ".safetensors"]
    try:
        parameters: int | None = sum(_safetensors_numel(p) for p in weights) if weights else None
    except (OSError, ValueError, struct.error):
        parameters = None
    return {
        "path": str(root),
        "bytes": sum(p.stat().st_size for p in files),
        "files": [str(p.relative_to(root)) for p in files],
        "parameters": parameters,
    }


__all__ = [
    "ExportError",
    "adapter_base_model",
    "adapter_of_run",
    "directory_stats",
    "export_adapter",
    "merge_adapter",
    "resolve_adapter_dir",
]
