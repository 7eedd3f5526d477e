"""Plain-text rendering, size summaries, and writing datasets to JSONL, Parquet or a directory.

Text form (``--style text``):

* without a tokenizer, each message becomes ``"role: content"`` (tool calls as
  ``"assistant: [call NAME ARGUMENTS]"``), one per line; the prompt ends with a newline so that
  ``prompt + completion`` is the whole transcript;
* with a tokenizer (``--tokenizer PATH``), its chat template renders the prompt (with the
  generation prompt) and the prompt + completion; the completion is what follows the longest
  common prefix (TRL's own rule).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.data.report import DatasetError

MESSAGE_COLUMNS = ("prompt", "completion")
NESTED_MESSAGE_COLUMNS = ("completions",)
_SKIPPED_FIELDS = {"role", "type", "id", "tool_call_id"}


def clean_message(message: dict[str, Any], parse_arguments: bool = False) -> dict[str, Any]:
    """A message without its null fields (``tool_calls`` arguments parsed to dicts when asked)."""
    out = {k: v for k, v in message.items() if v is not None}
    if parse_arguments and out.get("tool_calls"):
        calls = []
        for call in out["tool_calls"]:
            function = dict(call.get("function") or {})
            try:
                function["arguments"] = json.loads(function.get("arguments") or "{}")
            except ValueError:
                pass
            calls.append({**{k: v for k, v in call.items() if v is not None}, "function": function})
        out["tool_calls"] = calls
    return out


def render_message(message: dict[str, Any]) -> str:
    """``role: content``, plus one ``[call NAME ARGUMENTS]`` per tool call."""
    role = message.get("role") or "user"
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(f"[call {function.get('name', '')} {function.get('arguments', '')}]")
    return f"{role}: " + " ".join(p for p in parts if p)


def render_messages(messages: Sequence[dict[str, Any]] | None) -> str:
    return "\n".join(render_message(m) for m in messages or [])


class TextRenderer:
    """Renders (prompt, completion) message lists to text, simply or with a chat template."""

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer

    def pair(self, prompt: list[dict[str, Any]], completion: list[dict[str, Any]]) -> tuple[str, str]:
        if self.tokenizer is None:
            return render_messages(prompt) + "\n", render_messages(completion)
        prompt_msgs = [clean_message(m, True) for m in prompt]
        full_msgs = prompt_msgs + [clean_message(m, True) for m in completion]
        last = prompt_msgs[-1]["role"] if prompt_msgs else "user"
        try:
            prompt_text = self.tokenizer.apply_chat_template(
                prompt_msgs,
                tokenize=False,
                add_generation_prompt=last != "assistant",
                continue_final_message=last == "assistant",
            )
            full_text = self.tokenizer.apply_chat_template(full_msgs, tokenize=False)
        except Exception as exc:  # jinja errors, templates that refuse roles
            raise DatasetError(f"the tokenizer's chat template failed: {exc}") from None
        n = 0
        for a, b in zip(prompt_text, full_text):
            if a != b:
                break
            n += 1
        return full_text[:n], full_text[n:]


def to_text(table: pa.Table, tokenizer: Any = None) -> pa.Table:
    """``table`` with its message columns (prompt, completion, completions) rendered to text."""
    renderer = TextRenderer(tokenizer)
    names = table.column_names
    prompts = table.column("prompt").to_pylist()
    new: dict[str, pa.Array] = {}
    if "completion" in names:
        pairs = [renderer.pair(p, c) for p, c in zip(prompts, table.column("completion").to_pylist())]
        new["prompt"] = pa.array([p for p, _ in pairs], pa.string())
        new["completion"] = pa.array([c for _, c in pairs], pa.string())
    elif "completions" in names:
        rendered_prompts, rendered = [], []
        for prompt, completions in zip(prompts, table.column("completions").to_pylist()):
            pairs = [renderer.pair(prompt, c) for c in completions]
            rendered_prompts.append(pairs[0][0] if pairs else renderer.pair(prompt, [])[0])
            rendered.append([c for _, c in pairs])
        new["prompt"] = pa.array(rendered_prompts, pa.string())
        new["completions"] = pa.array(rendered, pa.list_(pa.string()))
    for name, column in new.items():
        table = table.set_column(names.index(name), name, column)
    return table


def _string_leaves(array: Any, name: str = "") -> Sequence[pa.Array]:
    """The string arrays nested in ``array``, except ids, roles and types."""
    if isinstance(array, pa.ChunkedArray):
        return [leaf for chunk in array.chunks for leaf in _string_leaves(chunk, name)]
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return [] if name in _SKIPPED_FIELDS else [array]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _string_leaves(array.flatten(), name)
    if pa.types.is_struct(kind):
        return [leaf for i in range(kind.num_fields) for leaf in _string_leaves(array.field(i), kind.field(i).name)]
    return []


def count_chars(table: pa.Table, columns: Sequence[str] = ("prompt", "completion", "completions")) -> int:
    """Characters of text (content, arguments, tool names) in the given columns."""
    total = 0
    for name in columns:
        if name in table.column_names:
            for leaf in _string_leaves(table.column(name), name):
                total += pc.sum(pc.utf8_length(leaf)).as_py() or 0
    return int(total)


def count_tokens(table: pa.Table, tokenizer: Any = None) -> tuple[int, str]:
    """(tokens, method): the tokenizer's count of the rendered text, else characters / 4."""
    if tokenizer is None:
        return (count_chars(table) + 3) // 4, "chars/4"
    texts = table if pa.types.is_string(table.schema.field("prompt").type) else to_text(table, tokenizer)
    strings = texts.column("prompt").to_pylist()
    for name in ("completion", "completions"):
        if name in texts.column_names:
            for value in texts.column(name).to_pylist():
                strings.extend(value if isinstance(value, list) else [value])
    total = 0
    for start in range(0, len(strings), 1024):
        encoded = tokenizer(strings[start : start + 1024], add_special_tokens=False)["input_ids"]
        total += sum(len(ids) for ids in encoded)
    return total, "tokenizer"


