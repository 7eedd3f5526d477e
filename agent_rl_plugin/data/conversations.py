"""Each rollout's conversation, split into prompt and completion, in one DuckDB query.

Rules (documented in ``docs/datasets.md``):

* The conversation is the **last LLM call's** input messages followed by its output messages
  (a well-behaved agent sends the whole history on every call).
* **Repair**: some agents do not put their own earlier turns back into the history (the tool
  results are there, the assistant messages that asked for them are not). For each earlier
  LLM call with ``n`` input messages, when the last call's input has a non-assistant message at
  position ``n`` (where that call's answer should have been), the earlier call's output is
  inserted there. Such rollouts have ``source = 'repaired'``.
* The **split** is at the first assistant message: the messages before it (system/user...)
  are the prompt, the rest (assistant turns with tool calls, tool results, the final answer)
  the completion.
* A rollout **without LLM messages** (no LLM call, or content not captured) gets the agent's
  input as the prompt (its ``messages`` argument, else the task's prompt, else the input as
  text, as one user message) and its output as one assistant message (``source = 'io'``).
* Left out, with a reason: no assistant message in the conversation, a conversation that starts
  with an assistant message, and rollouts with neither messages nor an output.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from agent_rl_plugin.data.sql import INPUT_MESSAGES, LLM_WHERE, OUTPUT_MESSAGES, arrow, messages_sql, text_of_sql

NO_ASSISTANT = "no assistant message in the conversation"
STARTS_WITH_ASSISTANT = "the conversation starts with an assistant message (empty prompt)"
NO_CONTENT = "no LLM messages and no agent output"


def _one_message(role: str, text: str) -> str:
    return messages_sql(f"json_array(json_object('role', '{role}', 'content', {text}))")


def conversations_sql(selected: str) -> str:
    """SQL returning ``rollout_id, source, prompt, completion, drop_reason`` for every rollout of
    the registered table ``selected`` (columns rollout_id, task_id, input, output)."""
    input_json = "try(CAST(sel.input AS JSON))"
    output_json = "try(CAST(sel.output AS JSON))"
    input_text = f"coalesce(t.prompt, {text_of_sql(input_json)}, sel.input, '')"
    output_text = f"coalesce({text_of_sql(output_json)}, sel.output)"
    io_prompt = (
        f"CASE WHEN json_type({input_json}->'$.messages') = 'ARRAY' AND json_array_length({input_json}->'$.messages') > 0 "
        f"THEN {messages_sql(f'{input_json}->' + chr(39) + '$.messages' + chr(39))} "
        f"ELSE {_one_message('user', input_text)} END"
    )
    io_completion = f"CASE WHEN {output_text} <> '' THEN {_one_message('assistant', output_text)} END"
    return f"""
    WITH llm AS (
        SELECT rollout_id, span_id, start_unix_nano,
               {INPUT_MESSAGES} AS input_messages, {OUTPUT_MESSAGES} AS output_messages
        FROM spans
        WHERE {LLM_WHERE} AND rollout_id IN (SELECT rollout_id FROM {selected})
    ),
    ranked AS (
        SELECT *, row_number() OVER (PARTITION BY rollout_id ORDER BY start_unix_nano DESC, span_id DESC) AS rev
        FROM llm
    ),
    last AS (
        SELECT rollout_id, {messages_sql('input_messages')} AS base, {messages_sql('output_messages')} AS out
        FROM ranked WHERE rev = 1
    ),
    inserts AS (
        SELECT e.rollout_id, e.pos, {messages_sql('e.output_messages')} AS msgs
        FROM (SELECT rollout_id, start_unix_nano, output_messages,
                     CAST(try(json_array_length(input_messages)) AS BIGINT) AS pos
              FROM ranked WHERE rev > 1) e
        JOIN last l ON l.rollout_id = e.rollout_id
        WHERE e.pos < len(l.base) AND l.base[e.pos + 1].role <> 'assistant'
        QUALIFY row_number() OVER (PARTITION BY e.rollout_id, e.pos ORDER BY e.start_unix_nano DESC) = 1
    ),
    repaired AS (
        SELECT rollout_id, list(msg ORDER BY pos, sub, j) AS conversation
        FROM (
            SELECT rollout_id, pos, 0 AS sub, j, msgs[j] AS msg
            FROM (SELECT *, unnest(range(1, len(msgs) + 1)) AS j FROM inserts WHERE len(msgs) > 0)
            UNION ALL
            SELECT rollout_id, j - 1 AS pos, 1 AS sub, 0 AS j, base[j] AS msg
            FROM (SELECT *, unnest(range(1, len(base) + 1)) AS j FROM last
                  WHERE rollout_id IN (SELECT rollout_id FROM inserts))
            UNION ALL
            SELECT rollout_id, len(base) AS pos, 2 AS sub, j, out[j] AS msg
            FROM (SELECT *, unnest(range(1, len(out) + 1)) AS j FROM last
                  WHERE len(out) > 0 AND rollout_id IN (SELECT rollout_id FROM inserts))
        )
        GROUP BY rollout_id
    ),
    conv AS (
        SELECT l.rollout_id,
               coalesce(r.conversation, list_concat(l.base, l.out)) AS conversation,
               r.rollout_id IS NOT NULL AS was_repaired
        FROM last l LEFT JOIN repaired r ON r.rollout_id = l.rollout_id
    ),
    split AS (
        SELECT rollout_id, conversation, was_repaired,
               list_position(list_transform(conversation, lambda m: m.role), 'assistant') AS k
        FROM conv WHERE len(conversation) > 0
    ),
    io AS (
        SELECT sel.rollout_id, {io_prompt} AS prompt, {io_completion} AS completion
        FROM {selected} sel
        LEFT JOIN tasks t ON t.task_id = sel.task_id
        WHERE sel.rollout_id NOT IN (SELECT rollout_id FROM split)
    )
    SELECT rollout_id,
           CASE WHEN k IS NULL OR k = 1 THEN NULL WHEN was_repaired THEN 'repaired' ELSE 'llm' END AS source,
           CASE WHEN k > 1 THEN conversation[1:k - 1] END AS prompt,
           CASE WHEN k > 1 THEN conversation[k:] END AS completion,
           CASE WHEN k IS NULL THEN '{NO_ASSISTANT}' WHEN k = 1 THEN '{STARTS_WITH_ASSISTANT}' END AS drop_reason
    FROM split
    UNION ALL
    SELECT rollout_id,
           CASE WHEN completion IS NOT NULL THEN 'io' END AS source,
           prompt,
           completion,
           CASE WHEN completion IS NULL THEN '{NO_CONTENT}' END AS drop_reason
    FROM io
    """


def conversations(connection: duckdb.DuckDBPyConnection, selected: str) -> pa.Table:
    """Run :func:`conversations_sql` (``selected`` is a registered table or view name)."""
    return arrow(connection, conversations_sql(selected))


__all__ = ["conversations", "conversations_sql", "NO_ASSISTANT", "NO_CONTENT", "STARTS_WITH_ASSISTANT"]
