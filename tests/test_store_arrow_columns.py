"""The store's Arrow columns are what pyarrow.array would build, without pyarrow.array
(which imports pandas on first use; recording must not load it)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from agent_rl_plugin.store.arrow_columns import column, table
from agent_rl_plugin.store.rows import REWARD_SCHEMA, rewards_to_table


@pytest.mark.parametrize(
    ("values", "arrow_type"),
    [
        (["a", "", None, "é ✓ 𝄞", "x" * 1000], pa.string()),
        ([None, None], pa.string()),
        ([], pa.string()),
        ([0, -1, 2**63 - 1, -(2**63), None], pa.int64()),
        ([7, None, -(2**31)], pa.int32()),
        ([0.5, None, 1, -1e300, float("inf")], pa.float64()),
    ],
)
def test_columns_equal_what_pyarrow_array_builds(values, arrow_type):
    built = column(values, arrow_type)
    assert built.equals(pa.array(values, type=arrow_type))
    assert built.null_count == values.count(None)
    built.validate(full=True)


@pytest.mark.parametrize(
    ("values", "arrow_type", "error"),
    [
        ([1], pa.string(), TypeError),
        ([True], pa.string(), TypeError),
        (["\ud800"], pa.string(), UnicodeEncodeError),
        (["5"], pa.int64(), TypeError),
        ([1.5], pa.int64(), TypeError),
        ([2**63], pa.int64(), OverflowError),
        ([2**31], pa.int32(), OverflowError),
        (["1.0"], pa.float64(), TypeError),
        ([True], pa.float64(), TypeError),
    ],
)
def test_values_of_the_wrong_type_are_refused_like_pyarrow_refuses_them(values, arrow_type, error):
    # The writer falls back to row-by-row cleaning on these errors (store.rows._CONVERT_ERRORS).
    with pytest.raises(error):
        column(values, arrow_type)


def test_reward_rows_with_missing_keys_become_nulls():
    rows = [{"reward_id": "r1", "rollout_id": "x", "name": "fb", "value": 0.5, "ignored": 1}, {"reward_id": "r2"}]
    built = rewards_to_table(rows)
    assert built.schema == REWARD_SCHEMA
    assert built.column("value").to_pylist() == [0.5, None]
    assert built.column("step_index").to_pylist() == [None, None]


def test_building_a_table_does_not_import_pandas():
    code = (
        "import sys, pyarrow as pa\n"
        "from agent_rl_plugin.store.arrow_columns import table\n"
        "table([['a', None], [1, 2]], pa.schema([('s', pa.string()), ('n', pa.int64())]))\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert table([["a"]], pa.schema([("s", pa.string())])).num_rows == 1
