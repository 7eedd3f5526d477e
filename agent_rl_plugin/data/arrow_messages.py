"""The common case of message normalisation with Arrow kernels instead of SQL lambdas.

:func:`~agent_rl_plugin.data.sql.finish_messages_sql` normalises a parsed list of messages
(:func:`~agent_rl_plugin.data.sql.plain_parse_sql`) with DuckDB lambdas, and
:func:`~agent_rl_plugin.data.sql.with_system_sql` puts the system instructions in front. Those
expressions are large (planning them alone takes about 0.1 s per query) and their lambdas run
per message. The functions here give the same lists column-wise, with Arrow kernels and numpy
offsets (no per-row Python):

* :func:`needs_full_path`: the rows the plain reading does not cover (the SQL's ``rich`` test:
  a null message, a message without content, tool calls and tool call id, or a content
  starting with ``[``); the caller sends those rows through the SQL;
* :func:`plain_messages`: ``_plain_from_parsed`` of the SQL (role ``user`` when absent,
  content ``""`` when absent, tool calls ``{id, type: "function", function: {name,
  arguments}}``, null when there are none; a null list gives ``[]``);
* :func:`prepend_system`: :func:`~agent_rl_plugin.data.sql.with_system_sql`.

The result has DuckDB's Arrow type for normalised messages, :data:`MESSAGES_ARROW_TYPE`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Arrow type of one normalised tool call, as DuckDB returns it.
TOOL_CALL_TYPE = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("function", pa.struct([pa.field("name", pa.string()), pa.field("arguments", pa.string())])),
    ]
)
#: Arrow type of a list of normalised tool calls.
TOOL_CALLS_ARROW_TYPE = pa.list_(pa.field("l", TOOL_CALL_TYPE))
#: Arrow type of one normalised message, as DuckDB returns it (see the ``sql`` module docstring).
MESSAGE_ARROW_TYPE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("tool_calls", TOOL_CALLS_ARROW_TYPE),
        pa.field("tool_call_id", pa.string()),
        pa.field("name", pa.string()),
    ]
)
#: Arrow type of a normalised message list.
MESSAGES_ARROW_TYPE = pa.list_(pa.field("l", MESSAGE_ARROW_TYPE))
_STRING = pa.string()


def _one(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _lengths(lists: pa.Array) -> np.ndarray:
    """Entries of each list, 0 for a null list (int64 numpy)."""
    lengths = pc.list_value_length(lists)
    if lengths.null_count:
        lengths = pc.fill_null(lengths, 0)
    return np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)


def _offsets(lengths: np.ndarray) -> pa.Array:
    return pa.array(np.concatenate(([0], np.cumsum(lengths))), pa.int32())


def _numpy_bool(array: pa.Array) -> np.ndarray:
    if array.null_count:
        array = pc.fill_null(array, False)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _fill(values: pa.Array, text: str) -> pa.Array:
    """``values`` as strings, nulls replaced by ``text`` (no copy when there are none)."""
    values = values.cast(_STRING) if values.type != _STRING else values
    return pc.fill_null(values, text) if values.null_count else values


def _any_per_list(lengths: np.ndarray, hits: np.ndarray) -> np.ndarray:
    if not hits.any():
        return np.zeros(lengths.size, dtype=bool)
    rows = np.repeat(np.arange(lengths.size), lengths)
    return np.bincount(rows[hits], minlength=lengths.size) > 0


def needs_full_path(parsed: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per row of ``parsed`` (plain-parsed message lists): True where the SQL's full path
    applies (see the module docstring); a null list (text that did not parse) is False."""
    lists = _one(parsed)
    lengths = _lengths(lists)
    values = lists.flatten()  # the messages of the non-null lists, in order
    if len(values) == 0:
        return np.zeros(lengths.size, dtype=bool)
    content = values.field("content")
    bare = pc.and_kleene(
        pc.and_kleene(pc.is_null(content), pc.is_null(values.field("tool_calls"))),
        pc.is_null(values.field("tool_call_id")),
    )
    hits = _numpy_bool(pc.or_kleene(bare, pc.starts_with(content, "[")))
    if values.null_count:  # a null message: its fields read as null in SQL
        hits |= _numpy_bool(values.is_null())
    return _any_per_list(lengths, hits)


