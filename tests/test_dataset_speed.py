"""The shortcuts of the dataset build's fast path give the same rows as the long way.

* the episode messages taken for KTO are reused by GRPO only when GRPO asks for the very same
  rows (contiguous groups, none dropped); interleaved groups take their own;
* GRPO advantages read the group keys and rollout ids as Arrow columns; an error still names
  the rollout.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from agent_rl_plugin.data import (
    DatasetError,
    build_datasets,
    build_grpo_dataset,
    build_kto_dataset,
)
from agent_rl_plugin.data.episodes import episode_rows
from agent_rl_plugin.data.grpo import _advantages
from agent_rl_plugin.data.synthetic import synthesize_store
from agent_rl_plugin.store import connect_writer, open_reader


def _store(path, rollouts: int = 12, interleave: int | None = None) -> str:
    db = str(path / "s.duckdb")
    synthesize_store(db, rollouts=rollouts, llm_calls=3, group_size=4)
    if interleave:  # group_id by rollout number modulo ``interleave``: groups are not contiguous in time
        connection = connect_writer(db)
        try:
            connection.execute(
                "UPDATE spans SET group_id = 'g-' || CAST(CAST(('0x' || rollout_id) AS UBIGINT) % ? AS VARCHAR)",
                [interleave],
            )
            connection.execute("CHECKPOINT")
        finally:
            connection.close()
    return db


def test_messages_reused_only_for_the_same_rows(tmp_path):
    db = _store(tmp_path)
    connection = open_reader(db)
    try:
        episodes = episode_rows(connection)
    finally:
        connection.close()
    n = episodes.index.num_rows
    first = episodes.messages()
    again = episodes.messages(np.arange(n))
    assert again[0] is first[0] and again[1] is first[1]  # same rows: no second copy
    backwards = episodes.messages(np.arange(n)[::-1])
    assert backwards[0].to_pylist() == first[0].to_pylist()[::-1]
    assert backwards[1].to_pylist() == first[1].to_pylist()[::-1]
    assert episodes.messages(np.arange(n))[0].to_pylist() == first[0].to_pylist()


@pytest.mark.parametrize("interleave", [None, 3])
def test_build_datasets_equals_one_call_per_dataset(tmp_path, interleave):
    db = _store(tmp_path, interleave=interleave)
    both = build_datasets(db)
    kto, grpo = build_kto_dataset(db), build_grpo_dataset(db)
    assert both["kto"].data.table.equals(kto.data.table)
    assert both["grpo"].data.table.equals(grpo.data.table)
    if interleave:  # the groups really interleave: GRPO's member order is not KTO's row order
        members = [r for ids in grpo["rollout_ids"] for r in ids]
        assert members != kto["rollout_id"]
        # each group's completions are its own rollouts' (by the KTO rows of the same ids)
        by_id = dict(zip(kto["rollout_id"], kto["completion"]))
        for ids, completions in zip(grpo["rollout_ids"], grpo["completions"]):
            assert completions == [by_id[r] for r in ids]


def test_advantage_error_names_the_rollout():
    keys = pa.chunked_array([pa.array(["g", None], pa.string())])
    ids = pa.chunked_array([pa.array(["r-1", "r-2"], pa.string())])
    with pytest.raises(DatasetError, match=r"group id is missing at row 1 \(r-2\)"):
        _advantages(np.array([1.0, 0.0]), keys, ids, "group")


# --- the Arrow normalisation of the last LLM call equals the SQL's --------------------------
_CALL = '{"id": "c1", "name": "lookup", "arguments": {"item": "a"}}'
_NESTED = '{"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{\\"a\\": 1}"}}'
_USER = '{"role": "user", "content": "hi"}'
_MESSAGE_CASES = [  # (input messages, output messages, system instructions)
    (
        f'[{_USER}, {{"role": "assistant", "content": "", "tool_calls": [{_CALL}]}}]',
        '[{"role": "assistant", "content": "ok"}]',
        None,
    ),
    (
        f'[{_USER}, {{"role": "assistant", "content": null, "tool_calls": [{_NESTED}]}}]',
        f'[{{"role": "assistant", "tool_calls": [{_NESTED}]}}]',
        None,
    ),
    (
        f'[{_USER}, {{"role": "assistant", "content": "", "tool_calls": [{{"id": "c3", "function": null, "name": "g"}}]}}]',
        "[]",
        None,
    ),
    (f'[{_USER}, {{"role": "assistant", "content": "", "tool_calls": [null, {{"id": "c4"}}]}}]', "[]", None),
    (f'[{_USER}, {{"role": "assistant", "content": "x", "tool_calls": []}}]', '[{"content": "no role"}]', None),
    (
        '[{"content": "no role"}, {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "3"}]',
        "[]",
        None,
    ),
    (f"[{_USER}]", '[{"role": "assistant", "content": "a"}]', "Be brief."),
    (f'[{{"role": "system", "content": "own"}}, {_USER}]', '[{"role": "assistant", "content": "a"}]', "Be brief."),
    (f'[{{"role": "developer", "content": "own"}}, {_USER}]', "[]", "Be brief."),
    ("[]", '[{"role": "assistant", "content": "a"}]', "Be brief."),
    (f"[{_USER}]", "[]", '[{"type": "text", "content": "Part one."}, {"type": "text", "content": "Two."}]'),
    (
        '[{"role": "user", "content": [{"type": "text", "text": "listed"}]}]',
        '[{"role": "assistant", "content": "a"}]',
        None,
    ),
    ('[{"role": "user", "parts": [{"type": "text", "content": "parts"}]}]', "[]", "Be brief."),
    ('[{"role": "user", "content": "[not a list"}]', "[]", None),
    ('[{"role": ', '[{"role": "assistant", "content": "a"}]', None),
    ('{"role": "user", "content": "an object"}', "[]", None),
    (f"[null, {_USER}]", "[]", None),
    ('[{"role": "user", "content": 5}, {"role": "user", "content": {"a": 1}}]', "null", None),
    (None, '[{"role": "assistant", "content": "only output"}]', None),
    (
        f'[{_USER}, {{"role": "assistant", "tool_calls": [{_CALL}, {_NESTED}]}}]',
        f'[{{"role": "assistant", "content": "", "tool_calls": [{_CALL}]}}]',
        "sys",
    ),
]


def test_arrow_normalisation_equals_sql(tmp_path):
    from agent_rl_plugin.data.conversations import _last_calls_sql, last_calls
    from agent_rl_plugin.data.sql import arrow

    db = str(tmp_path / "m.duckdb")
    synthesize_store(db, rollouts=len(_MESSAGE_CASES), llm_calls=1, group_size=1)
    connection = connect_writer(db)
    try:
        for r, (seen, out, system) in enumerate(_MESSAGE_CASES):
            connection.execute(
                "UPDATE spans SET attributes = json_object('gen_ai.operation.name', 'chat', "
                "'gen_ai.input.messages', ?, 'gen_ai.output.messages', ?, 'gen_ai.system_instructions', ?) "
                "WHERE operation = 'chat' AND rollout_id = lpad(to_hex(?), 32, '0')",
                [seen, out, system, r + 1],
            )
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    connection = open_reader(db)
    try:
        ours = last_calls(connection, None).sort_by("rollout_id")
        sql = arrow(connection, _last_calls_sql(None, use_rowid=True)).sort_by("rollout_id")
    finally:
        connection.close()
    assert ours.num_rows == sql.num_rows == len(_MESSAGE_CASES)
    assert ours.schema == sql.schema
    for name in ours.column_names:
        left, right = ours.column(name).to_pylist(), sql.column(name).to_pylist()
        for r, (a, b) in enumerate(zip(left, right)):
            assert a == b, f"case {r} ({_MESSAGE_CASES[r]}): {name} differs: {a} != {b}"
    assert ours.equals(sql)
    system_first = [row[0]["content"] for row in ours.column("base").to_pylist() if row and row[0]["role"] == "system"]
    assert "Be brief." in system_first and "Part one.\nTwo." in system_first  # the prepend really ran


def test_null_parents_hide_their_children():
    """A null message, tool call or function reads as null fields whatever values an Arrow
    producer left under it (DuckDB writes nulls there; other producers need not)."""
    from agent_rl_plugin.data.arrow_messages import needs_full_path, plain_messages

    s = pa.string()
    function = pa.StructArray.from_arrays(
        [pa.array(["hidden", "f"]), pa.array(["{}", '{"a":1}'])],
        names=["name", "arguments"],
        mask=pa.array([True, False]),
    )
    calls = pa.StructArray.from_arrays(
        [pa.array(["c0", "c1"]), pa.array(["n0", "n1"]), pa.array(["a0", None], s), function],
        names=["id", "name", "arguments", "function"],
        mask=pa.array([False, True]),
    )
    tool_calls = pa.ListArray.from_arrays(pa.array([0, 2, 2], pa.int32()), calls)
    messages = pa.StructArray.from_arrays(
        [
            pa.array(["assistant", "user"]),
            pa.array(["", "hi"]),
            tool_calls,
            pa.array([None, None], s),
            pa.array([None, None], s),
        ],
        names=["role", "content", "tool_calls", "tool_call_id", "name"],
        mask=pa.array([False, True]),
    )
    parsed = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), messages)
    assert needs_full_path(parsed).tolist() == [False, True]  # the null message needs the SQL path
    (first,) = plain_messages(parsed)[0].as_py()
    assert first["tool_calls"] == [
        {"id": "c0", "type": "function", "function": {"name": "n0", "arguments": "a0"}},  # null function: own fields
        {"id": None, "type": "function", "function": {"name": "", "arguments": "{}"}},  # null call: as SQL's NULL
    ]


@pytest.mark.parametrize("policy", ["exclude", "zero_reward", "keep"])
def test_every_rollout_path_equals_the_filtered_path(tmp_path, policy):
    """Without a filter the roots and their outcomes come from one query: the same tables and
    reports as the filtered path (select_rollouts, then split_failed), failed rollouts included."""
    from agent_rl_plugin.data import BuildReport, build_tables

    db = _store(tmp_path)
    connection = connect_writer(db)
    try:  # rollout 2 timed out, rollout 5 raised, rollout 7 was cancelled
        for number, status, message, cancelled in (
            (2, "ERROR", "TimeoutError: slow", False),
            (5, "ERROR", "ValueError: bad", False),
            (7, "OK", None, True),
        ):
            connection.execute(
                "UPDATE spans SET status_code = ?, status_message = ?, "
                "attributes = CASE WHEN ? THEN json_merge_patch(attributes, '{\"agent_rl.cancelled\": true}') "
                "ELSE attributes END WHERE is_rollout_root AND rollout_id = lpad(to_hex(?), 32, '0')",
                [status, message, cancelled, number],
            )
        connection.execute("CHECKPOINT")
    finally:
        connection.close()
    reports = {kind: BuildReport() for kind in ("kto", "grpo")}
    filtered_reports = {kind: BuildReport() for kind in ("kto", "grpo")}
    every = build_tables(db, failed_rollouts=policy, reports=reports)
    filtered = build_tables(db, where="true", failed_rollouts=policy, reports=filtered_reports)
    for kind in ("kto", "grpo"):
        assert every[kind].equals(filtered[kind])
        assert vars(reports[kind]) == vars(filtered_reports[kind])
    failed = reports["kto"].extra["failed_rollouts"]
    assert failed["failed"] == 3 and failed["by_outcome"] == {"timeout": 1, "error": 1, "cancelled": 1}
    assert reports["kto"].rollouts == 12