def load_tokenizer(path: str, allow_download: bool | None = None) -> Any:
    """``AutoTokenizer.from_pretrained(path)``, offline unless downloads are allowed
    (:mod:`agent_rl_plugin.downloads`: ``allow_download=True`` or ``AGENT_RL_ALLOW_DOWNLOAD=1``),
    with a one-line error naming where it looked."""
    from agent_rl_plugin.downloads import (
        ALLOW_DOWNLOAD_ENV,
        downloads_allowed,
        hf_cache_dir,
        hub_offline,
        pretrained_kwargs,
    )

    try:
        from transformers import AutoTokenizer

        with hub_offline(allow_download):
            return AutoTokenizer.from_pretrained(path, **pretrained_kwargs(allow_download))
    except Exception as exc:
        offline = "" if downloads_allowed(allow_download) else f" (offline: looked in {path} and {hf_cache_dir()})"
        raise DatasetError(
            f"cannot load a tokenizer from {path}{offline}: {str(exc).splitlines()[0] if str(exc) else exc!r}",
            "give a local model or tokenizer directory"
            + ("" if downloads_allowed(allow_download) else f", or set {ALLOW_DOWNLOAD_ENV}=1 to download it"),
        ) from None


def as_dataset(table: pa.Table):
    """``datasets.Dataset`` over ``table`` without copying it. A random fingerprint is given:
    the default one pickles the whole table to hash it (0.2 s per 100k rows)."""
    import uuid

    import datasets

    return datasets.Dataset(table, fingerprint=uuid.uuid4().hex)


def arrow_table(ds: Any) -> pa.Table:
    """The Arrow table behind a ``datasets.Dataset`` (indices applied), or ``ds`` itself."""
    if isinstance(ds, pa.Table):
        return ds
    if getattr(ds, "_indices", None) is not None:
        ds = ds.flatten_indices()
    return ds.data.table


def output_format(path: str | os.PathLike[str]) -> str:
    """``directory`` (ends with a separator), ``jsonl`` (.jsonl/.json) or ``parquet``."""
    text = os.fspath(path)
    if text.endswith(("/", os.sep)):
        return "directory"
    suffix = Path(text).suffix.lower()
    if suffix in (".jsonl", ".json"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise DatasetError(
        f"cannot tell the output format of {text!r}",
        "end the path with .jsonl, .parquet, or / (a datasets directory for load_from_disk)",
    )


def write_dataset(ds: Any, path: str | os.PathLike[str]) -> str:
    """Write ``ds`` (a ``datasets.Dataset`` or Arrow table) to ``path``; returns the format.

    ``.jsonl`` / ``.json``: one JSON object per line; ``.parquet``; a path ending with ``/``:
    ``Dataset.save_to_disk`` (reload with ``datasets.load_from_disk``). Parent folders are made.
    """
    fmt = output_format(path)
    text = os.fspath(path)
    target = Path(text)
    (target if fmt == "directory" else target.parent).mkdir(parents=True, exist_ok=True)
    if fmt == "directory":
        import datasets

        dataset = ds if isinstance(ds, datasets.Dataset) else as_dataset(arrow_table(ds))
        dataset.save_to_disk(text)
        return fmt
    table = arrow_table(ds)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, text)
        return fmt
    _write_jsonl(table, text)
    return fmt


def _write_jsonl(table: pa.Table, path: str) -> None:
    import duckdb

    connection = duckdb.connect()
    try:
        connection.register("_arl_out", table)
        escaped = path.replace("'", "''")
        connection.execute(f"COPY (SELECT * FROM _arl_out) TO '{escaped}' (FORMAT JSON)")
    finally:
        connection.close()


__all__ = [
    "TextRenderer",
    "count_chars",
    "count_tokens",
    "load_tokenizer",
    "output_format",
    "render_messages",
    "to_text",
    "write_dataset",
]
