"""Vectorised building blocks shared by the advantage estimators (numpy only, no per-row loops
on array input).

* :func:`factorize`: integer codes for ids (strings, integers...), nulls rejected;
* :func:`finite_floats`: a float column, NaN/infinite/null values rejected with the row named;
* :func:`group_stats`: per-group (optionally weighted) mean, unbiased std, size and an exact
  "all values equal" flag.

Columns may be numpy arrays, Python sequences, or Arrow arrays (``pyarrow.Array`` and
``ChunkedArray``, recognised by their methods: this module never imports pyarrow). Arrow
columns take a fast path (Arrow's own null mask and hash encoding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

_FLOAT_TYPES = ("halffloat", "float", "double")


class RowLabels(Protocol):
    """What names row ``i`` in error messages as ``labels[i]``: a sequence, or a lazy lookup."""

    def __getitem__(self, row: int, /) -> Any: ...


def _is_arrow(values: Any) -> bool:
    """True for a pyarrow ``Array`` or ``ChunkedArray`` (duck-typed)."""
    return hasattr(values, "null_count") and hasattr(values, "dictionary_encode") and hasattr(values, "type")


def _arrow_array(values: Any) -> Any:
    """One Arrow array (chunks combined, dictionaries decoded)."""
    array = values.combine_chunks() if hasattr(values, "combine_chunks") else values
    return array.dictionary_decode() if hasattr(array, "dictionary_decode") else array


def _first_null(array: Any) -> int:
    return int(np.flatnonzero(np.asarray(array.is_null()))[0])


def _describe(labels: RowLabels | None, row: int) -> str:
    return f"row {row}" + (f" ({labels[row]})" if labels is not None else "")


def _first_appearance_codes(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes in first-appearance order for a 1-D numpy array of a sortable dtype: one sort,
    then each run of equal values is ranked by its smallest original position."""
    n = values.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    order = np.argsort(values)
    ordered = values[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    first = np.minimum.reduceat(order, starts)
    rank = np.empty(starts.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(starts.size, dtype=np.int64)
    codes = np.empty(n, dtype=np.int64)
    codes[order] = rank[np.cumsum(new) - 1]
    return codes, int(starts.size)


def factorize(values: Any, what: str, labels: RowLabels | None = None) -> tuple[np.ndarray, int]:
    """Integer codes (``int64``, first-appearance order) for ``values`` and how many distinct
    values there are. ``None``/null raises ``ValueError`` naming the first such row (``labels``
    adds a description of that row, e.g. its rollout id); so does a float NaN."""
    if _is_arrow(values):
        array = _arrow_array(values)
        if array.null_count:
            raise ValueError(f"{what} is missing at {_describe(labels, _first_null(array))}")
        if str(array.type) in _FLOAT_TYPES:
            raw = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
            if np.isnan(raw).any():
                raise ValueError(f"{what} is NaN at {_describe(labels, int(np.flatnonzero(np.isnan(raw))[0]))}")
        encoded = array.dictionary_encode()
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False)).astype(np.int64, copy=False)
        return codes, len(encoded.dictionary)
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuUSMm":
        return _first_appearance_codes(values.reshape(-1))
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        nan = np.flatnonzero(np.isnan(values))
        if nan.size:
            raise ValueError(f"{what} is NaN at {_describe(labels, int(nan[0]))}")
        return _first_appearance_codes(values.reshape(-1))
    # Python objects (strings, mixed types...): hash them.
    items = list(values)
    index: dict[Any, int] = {}
    codes = np.empty(len(items), dtype=np.int64)
    for row, item in enumerate(items):
        if item is None or (isinstance(item, float) and item != item):
            raise ValueError(f"{what} is {'missing' if item is None else 'NaN'} at {_describe(labels, row)}")
        codes[row] = index.setdefault(item, len(index))
    return codes, len(index)


