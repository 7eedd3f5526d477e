"""Loading a base model and its tokenizer, offline unless downloads are allowed: the one place
the package calls ``from_pretrained`` for a model, tokenizer or model config (the trainers, the
export, :class:`~agent_rl_plugin.policy.LocalPolicy`, the closed loop).

Contract:

* Offline by default: every load passes ``local_files_only=True``, so a model is found only as a
  local directory or in the Hugging Face cache, and nothing is downloaded. Downloads are allowed
  by ``allow_download=True`` (a field of every training config, ``--allow-download`` on the
  command line) or the environment variable :data:`ALLOW_DOWNLOAD_ENV` (``AGENT_RL_ALLOW_DOWNLOAD=1``).
* :func:`resolve_model` checks a model before anything heavy loads (no torch import): a local
  directory must hold ``config.json``; a hub name (``org/name``) must be in the Hugging Face cache
  unless downloads are allowed. Otherwise it raises :class:`ModelNotFoundError` at once (in
  milliseconds, where the hub's retries took about a minute) with a message naming where it
  looked (the local path it resolved, the cache folder) and, when a cached model has a close
  name, that name.
* The loaders (:func:`load_tokenizer`, :func:`load_causal_lm`, :func:`load_model_and_tokenizer`,
  :func:`load_model_config`) resolve first, then load; a load that still fails offline (a cached
  model missing a file) raises :class:`ModelNotFoundError` too.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

from agent_rl_plugin.downloads import (
    ALLOW_DOWNLOAD_ENV,
    downloads_allowed,
    hf_cache_dir,
    hub_offline,
    pretrained_kwargs,
)
from agent_rl_plugin.train.config import TrainConfigError


class ModelNotFoundError(TrainConfigError):
    """A base model that cannot be found without downloading it (or a local directory that is
    not a saved model). ``option``: ``"model"`` (a bad path: change the model) or
    ``"model_download"`` (a name not cached: fix it, or allow downloads); ``looked_in`` lists the
    places searched."""

    def __init__(
        self, message: str, hint: str | None = None, looked_in: tuple[str, ...] = (), option: str = "model"
    ) -> None:
        super().__init__(message, hint)
        self.looked_in = looked_in
        self.option = option


def _looks_like_name(model: str) -> bool:
    return not model.startswith((".", "/", "~")) and model.count("/") <= 1 and "\\" not in model


def cached_models(cache_dir: str | None = None) -> list[str]:
    """The model names (``org/name``) with a folder in the hub cache."""
    root = cache_dir or hf_cache_dir()
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    return sorted(e[len("models--") :].replace("--", "/") for e in entries if e.startswith("models--"))


def _in_cache(model: str, cache_dir: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model, "config.json", cache_dir=cache_dir)
    except ValueError:  # not a valid repo id (huggingface_hub's HFValidationError is a ValueError)
        return False
    return isinstance(found, str)


_ALLOW_HINT = "allow_download=True (or AGENT_RL_ALLOW_DOWNLOAD=1)"


def resolve_model(
    model: str | os.PathLike[str], *, allow_download: bool | None = None, need_config: bool = True
) -> str:
    """The model as ``from_pretrained`` should get it: a local directory (``~`` expanded) that
    holds ``config.json`` (any directory with ``need_config=False``: a tokenizer saved alone,
    e.g. next to an adapter), or a hub name that is cached (or any name when downloads are
    allowed). Raises :class:`ModelNotFoundError` naming where it looked (see the module doc)."""
    name = os.fspath(model)
    expanded = os.path.expanduser(name)
    local = os.path.abspath(expanded)
    if os.path.isdir(expanded):
        if need_config and not os.path.isfile(os.path.join(expanded, "config.json")):
            raise ModelNotFoundError(
                f"model directory {name} has no config.json", "give a directory saved with save_pretrained", (local,)
            )
        return expanded
    if os.path.exists(expanded) or not _looks_like_name(name):
        raise ModelNotFoundError(
            f"model path {name} does not exist (or is not a directory); looked for {local}",
            "give a local model directory saved with save_pretrained, or a model name such as "
            "Qwen/Qwen2.5-0.5B-Instruct",
            (local,),
        )
    if downloads_allowed(allow_download):
        return name
    cache = hf_cache_dir()
    if _in_cache(name, cache):
        return name
    close = difflib.get_close_matches(name, cached_models(cache), n=1, cutoff=0.8)
    suggestion = f"; did you mean {close[0]!r} (cached)?" if close else ""
    raise ModelNotFoundError(
        f"model {name!r} is not a local directory (looked for {local}) nor in the Hugging Face cache "
        f"({cache}), and downloads are off{suggestion}",
        f"check the name, or give a local model directory; to download it from the hub pass {_ALLOW_HINT}",
        (local, cache),
        "model_download",
    )


def cli_hint(hint: str | None) -> str | None:
    """A loading error's ``hint`` in command-line words (``--allow-download`` for the keyword)."""
    return hint.replace("allow_download=True", "--allow-download") if hint else hint


