"""Each rollout's conversation, split into prompt and completion, in DuckDB.

Rules (documented in ``docs/datasets.md``):

* The conversation is the **last LLM call's** input messages followed by its output messages
  (a well-behaved agent sends the whole history on every call), preceded by a ``system``
  message holding its ``gen_ai.system_instructions`` when the input messages have none
  (:func:`~agent_rl_plugin.data.sql.with_system_sql`; earlier calls are read the same way
  for the repair).
* **Repair**: some agents do not put their own earlier turns back into the history (the tool
  results are there, the assistant messages that asked for them are not). When the last input
  holds fewer assistant messages than there were earlier calls, each earlier call that saw
  ``n`` messages, the first and the ``n``-th equal to the last input's, and whose ``n+1``-th
  message in the last input is not an assistant message, has its output inserted there
  (``source = 'repaired'``).
* The **split** is at the first assistant message: the messages before it (system/user...)
  are the prompt, the rest (assistant turns with tool calls, tool results, the final answer)
  the completion.
* A rollout **without LLM messages** (no LLM call, content not captured, or input messages
  that are not valid JSON, e.g. cut at the attribute size limit) gets the agent's
  input as the prompt (its ``messages`` argument, else the task's prompt, else the input as
  text, as one user message) and its output as one assistant message (``source = 'io'``).
* Left out, with a reason: no assistant message in the conversation, a conversation that starts
  with an assistant message, and rollouts with neither messages nor an output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data.arrow_messages import needs_full_path, plain_messages, prepend_system
from agent_rl_plugin.data.split import FlatConversations, count_assistant, first_assistant, flatten, take_split
from agent_rl_plugin.data.sql import (
    LLM_WHERE,
    arrow,
    attr,
    finish_messages_sql,
    messages_sql,
    plain_parse_sql,
    registered,
    system_text_sql,
    text_of_sql,
    with_system_sql,
)
from agent_rl_plugin.store.views import AGENT_CONDITION

NO_ASSISTANT = "no assistant message in the conversation"
STARTS_WITH_ASSISTANT = "the conversation starts with an assistant message (empty prompt)"
NO_CONTENT = "no LLM messages and no agent output"


def _one_message(role: str, text: str) -> str:
    return messages_sql(f"json_array(json_object('role', '{role}', 'content', {text}))")


def _same_message(a: str, b: str) -> str:
    return f"({a}.role = {b}.role AND {a}.content = {b}.content)"


def _texts_sql(selected: str | None, use_rowid: bool) -> str:
    """The ``calls`` and ``texts`` CTEs: each rollout's number of LLM calls and its last call's
    ``io`` (input, output and system instructions texts); the last by start time, ties going to
    the row written last (without rowid, to the larger span id). ``selected=None``: every
    rollout (spans of other rollouts are dropped later)."""
    paths = (
        f"['$.\"{sc.GEN_AI_INPUT_MESSAGES}\"', '$.\"{sc.GEN_AI_OUTPUT_MESSAGES}\"', "
        f"'$.\"{sc.GEN_AI_SYSTEM_INSTRUCTIONS}\"']"
    )
    if use_rowid:
        key, order, join = "rowid", "(CAST(start_unix_nano AS HUGEINT) << 48) + rowid", "sp.rowid = c.last_key"
    else:
        key, order = "span_id", "struct_pack(t := start_unix_nano, s := span_id)"
        join = "sp.span_id = c.last_key AND sp.rollout_id = c.rollout_id"
    only = f"AND rollout_id IN (SELECT rollout_id FROM {selected})" if selected else "AND rollout_id IS NOT NULL"
    return f"""
    WITH calls AS (
        SELECT rollout_id, count(*) AS n_calls, arg_max({key}, {order}) AS last_key
        FROM spans
        WHERE {LLM_WHERE} {only}
        GROUP BY rollout_id
    ),
    texts AS (
        SELECT c.rollout_id, c.n_calls, sp.span_id AS last_span,
               json_extract_string(sp.attributes, {paths}) AS io
        FROM calls c JOIN spans sp ON {join}
    )"""


def _last_calls_sql(selected: str | None, use_rowid: bool) -> str:
    """Each rollout's number of LLM calls and its last call's normalised input and output
    messages, all in SQL (see :func:`_texts_sql` for the selection)."""
    return f"""{_texts_sql(selected, use_rowid)}
    SELECT rollout_id, n_calls, last_span, {with_system_sql("seen", "instructions")} AS base, out
    FROM (
        SELECT rollout_id, n_calls, last_span, {system_text_sql("io[3]")} AS instructions,
               {finish_messages_sql("p_in", "io[1]")} AS seen, {finish_messages_sql("p_out", "io[2]")} AS out
        FROM (SELECT *, {plain_parse_sql("io[1]")} AS p_in, {plain_parse_sql("io[2]")} AS p_out FROM texts)
    )
    """


def _parsed_calls_sql(selected: str | None, use_rowid: bool) -> str:
    """As :func:`_last_calls_sql`, but the messages only parsed (``p_in``, ``p_out``: the plain
    reading) with the system ``instructions`` beside them: :func:`last_calls` normalises them
    in Arrow."""
    return f"""{_texts_sql(selected, use_rowid)}
    SELECT rollout_id, n_calls, last_span, {system_text_sql("io[3]")} AS instructions,
           {plain_parse_sql("io[1]")} AS p_in, {plain_parse_sql("io[2]")} AS p_out
    FROM texts
    """


def _query_last_calls(connection: duckdb.DuckDBPyConnection, selected: str | None, use_rowid: bool) -> pa.Table:
    """:func:`last_calls` for one way of finding the last call (see :func:`_texts_sql`)."""
    parsed = arrow(connection, _parsed_calls_sql(selected, use_rowid))
    full = needs_full_path(parsed.column("p_in")) | needs_full_path(parsed.column("p_out"))
    plain = parsed.filter(pa.array(~full)) if full.any() else parsed
    table = pa.table(
        {
            "rollout_id": plain.column("rollout_id"),
            "n_calls": plain.column("n_calls"),
            "last_span": plain.column("last_span"),
            "base": prepend_system(plain_messages(plain.column("p_in")), plain.column("instructions")),
            "out": plain_messages(plain.column("p_out")),
        }
    )
    if not full.any():
        return table
    # the rows the plain reading does not cover (list contents, GenAI parts...): all in SQL
    ids = parsed.select(["rollout_id"]).filter(pa.array(full))
    with registered(connection, ids, "full_path") as name:
        rest = arrow(connection, _last_calls_sql(name, use_rowid))
    return pa.concat_tables([table, rest.cast(table.schema)])


def last_calls(connection: duckdb.DuckDBPyConnection, selected: str | None) -> pa.Table:
    """``rollout_id, n_calls, last_span, base, out`` for the rollouts of ``selected`` (every
    rollout when ``None``) with LLM calls (``base``/``out``: the last call's normalised input
    messages, after a ``system`` message from its instructions (:func:`with_system_sql`), and
    output messages). The SQL parses the messages; the common case is normalised with Arrow
    kernels (:mod:`~agent_rl_plugin.data.arrow_messages`), other rows by the SQL of
    :func:`_last_calls_sql` (the same lists either way; rows in no particular order)."""
    try:
        return _query_last_calls(connection, selected, use_rowid=True)
    except duckdb.BinderException:  # spans is not a base table (a view over files): no rowid
        return _query_last_calls(connection, selected, use_rowid=False)


def repair_sql(suspects: str) -> str:
    """The restored conversations (``rollout_id, conversation``) of the rollouts in the
    registered table ``suspects`` (rollout_id, last_span, base, out); see the module docstring."""
    llm_in = attr(sc.GEN_AI_INPUT_MESSAGES, "sp.attributes")
    llm_out = attr(sc.GEN_AI_OUTPUT_MESSAGES, "sp.attributes")
    llm_system = attr(sc.GEN_AI_SYSTEM_INSTRUCTIONS, "sp.attributes")
    return f"""
    WITH earlier_text AS (
        SELECT sp.rollout_id, sp.span_id, sp.start_unix_nano, {llm_in} AS seen_text, {llm_out} AS msgs_text,
               {llm_system} AS system_text
        FROM spans sp JOIN {suspects} s ON s.rollout_id = sp.rollout_id
        WHERE {LLM_WHERE} AND sp.span_id <> s.last_span
    ),
    earlier_raw AS (
        SELECT rollout_id, span_id, start_unix_nano, {system_text_sql("system_text")} AS instructions,
               {messages_sql("seen_text")} AS seen_raw, {messages_sql("msgs_text")} AS msgs
        FROM earlier_text
    ),
    earlier AS (
        SELECT rollout_id, span_id, start_unix_nano, {with_system_sql("seen_raw", "instructions")} AS seen, msgs
        FROM earlier_raw
    ),
    inserts AS (
        SELECT e.rollout_id, len(e.seen) AS pos, e.msgs
        FROM earlier e JOIN {suspects} s ON s.rollout_id = e.rollout_id
        WHERE len(e.seen) BETWEEN 1 AND len(s.base) - 1 AND len(e.msgs) > 0
          AND s.base[len(e.seen) + 1].role <> 'assistant'
          AND {_same_message("s.base[len(e.seen)]", "e.seen[len(e.seen)]")}
          AND {_same_message("s.base[1]", "e.seen[1]")}
        QUALIFY row_number() OVER (PARTITION BY e.rollout_id, len(e.seen)
                                   ORDER BY e.start_unix_nano DESC, e.span_id DESC) = 1
    )
    SELECT rollout_id, list(msg ORDER BY pos, sub, j) AS conversation
    FROM (
        SELECT rollout_id, pos, 0 AS sub, j, msgs[j] AS msg
        FROM (SELECT *, unnest(range(1, len(msgs) + 1)) AS j FROM inserts)
        UNION ALL
        SELECT rollout_id, j - 1 AS pos, 1 AS sub, 0 AS j, base[j] AS msg
        FROM (SELECT *, unnest(range(1, len(base) + 1)) AS j FROM {suspects}
              WHERE rollout_id IN (SELECT rollout_id FROM inserts))
        UNION ALL
        SELECT rollout_id, len(base) AS pos, 2 AS sub, j, out[j] AS msg
        FROM (SELECT *, unnest(range(1, len(out) + 1)) AS j FROM {suspects}
              WHERE len(out) > 0 AND rollout_id IN (SELECT rollout_id FROM inserts))
    )
    GROUP BY rollout_id
    """


def _repair(connection: duckdb.DuckDBPyConnection, last: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """``last`` with the conversations of rollouts that left their own turns out of the history
    restored (in ``base``, ``out`` emptied), and a mask of the repaired rows."""
    n_calls = last.column("n_calls").to_numpy()
    suspect = (n_calls > 1) & (count_assistant(last.column("base")) < n_calls - 1)
    repaired = np.zeros(last.num_rows, dtype=bool)
    if not suspect.any():
        return last, repaired
    suspects = last.filter(pa.array(suspect))
    with registered(connection, suspects, "suspects") as name:
        fixed = arrow(connection, repair_sql(name))
    if fixed.num_rows == 0:
        return last, repaired
    index = {rid: i for i, rid in enumerate(fixed.column("rollout_id").to_pylist())}
    rows = [index.get(rid, -1) for rid in last.column("rollout_id").to_pylist()]
    repaired = np.array([r >= 0 for r in rows])
    base_type = last.schema.field("base").type
    conversations = fixed.column("conversation").cast(base_type).combine_chunks()
    new_base = pc.if_else(
        pa.array(repaired),
        conversations.take(pa.array([max(r, 0) for r in rows])),
        last.column("base").combine_chunks(),
    )
    empty = pa.array([[]] * last.num_rows, base_type)
    new_out = pc.if_else(pa.array(repaired), empty, last.column("out").combine_chunks())
    last = last.set_column(last.column_names.index("base"), "base", new_base)
    last = last.set_column(last.column_names.index("out"), "out", new_out)
    return last, repaired


@dataclass
class Conversations:
    """Row ``i``: rollout ``rollout_id[i]`` has the conversation ``base[i] + out[i]``, split
    before message ``k[i]`` (-1: no assistant message, 0: starts with one; such rows are
    dropped, ``drop_reason`` says why). ``source``: llm, repaired or io."""

    table: pa.Table  # rollout_id, base, out
    k: np.ndarray
    source: np.ndarray
    drop_reason: np.ndarray
    _flat: FlatConversations | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def rollout_ids(self) -> pa.ChunkedArray:
        return self.table.column("rollout_id")

    def messages(self, rows: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """(prompt, completion) of conversations ``rows``, in that order (the flat message
        array is made on the first call and kept: KTO and GRPO built together share it)."""
        base, out = self.table.column("base"), self.table.column("out")
        if self._flat is None:
            self._flat = flatten(base, out)
        return take_split(base, out, self.k, rows, self._flat)


def _reasons(k: np.ndarray) -> np.ndarray:
    # None gives an object array; numpy's stubs leave None out of ArrayLike
    return np.where(k < 0, NO_ASSISTANT, np.where(k == 0, STARTS_WITH_ASSISTANT, None))  # type: ignore[call-overload]


def from_llm_calls(connection: duckdb.DuckDBPyConnection, selected: str | None) -> Conversations:
    """The conversations of the rollouts with LLM messages (a rollout whose last LLM call has no
    readable input messages is not among them). ``selected=None``: of every rollout."""
    last = last_calls(connection, selected)
    has_input = pc.greater(pc.list_value_length(last.column("base")), 0)
    if not pc.all(has_input).as_py():
        last = last.filter(has_input)
    last, repaired = _repair(connection, last)
    k = first_assistant(last.column("base"), last.column("out"))
    source = np.where(k <= 0, None, np.where(repaired, "repaired", "llm"))  # type: ignore[call-overload]  # None: see _reasons
    return Conversations(last.select(["rollout_id", "base", "out"]), k, source, _reasons(k))


def io_sql(missing: str) -> str:
    """SQL building prompt and completion from the agent's input and output, for the rollouts of
    the registered table ``missing`` (rollout_id, task_id)."""
    root_in = f"arg_min({attr(sc.ROLLOUT_INPUT)}, start_unix_nano) FILTER (WHERE is_rollout_root)"
    agent_in = f"arg_min({attr(sc.ROLLOUT_INPUT)}, start_unix_nano) FILTER (WHERE {AGENT_CONDITION})"
    root_out = f"arg_min({attr(sc.ROLLOUT_OUTPUT)}, start_unix_nano) FILTER (WHERE is_rollout_root)"
    agent_out = f"arg_min({attr(sc.ROLLOUT_OUTPUT)}, start_unix_nano) FILTER (WHERE {AGENT_CONDITION})"
    input_json = "try(CAST(io.input AS JSON))"
    output_json = "try(CAST(io.output AS JSON))"
    input_text = f"coalesce(t.prompt, {text_of_sql(input_json)}, io.input, '')"
    output_text = f"coalesce({text_of_sql(output_json)}, io.output)"
    messages = f"{input_json}->'$.messages'"
    prompt = (
        f"CASE WHEN json_type({messages}) = 'ARRAY' AND json_array_length({messages}) > 0 "
        f"THEN {messages_sql(messages)} ELSE {_one_message('user', input_text)} END"
    )
    return f"""
    WITH io AS (
        SELECT rollout_id, coalesce({root_in}, {agent_in}) AS input, coalesce({root_out}, {agent_out}) AS output
        FROM spans WHERE rollout_id IN (SELECT rollout_id FROM {missing})
        GROUP BY rollout_id
    )
    SELECT m.rollout_id,
           CASE WHEN {output_text} <> '' THEN 'io' END AS source,
           {prompt} AS prompt,
           CASE WHEN {output_text} <> '' THEN {_one_message("assistant", output_text)} END AS completion,
           CASE WHEN coalesce({output_text}, '') = '' THEN '{NO_CONTENT}' END AS drop_reason
    FROM {missing} m
    LEFT JOIN io ON io.rollout_id = m.rollout_id
    LEFT JOIN tasks t ON t.task_id = m.task_id
    """


def conversations(connection: duckdb.DuckDBPyConnection, selected: str, everything: bool = False) -> Conversations:
    """The conversations of every rollout of the registered table ``selected`` (rollout_id,
    task_id): from the LLM calls, else from the agent's input and output. ``everything``:
    ``selected`` holds every rollout of the store (the LLM calls need no filter; conversations
    of spans outside it may be returned and are ignored by the caller's join)."""
    llm = from_llm_calls(connection, None if everything else selected)
    with registered(connection, llm.table.select(["rollout_id"]), "with_llm") as done:
        missing = arrow(
            connection,
            f"SELECT rollout_id, task_id FROM {selected} s ANTI JOIN {done} d ON d.rollout_id = s.rollout_id",
        )
    if missing.num_rows == 0:
        return llm
    with registered(connection, missing, "missing") as m:
        io = arrow(connection, io_sql(m))
    kind = llm.table.schema.field("base").type
    prompt = io.column("prompt").cast(kind)
    completion = pc.fill_null(io.column("completion").cast(kind).combine_chunks(), pa.scalar([], kind))
    io_table = pa.table({"rollout_id": io.column("rollout_id"), "base": prompt, "out": completion})
    io_k = np.where(
        pc.is_valid(io.column("completion")).to_numpy(zero_copy_only=False),
        pc.list_value_length(prompt).to_numpy(zero_copy_only=False),
        -2,
    )
    io_reason = np.array(io.column("drop_reason").to_pylist(), dtype=object)
    io_source = np.where(io_k >= 0, "io", None)  # type: ignore[call-overload]  # None: see _reasons
    table = pa.concat_tables([llm.table, io_table.cast(llm.table.schema)])
    return Conversations(
        table,
        np.concatenate([llm.k, io_k]),
        np.concatenate([llm.source, io_source]),
        np.concatenate([llm.drop_reason, io_reason]),
    )


__all__ = [
    "Conversations",
    "conversations",
    "from_llm_calls",
    "io_sql",
    "last_calls",
    "NO_ASSISTANT",
    "NO_CONTENT",
    "STARTS_WITH_ASSISTANT",
]
