"""Splitting conversations into prompt and completion with numpy index arithmetic on Arrow
lists: no per-row Python, and the messages are copied once (by the final ``take``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def list_parts(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(offsets as int64 numpy starting at 0, flat values) of a list column."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = array.offsets.to_numpy().astype(np.int64)
    values = array.values.slice(offsets[0], offsets[-1] - offsets[0])
    return offsets - offsets[0], values


def _is_assistant(values: pa.Array) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    return pc.fill_null(pc.equal(values.field("role"), "assistant"), False).to_numpy(zero_copy_only=False)


def _first_hit(offsets: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """Per list, the 0-based position of its first True in ``hits`` (-1 when none)."""
    n = len(offsets) - 1
    first = np.full(n, -1, dtype=np.int64)
    where = np.flatnonzero(hits)
    if where.size:
        rows = np.searchsorted(offsets, where, side="right") - 1
        unique_rows, index = np.unique(rows, return_index=True)
        first[unique_rows] = where[index] - offsets[unique_rows]
    return first


def count_assistant(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Assistant messages in each list of ``column``."""
    offsets, values = list_parts(column)
    rows = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return np.bincount(rows[_is_assistant(values)], minlength=len(offsets) - 1)


def first_assistant(base: pa.ChunkedArray | pa.Array, out: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Position of the first assistant message of each conversation ``base + out`` (-1: none)."""
    base_off, base_vals = list_parts(base)
    out_off, out_vals = list_parts(out)
    in_base = _first_hit(base_off, _is_assistant(base_vals))
    in_out = _first_hit(out_off, _is_assistant(out_vals))
    return np.where(in_base >= 0, in_base, np.where(in_out >= 0, np.diff(base_off) + in_out, -1))


def _segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for each (s, n)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    seg_off = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.repeat(starts - seg_off, lengths) + np.arange(total)


@dataclass(frozen=True)
class FlatConversations:
    """The messages of every conversation ``base + out`` as one flat array (``base``'s
    messages, then ``out``'s) with both offset arrays: made once by :func:`flatten` and shared
    by every :func:`take_split` over the same conversations (the concatenation copies them)."""

    base_off: np.ndarray
    out_off: np.ndarray
    values: pa.Array
    n_base: int  # messages of base: where out's start in values


def flatten(base: pa.ChunkedArray | pa.Array, out: pa.ChunkedArray | pa.Array) -> FlatConversations:
    """The :class:`FlatConversations` of ``base`` and ``out`` (list columns of messages)."""
    base_off, base_vals = list_parts(base)
    out_off, out_vals = list_parts(out)
    values = pa.concat_arrays([base_vals, out_vals.cast(base_vals.type)]) if len(out_vals) else base_vals
    return FlatConversations(base_off, out_off, values, len(base_vals))


def take_split(
    base: pa.ChunkedArray | pa.Array,
    out: pa.ChunkedArray | pa.Array,
    k: np.ndarray,
    rows: np.ndarray,
    flat: FlatConversations | None = None,
) -> tuple[pa.Array, pa.Array]:
    """(prompt, completion) list arrays for conversations ``rows`` (in that order): the first
    ``k[row]`` messages of ``base[row] + out[row]``, and the rest. ``flat``: :func:`flatten`
    of ``base`` and ``out`` when the caller keeps one (else it is made here)."""
    flat = flat if flat is not None else flatten(base, out)
    base_off, out_off, values = flat.base_off, flat.out_off, flat.values
    rows = np.asarray(rows, dtype=np.int64)
    b_start, b_len = base_off[rows], np.diff(base_off)[rows]
    o_start, o_len = out_off[rows] + flat.n_base, np.diff(out_off)[rows]
    kk = np.maximum(k[rows], 0)
    kb = np.minimum(kk, b_len)
    ko = np.minimum(np.maximum(kk - b_len, 0), o_len)

    def build(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray]) -> pa.Array:
        starts = np.stack([first[0], second[0]], axis=1).ravel()
        lengths = np.stack([first[1], second[1]], axis=1).ravel()
        offsets = np.concatenate(([0], np.cumsum(first[1] + second[1])))
        taken = values.take(pa.array(_segments(starts, lengths)))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), taken)

    prompt = build((b_start, kb), (o_start, ko))
    completion = build((b_start + kb, b_len - kb), (o_start + ko, o_len - ko))
    return prompt, completion


def prompt_keys(prompt: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One string per prompt (its roles and contents joined) to compare prompts cheaply."""
    offsets, values = list_parts(prompt)
    if len(values) == 0:
        return pa.array([""] * (len(offsets) - 1), pa.string())
    parts = pc.binary_join_element_wise(
        pc.fill_null(values.field("role"), ""), pc.fill_null(values.field("content"), ""), "\x1f"
    )
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), parts), "\x1e")


__all__ = [
    "FlatConversations",
    "count_assistant",
    "first_assistant",
    "flatten",
    "list_parts",
    "prompt_keys",
    "take_split",
]
