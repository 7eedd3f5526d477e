"""GiGPO advantages: the pure functions of :mod:`agent_rl_plugin.advantages.gigpo`, re-exported
under their old import path, and :func:`as_arrow_table` (steps as a pyarrow Table)."""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from agent_rl_plugin.advantages.gigpo import (
    BASELINES,
    MODES,
    REQUIRED_COLUMNS,
    GiGPOResult,
    compute_gigpo,
    discounted_returns,
    gigpo_advantages,
)


def as_arrow_table(steps: Any) -> pa.Table:
    """``steps`` as a pyarrow Table: a Table or RecordBatch, a pandas DataFrame (duck-typed, so
    pandas is never imported here), an object with ``to_arrow()`` (polars), a mapping of column
    name to values, or a list of row dicts."""
    if isinstance(steps, pa.Table):
        return steps
    if isinstance(steps, pa.RecordBatch):
        return pa.Table.from_batches([steps])
    if hasattr(steps, "to_arrow") and callable(steps.to_arrow):
        return as_arrow_table(steps.to_arrow())
    if hasattr(steps, "to_dict") and hasattr(steps, "columns") and hasattr(steps, "dtypes"):
        return pa.Table.from_pandas(steps, preserve_index=False)
    try:
        if isinstance(steps, Mapping):
            return pa.table(dict(steps))
        return pa.Table.from_pylist(list(steps))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"cannot read the steps as a table (a column mixes types?): {exc}") from None
    except TypeError:
        raise ValueError(
            "steps must be a pandas DataFrame, a pyarrow Table, a mapping of columns or a list of dicts, "
            f"got {type(steps).__name__}"
        ) from None


__all__ = (
    "BASELINES",
    "GiGPOResult",
    "MODES",
    "REQUIRED_COLUMNS",
    "as_arrow_table",
    "compute_gigpo",
    "discounted_returns",
    "gigpo_advantages",
)