def compact_codes(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, int]:
    """Codes ``0..k-1`` (ascending key order) for non-negative integer ``keys`` below ``n_keys``,
    and ``k``, the number of distinct keys. When ``n_keys`` is at most a few times the number of
    rows this takes one ``bincount`` (no sort); otherwise it sorts like :func:`factorize`.
    Only the grouping is promised: callers must not rely on which code a key gets."""
    if n_keys <= 4 * keys.size + 1024:
        present = np.bincount(keys, minlength=n_keys) > 0
        rank = np.cumsum(present) - 1
        return rank[keys], int(rank[-1]) + 1 if n_keys else 0
    return _first_appearance_codes(keys)


def finite_floats(values: Any, what: str, labels: RowLabels | None = None) -> np.ndarray:
    """``values`` as a 1-D float64 array; null (``None``), NaN or infinite values raise
    ``ValueError`` naming the first bad row."""
    seq: Sequence[Any] | None = None
    if _is_arrow(values):
        array = _arrow_array(values)
        if array.null_count:
            raise ValueError(f"{what} is missing at {_describe(labels, _first_null(array))}")
        try:
            out = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be numbers: {exc}") from None
    else:
        if not isinstance(values, np.ndarray):
            seq = values if isinstance(values, (list, tuple)) else list(values)
        try:
            out = np.asarray(values if seq is None else seq, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            items = list(values) if seq is None else seq
            rows = [i for i, v in enumerate(items) if v is None]
            if rows:
                raise ValueError(f"{what} is missing at {_describe(labels, rows[0])}") from None
            raise ValueError(f"{what} must be numbers: {exc}") from None
    if out.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {out.shape}")
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        if seq is not None:  # numpy turned a None into NaN: report it as missing
            nones = [i for i, v in enumerate(seq) if v is None]
            if nones:
                raise ValueError(f"{what} is missing at {_describe(labels, nones[0])}")
        row = int(bad[0])
        raise ValueError(f"{what} is {out[row]} at {_describe(labels, row)} (NaN or infinite values are not allowed)")
    return out


def integer_column(values: Any, what: str, labels: RowLabels | None = None) -> np.ndarray:
    """``values`` as int64; nulls and non-integral numbers raise ``ValueError`` naming the row."""
    floats = finite_floats(values, what, labels)
    ints = floats.astype(np.int64)
    bad = np.flatnonzero(ints != floats)
    if bad.size:
        row = int(bad[0])
        raise ValueError(f"{what} must be whole numbers, got {floats[row]} at {_describe(labels, row)}")
    return ints


def safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator``, 0 where the denominator is 0 (there the numerator is 0
    too: a group with no spread, normalised with ``epsilon=0``)."""
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


@dataclass
class GroupStats:
    """Per-group statistics (arrays indexed by group code)."""

    size: np.ndarray  # rows (or total weight) per group
    mean: np.ndarray
    std: np.ndarray  # unbiased (ddof=1) when size > 1, else 0
    all_equal: np.ndarray  # every value of the group is exactly the same


def group_stats(values: np.ndarray, codes: np.ndarray, n_groups: int, weights: np.ndarray | None = None) -> GroupStats:
    """Mean and unbiased standard deviation of ``values`` per group.

    With ``weights`` (positive integers: how many times each value counts), the statistics are
    those of the list where each value is repeated ``weight`` times; the std's denominator is
    then ``sum(weights) - 1``. ``all_equal`` is exact (no rounding): every value of the group
    equals its first value.
    """
    w = np.ones(values.size) if weights is None else weights.astype(np.float64)
    size = np.bincount(codes, weights=w, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(codes, weights=w * values, minlength=n_groups) / size
        centred = values - mean[codes]
        sq = np.bincount(codes, weights=w * centred * centred, minlength=n_groups)
        std = np.where(size > 1, np.sqrt(sq / (size - 1)), 0.0)
    some = np.zeros(n_groups)
    some[codes] = values  # repeated indices: one member's value per group (which one does not matter)
    differs = np.bincount(codes, weights=(values != some[codes]).astype(np.float64), minlength=n_groups)
    all_equal = (differs == 0) & (size > 0)
    mean = np.where(all_equal, some, np.where(size > 0, mean, 0.0))
    std = np.where(all_equal, 0.0, std)
    return GroupStats(size=size, mean=mean, std=std, all_equal=all_equal)
