"""Arrow columns built from Python values without ``pyarrow.array``.

Why: ``pyarrow.array`` (and everything built on it: ``Table.from_pylist``, ``Table.from_pydict``)
imports pandas on its first call when pandas is installed, to check whether its input is a pandas
object. On the recording path that import is ~0.3 s and ~40 MB an agent pays for a library it
never uses. The store's tables only have four column types, so this module builds them directly
from buffers (``pyarrow.Array.from_buffers``), which checks nothing against pandas.

Contract (what ``pyarrow.array(values, type=...)`` would do for these inputs):

* ``None`` is null; every other value must have the column's type, else :class:`TypeError`
  (a ``bool`` is not accepted as a string; any integral value is accepted as an integer, any
  real number as a float).
* Strings are UTF-8; a string that cannot be encoded (a lone surrogate) raises
  :class:`UnicodeEncodeError`. An integer outside the column's range raises :class:`OverflowError`.
* Other column types fall back to ``pyarrow.array``.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa

__all__ = ["column", "table"]

_INT_TYPES = {pa.int64(): np.int64, pa.int32(): np.int32}
_MAX_STRING_BYTES = 2**31 - 1  # int32 offsets of pa.string()


def _validity(present: list[bool]) -> tuple[pa.Buffer | None, int]:
    nulls = present.count(False)
    if not nulls:
        return None, 0
    bits = np.packbits(np.asarray(present, dtype=bool), bitorder="little")
    return pa.py_buffer(bits.tobytes()), nulls


def _repeated(values: Sequence[Any], kinds: set[type]) -> pa.Array | None:
    """The string array of ``values`` when they are all ``None`` or all one ``str`` (a common
    column: kind, status, scope, resource, no events): built without a loop over the values.
    ``None`` otherwise."""
    n = len(values)
    if not n or len(kinds) != 1:
        return None
    first = values[0]
    if first is None:  # kinds == {NoneType}: every value is None
        bits = pa.py_buffer(bytes((n + 7) // 8))
        offsets = pa.py_buffer(bytes(4 * (n + 1)))
        return pa.Array.from_buffers(pa.string(), n, [bits, offsets, pa.py_buffer(b"")], null_count=n)
    if type(first) is not str or values.count(first) != n:  # exact str values: == is equality of text
        return None
    one = first.encode("utf-8")  # UnicodeEncodeError for a lone surrogate, as below
    if len(one) * n > _MAX_STRING_BYTES:
        raise OverflowError(f"{len(one) * n} bytes of text do not fit one string column")
    offsets = np.arange(n + 1, dtype=np.int64) * len(one)
    buffers = [None, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(one * n)]
    return pa.Array.from_buffers(pa.string(), n, buffers, null_count=0)


def _strings(values: Sequence[Any]) -> pa.Array:
    kinds = set(map(type, values))
    repeated = _repeated(values, kinds)
    if repeated is not None:
        return repeated
    if type(None) not in kinds:
        present = None
        texts = values
    else:
        present = [value is not None for value in values]
        texts = ["" if value is None else value for value in values]
    try:
        joined = "".join(texts)  # one C loop; refuses anything that is not a str
    except TypeError:
        wrong = next(value for value in texts if not isinstance(value, str))
        raise TypeError(f"expected a str, got {type(wrong).__name__}") from None
    data = joined.encode("utf-8")  # UnicodeEncodeError for a lone surrogate
    if len(data) > _MAX_STRING_BYTES:
        raise OverflowError(f"{len(data)} bytes of text do not fit one string column")
    if joined.isascii():  # O(1) in CPython: one byte per character
        lengths = np.fromiter(map(len, texts), dtype=np.int32, count=len(texts))
    else:
        lengths = np.fromiter((len(text.encode("utf-8")) for text in texts), dtype=np.int32, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    validity, nulls = (None, 0) if present is None else _validity(present)
    buffers = [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), len(texts), buffers, null_count=nulls)


def _numbers(values: Sequence[Any], arrow_type: pa.DataType, dtype: type) -> pa.Array:
    present = [value is not None for value in values]
    filled = values if all(present) else [0 if value is None else value for value in values]
    kinds = set(map(type, filled))
    if dtype is np.float64:
        if not kinds <= {float, int}:
            for value in filled:
                if isinstance(value, bool) or not isinstance(value, numbers.Real):
                    raise TypeError(f"expected a number, got {type(value).__name__}")
            filled = [float(value) for value in filled]
        data = np.array(filled, dtype=np.float64)
    else:
        if not kinds <= {int}:
            filled = [operator.index(v) for v in filled]  # TypeError for floats, strings; bools pass as 0/1
        info = np.iinfo(dtype)
        if filled and not (info.min <= min(filled) and max(filled) <= info.max):
            raise OverflowError(f"a value does not fit {arrow_type}")  # numpy < 2 would wrap it silently
        data = np.array(filled, dtype=dtype)
    validity, nulls = _validity(present)
    return pa.Array.from_buffers(arrow_type, len(values), [validity, pa.py_buffer(data.tobytes())], null_count=nulls)


def column(values: Sequence[Any], arrow_type: pa.DataType) -> pa.Array:
    """An Arrow array of ``arrow_type`` holding ``values`` (see the module contract)."""
    if not isinstance(values, (list, tuple)):
        values = list(values)
    if arrow_type == pa.string():
        return _strings(values)
    if arrow_type == pa.float64():
        return _numbers(values, arrow_type, np.float64)
    for int_type, dtype in _INT_TYPES.items():
        if arrow_type == int_type:
            return _numbers(values, arrow_type, dtype)
    return pa.array(values, type=arrow_type)


def table(columns: Iterable[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """A table with ``schema`` from one sequence of values per field, in the schema's order."""
    arrays = [column(values, field.type) for values, field in zip(columns, schema)]
    return pa.Table.from_arrays(arrays, schema=schema)