def _load(kind: str, loader: Any, model: str, allow_download: bool | None, **kwargs: Any) -> Any:
    source = resolve_model(model, allow_download=allow_download, need_config=kind != "tokenizer")
    try:
        with hub_offline(allow_download):
            return loader.from_pretrained(source, **pretrained_kwargs(allow_download), **kwargs)
    except OSError as exc:
        if downloads_allowed(allow_download):
            raise
        raise ModelNotFoundError(
            f"cannot load the {kind} of {model!r} offline: {str(exc).splitlines()[0]}",
            f"give a complete local model directory, or pass {_ALLOW_HINT} to download the missing files",
            (source,),
            "model_download",
        ) from None


def load_tokenizer(model: str | os.PathLike[str], *, allow_download: bool | None = None, pad: bool = True) -> Any:
    """The tokenizer of ``model`` (offline unless allowed); with ``pad`` a tokenizer without a pad
    token pads with its end-of-sequence token."""
    from transformers import AutoTokenizer

    tokenizer = _load("tokenizer", AutoTokenizer, os.fspath(model), allow_download)
    if pad and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(model: str | os.PathLike[str], *, allow_download: bool | None = None, **kwargs: Any) -> Any:
    """``AutoModelForCausalLM.from_pretrained(model, **kwargs)``, offline unless allowed.

    transformers looks for a PEFT ``adapter_config.json`` next to a model with keyword
    arguments of its own (``adapter_kwargs``), without ``local_files_only``: offline, a cached
    hub name would still cost a minute of hub retries there, so they get the same settings."""
    from transformers import AutoModelForCausalLM

    adapter_kwargs = {**pretrained_kwargs(allow_download), **kwargs.pop("adapter_kwargs", {})}
    return _load(
        "weights", AutoModelForCausalLM, os.fspath(model), allow_download, adapter_kwargs=adapter_kwargs, **kwargs
    )


def load_model_config(model: str | os.PathLike[str], *, allow_download: bool | None = None) -> Any:
    """``AutoConfig.from_pretrained(model)``, offline unless allowed."""
    from transformers import AutoConfig

    return _load("config", AutoConfig, os.fspath(model), allow_download)


def load_model_and_tokenizer(model: str | os.PathLike[str], *, allow_download: bool | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``, offline unless allowed; a tokenizer without a pad token pads with
    its end-of-sequence token."""
    tokenizer = load_tokenizer(model, allow_download=allow_download)
    return load_causal_lm(model, allow_download=allow_download), tokenizer


__all__ = [
    "ALLOW_DOWNLOAD_ENV",
    "ModelNotFoundError",
    "cached_models",
    "cli_hint",
    "downloads_allowed",
    "hf_cache_dir",
    "load_causal_lm",
    "load_model_and_tokenizer",
    "load_model_config",
    "load_tokenizer",
    "pretrained_kwargs",
    "resolve_model",
]
