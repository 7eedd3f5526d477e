"""Whether loading a model or tokenizer may download from the Hugging Face hub: offline unless
allowed. The lowest-level rule, shared by every layer that calls ``from_pretrained`` (the
dataset and doctor tokenizers in ``data``; models in ``train``, see
:mod:`agent_rl_plugin.train.loading`).

Contract: downloads are allowed only by ``allow_download=True`` or the environment variable
:data:`ALLOW_DOWNLOAD_ENV` set to a true word (``1``, ``true``, ``yes``, ``on``); otherwise every
``from_pretrained`` gets ``local_files_only=True`` (:func:`pretrained_kwargs`), so a name that is
not a local directory nor cached fails at once instead of after a minute of hub retries.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

#: The environment variable that allows downloads from the Hugging Face hub (``1``, ``true``, ``yes``).
ALLOW_DOWNLOAD_ENV = "AGENT_RL_ALLOW_DOWNLOAD"
_TRUE = ("1", "true", "yes", "on")


def downloads_allowed(allow_download: bool | None = None) -> bool:
    """Whether loading may download from the hub: ``allow_download`` when it is ``True``, else
    whether :data:`ALLOW_DOWNLOAD_ENV` is set to a true word."""
    if allow_download:
        return True
    return os.environ.get(ALLOW_DOWNLOAD_ENV, "").strip().lower() in _TRUE


def hf_cache_dir() -> str:
    """The Hugging Face hub cache folder models are looked up in (``HF_HUB_CACHE``, ``HF_HOME``...)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def pretrained_kwargs(allow_download: bool | None = None) -> dict[str, Any]:
    """The keyword arguments every ``from_pretrained`` gets: ``local_files_only`` unless downloads
    are allowed, and the cache folder models are looked up in."""
    return {"local_files_only": not downloads_allowed(allow_download), "cache_dir": hf_cache_dir()}


@contextlib.contextmanager
def hub_offline(allow_download: bool | None = None) -> Iterator[None]:
    """Inside, unless downloads are allowed, the Hugging Face hub library is in its offline mode
    (``huggingface_hub.constants.HF_HUB_OFFLINE``): ``local_files_only`` alone still lets it
    ask the hub for other things (its agent registry, fetched once per process), which would
    be a connection at run time. Put back on exit."""
    if downloads_allowed(allow_download):
        yield
        return
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


__all__ = ["ALLOW_DOWNLOAD_ENV", "downloads_allowed", "hf_cache_dir", "hub_offline", "pretrained_kwargs"]
