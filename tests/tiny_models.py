"""Test helpers: the tiny Qwen2 builder now lives in :mod:`agent_rl_plugin.train.tiny`; these
wrappers keep the names the dataset tests use (small model, transformers' default init)."""

from __future__ import annotations

from pathlib import Path

from agent_rl_plugin.train.tiny import CHAT_TEMPLATE, build_tokenizer
from agent_rl_plugin.train.tiny import build_tiny_model as _build_tiny_model


def build_tiny_model(
    path: str | Path,
    hidden_size: int = 32,
    num_layers: int = 2,
    initializer_range: float | None = None,
    seed: int = 0,
) -> Path:
    """Save a tiny Qwen2 and its tokenizer under ``path``; returns the path."""
    return Path(
        _build_tiny_model(
            path, hidden_size=hidden_size, layers=num_layers, initializer_range=initializer_range, seed=seed
        )
    )


__all__ = ["CHAT_TEMPLATE", "build_tiny_model", "build_tokenizer"]
