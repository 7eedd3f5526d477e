"""Vectorised building blocks shared by the advantage estimators (no per-row Python loops).

* :func:`factorize`: integer codes for ids (strings, integers...), nulls rejected;
* :func:`finite_floats`: a float column, NaN/infinite/null values rejected with the row named;
* :func:`group_stats`: per-group (optionally weighted) mean, unbiased std, size and an exact
  "all values equal" flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa


def _as_arrow(values: Any) -> pa.Array | None:
    """``values`` as one Arrow array, or ``None`` when Arrow cannot type it (mixed types)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values.dictionary_decode() if pa.types.is_dictionary(values.type) else values
    try:
        array = pa.array(values if not isinstance(values, np.ndarray) or values.dtype != object else list(values))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _describe(labels: Sequence[Any] | None, row: int) -> str:
    return f"row {row}" + (f" ({labels[row]})" if labels is not None else "")


def factorize(values: Any, what: str, labels: Sequence[Any] | None = None) -> tuple[np.ndarray, int]:
    """Integer codes (``int64``, first-appearance order) for ``values`` and how many distinct
    values there are. ``None``/null raises ``ValueError`` naming the first such row (``labels``
    adds a description of that row, e.g. its rollout id)."""
    array = _as_arrow(values)
    if array is None:  # mixed Python types that Arrow cannot put in one column: hash in Python
        index: dict[Any, int] = {}
        items = list(values)
        for row, item in enumerate(items):
            if item is None:
                raise ValueError(f"{what} is missing at {_describe(labels, row)}")
        codes = np.fromiter((index.setdefault(v, len(index)) for v in items), dtype=np.int64, count=len(items))
        return codes, len(index)
    if array.null_count:
        row = int(np.flatnonzero(np.asarray(array.is_null()))[0])
        raise ValueError(f"{what} is missing at {_describe(labels, row)}")
    if pa.types.is_floating(array.type):
        raw = array.to_numpy(zero_copy_only=False)
        if np.isnan(raw).any():
            row = int(np.flatnonzero(np.isnan(raw))[0])
            raise ValueError(f"{what} is NaN at {_describe(labels, row)}")
    encoded = array.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, len(encoded.dictionary)


def finite_floats(values: Any, what: str, labels: Sequence[Any] | None = None) -> np.ndarray:
    """``values`` as a 1-D float64 array; null, NaN or infinite values raise ``ValueError``
    naming the first bad row."""
    if not isinstance(values, (np.ndarray, pa.Array, pa.ChunkedArray)):
        try:  # Python sequences: None becomes a null (numpy would turn it into NaN silently)
            values = pa.array(values if isinstance(values, (list, tuple)) else list(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            pass
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        if array.null_count:
            row = int(np.flatnonzero(np.asarray(array.is_null()))[0])
            raise ValueError(f"{what} is missing at {_describe(labels, row)}")
        try:
            out = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
        except (TypeError, ValueError, pa.ArrowInvalid) as exc:
            raise ValueError(f"{what} must be numbers: {exc}") from None
    else:
        try:
            out = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            seq = list(values)
            rows = [i for i, v in enumerate(seq) if v is None]
            if rows:
                raise ValueError(f"{what} is missing at {_describe(labels, rows[0])}") from None
            raise ValueError(f"{what} must be numbers: {exc}") from None
    if out.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {out.shape}")
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        row = int(bad[0])
        raise ValueError(f"{what} is {out[row]} at {_describe(labels, row)} (NaN or infinite values are not allowed)")
    return out


def integer_column(values: Any, what: str, labels: Sequence[Any] | None = None) -> np.ndarray:
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