def _tool_calls(calls: pa.Array) -> pa.Array:
    """Normalised tool call lists: null where there are none (null or empty)."""
    lengths = _lengths(calls)
    items = calls.flatten()  # the calls of the non-null lists, in order
    n = len(items)
    if n:
        function = items.field("function")
        fn_name, fn_arguments = function.field("name"), function.field("arguments")
        if function.null_count:  # a null function object: its fields are null
            fn_name = pc.if_else(function.is_null(), pa.scalar(None, _STRING), fn_name)
            fn_arguments = pc.if_else(function.is_null(), pa.scalar(None, _STRING), fn_arguments)
        name = pc.coalesce(fn_name, items.field("name"), pa.scalar("", _STRING))
        arguments = pc.coalesce(fn_arguments, items.field("arguments"), pa.scalar("{}", _STRING))
        ids = items.field("id")
        if items.null_count:  # a null tool call: id null, name "", arguments "{}" (as in SQL)
            null_item = items.is_null()
            ids = pc.if_else(null_item, pa.scalar(None, _STRING), ids)
            name = pc.if_else(null_item, pa.scalar("", _STRING), name)
            arguments = pc.if_else(null_item, pa.scalar("{}", _STRING), arguments)
    else:
        name = arguments = ids = pa.array([], _STRING)
    values = pa.StructArray.from_arrays(
        [
            ids.cast(_STRING),
            pa.repeat(pa.scalar("function", _STRING), n),
            pa.StructArray.from_arrays([name, arguments], fields=list(TOOL_CALL_TYPE.field("function").type)),
        ],
        fields=list(TOOL_CALL_TYPE),
    )
    return pa.ListArray.from_arrays(_offsets(lengths), values, type=TOOL_CALLS_ARROW_TYPE, mask=pa.array(lengths == 0))


def plain_messages(parsed: pa.ChunkedArray | pa.Array) -> pa.ListArray:
    """The normalised lists of ``parsed`` (plain-parsed message lists), right for the rows
    where :func:`needs_full_path` is False (other rows get the plain reading too: replace
    them). Messages must not be null (such rows need the full path)."""
    lists = _one(parsed)
    lengths = _lengths(lists)
    values = lists.flatten()
    if len(values) == 0:
        messages = pa.array([], MESSAGE_ARROW_TYPE)
    else:
        messages = pa.StructArray.from_arrays(
            [
                _fill(values.field("role"), "user"),
                _fill(values.field("content"), ""),
                _tool_calls(values.field("tool_calls")),
                values.field("tool_call_id").cast(_STRING),
                values.field("name").cast(_STRING),
            ],
            fields=list(MESSAGE_ARROW_TYPE),
        )
    return pa.ListArray.from_arrays(_offsets(lengths), messages, type=MESSAGES_ARROW_TYPE)


def prepend_system(messages: pa.ListArray, instructions: pa.ChunkedArray | pa.Array) -> pa.ListArray:
    """``messages`` (normalised lists, none null) with a ``system`` message holding
    ``instructions`` in front where that is not null, the list is not empty and has no
    ``system`` or ``developer`` message (:func:`~agent_rl_plugin.data.sql.with_system_sql`)."""
    text = _one(instructions)
    if text.null_count == len(text):
        return messages
    lengths = _lengths(messages)
    values = messages.flatten()
    is_system = _numpy_bool(pc.is_in(values.field("role"), value_set=pa.array(["system", "developer"])))
    add = _numpy_bool(pc.is_valid(text)) & (lengths > 0) & ~_any_per_list(lengths, is_system)
    if not add.any():
        return messages
    n_add = int(add.sum())
    nulls = pa.nulls(n_add, _STRING)
    system = pa.StructArray.from_arrays(
        [
            pa.repeat(pa.scalar("system", _STRING), n_add),
            text.filter(pa.array(add)).cast(_STRING),
            pa.nulls(n_add, TOOL_CALLS_ARROW_TYPE),
            nulls,
            nulls,
        ],
        fields=list(MESSAGE_ARROW_TYPE),
    )
    old_off = np.concatenate(([0], np.cumsum(lengths)))
    new_off = np.concatenate(([0], np.cumsum(lengths + add)))
    total = int(old_off[-1])
    index = np.empty(int(new_off[-1]), dtype=np.int64)
    row_of = np.repeat(np.arange(lengths.size), lengths)
    index[(new_off[:-1] + add)[row_of] + (np.arange(total) - old_off[:-1][row_of])] = np.arange(total)
    index[new_off[:-1][add]] = total + np.arange(n_add)
    merged = pa.concat_arrays([values, system]).take(pa.array(index))
    return pa.ListArray.from_arrays(pa.array(new_off, pa.int32()), merged, type=MESSAGES_ARROW_TYPE)


__all__ = [
    "MESSAGES_ARROW_TYPE",
    "MESSAGE_ARROW_TYPE",
    "TOOL_CALLS_ARROW_TYPE",
    "needs_full_path",
    "plain_messages",
    "prepend_system",
]
