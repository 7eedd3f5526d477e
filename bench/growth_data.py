"""The synthetic rollouts of the growth benchmark (bench/growth.py): SQL that makes them as rows
of the exporter's Arrow schemas, and Python mirrors of what it writes (for the checks).

Rollout ``r`` (a number) has 10 spans: a root ``invoke_agent`` span carrying two reward events
(``correct`` and ``tool_success``), 5 chat spans whose input is the whole history so far, and 4
tool spans; ids are md5 hex (random-looking, as real ones are); rollout ``r`` starts ``r``
seconds after 2026-01-01, its spans 1 ms apart; groups of 4 rollouts share a group and a task,
and 1000 tasks cycle.
"""

from __future__ import annotations

import hashlib

import duckdb
import pyarrow as pa

from agent_rl_plugin.store.rows import REWARD_SCHEMA, SPAN_SCHEMA

SPANS_PER_ROLLOUT = 10  # root + 5 chat + 4 tool spans
LLM_CALLS = 5
GROUP_SIZE = 4
N_TASKS = 1000
BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


# --- what the generator writes (Python mirrors of the SQL, for the checks) -----------------
def rollout_id(r: int) -> str:
    """Id of rollout number ``r`` (also its trace id)."""
    return hashlib.md5(f"rollout-{r}".encode()).hexdigest()


def span_id(r: int, s: int) -> str:
    """Id of span ``s`` (0 the root) of rollout ``r``."""
    return hashlib.md5(f"span-{r}-{s}".encode()).hexdigest()[:16]


def task_of(r: int) -> str:
    return f"task-{(r // GROUP_SIZE) % N_TASKS}"


def rewards_of(r: int) -> dict[str, float]:
    """The two episode rewards of rollout ``r``."""
    return {"correct": 1.0 if (r * 7919) % 100 < 55 else 0.0, "tool_success": ((r * 104729) % 101) / 100}


def reward_of(r: int) -> float:
    """The combined episode reward (mean over names, weight 1) of rollout ``r``."""
    values = rewards_of(r)
    return sum(values.values()) / len(values)


_CALL = (
    "json_object('role', 'assistant', 'content', '', 'tool_calls', json_array(json_object("
    "'id', 'call-' || {j}, 'name', 'lookup', 'arguments', json_object('item', 'item-' || {j}))))"
)
_TOOL = "json_object('role', 'tool', 'tool_call_id', 'call-' || {j}, 'content', CAST({j} * 1.5 + r % 3 AS VARCHAR))"
_CORRECT = "CASE WHEN (r * 7919) % 100 < 55 THEN 1.0 ELSE 0.0 END"
_TOOL_SUCCESS = "((r * 104729) % 101) / 100"
_IDS = "'agent_rl.rollout.id', rollout_id, 'agent_rl.task.id', task_id, 'agent_rl.group.id', group_id"


def spans_sql(first: int, count: int) -> str:
    """SELECT of rollouts ``first .. first + count - 1`` as rows of ``SPAN_SCHEMA``, in time order."""
    history = f"flatten(list_transform(range(k), lambda j: [{_CALL.format(j='j')}, {_TOOL.format(j='j')}]))"
    system = "json_object('role', 'system', 'content', 'You are a careful shopping assistant. Look prices up.')"
    user = "json_object('role', 'user', 'content', 'How much do ' || (r % 7 + 1) || ' notebooks cost? Task ' || t)"
    answer = "json_object('role', 'assistant', 'content', 'The total is ' || (r % 11) || '.00.')"
    last = LLM_CALLS - 1
    return f"""
WITH base AS (
    SELECT range AS r, (range // {GROUP_SIZE}) % {N_TASKS} AS t, md5('rollout-' || range) AS rollout_id,
           'task-' || ((range // {GROUP_SIZE}) % {N_TASKS}) AS task_id, 'group-' || (range // {GROUP_SIZE}) AS group_id
    FROM range({first}, {first + count})
), s AS (
    SELECT base.*, range AS s,
           CASE WHEN range = 0 THEN 'root' WHEN range % 2 = 1 THEN 'llm' ELSE 'tool' END AS what,
           CASE WHEN range % 2 = 1 THEN (range - 1) // 2 ELSE range // 2 - 1 END AS k
    FROM base, range({SPANS_PER_ROLLOUT})
)
SELECT rollout_id AS trace_id, substr(md5('span-' || r || '-' || s), 1, 16) AS span_id,
    CASE WHEN s = 0 THEN NULL ELSE substr(md5('span-' || r || '-0'), 1, 16) END AS parent_span_id,
    CASE what WHEN 'root' THEN 'invoke_agent shopper' WHEN 'llm' THEN 'chat shopper-1'
              ELSE 'execute_tool lookup' END AS name,
    CASE what WHEN 'llm' THEN 'CLIENT' ELSE 'INTERNAL' END AS kind,
    'UNSET' AS status_code, CAST(NULL AS VARCHAR) AS status_message,
    CAST(CASE what
      WHEN 'root' THEN json_object('gen_ai.operation.name', 'invoke_agent', 'gen_ai.agent.name', 'shopper',
          'agent_rl.span.kind', 'agent', 'agent_rl.rollout.root', true,
          'agent_rl.input', CAST(to_json(json_object('question', 'How much? Task ' || t)) AS VARCHAR),
          'agent_rl.output', CAST(to_json('The total is ' || (r % 11) || '.00.') AS VARCHAR), {_IDS})
      WHEN 'llm' THEN json_object('gen_ai.operation.name', 'chat', 'agent_rl.span.kind', 'llm',
          'gen_ai.request.model', 'shopper-1', 'gen_ai.usage.input_tokens', 40 + 20 * k,
          'gen_ai.usage.output_tokens', 12,
          'gen_ai.input.messages', CAST(to_json(list_concat([{system}, {user}], {history})) AS VARCHAR),
          'gen_ai.output.messages', CAST(to_json([CASE WHEN k < {last} THEN {_CALL.format(j="k")}
                                                       ELSE {answer} END]) AS VARCHAR), {_IDS})
      ELSE json_object('gen_ai.operation.name', 'execute_tool', 'agent_rl.span.kind', 'tool',
          'gen_ai.tool.name', 'lookup', 'gen_ai.tool.call.id', 'call-' || k,
          'gen_ai.tool.call.arguments', CAST(to_json(json_object('item', 'item-' || k)) AS VARCHAR),
          'gen_ai.tool.call.result', CAST(k * 1.5 + r % 3 AS VARCHAR), {_IDS})
    END AS VARCHAR) AS attributes,
    CASE WHEN s = 0 THEN CAST(to_json([
        {{'name': 'gen_ai.evaluation.result', 'time': {BASE_NS} + r * 1000000000 + 9000000,
          'attributes': {{'gen_ai.evaluation.name': 'correct', 'gen_ai.evaluation.score.value': {_CORRECT}}}}},
        {{'name': 'gen_ai.evaluation.result', 'time': {BASE_NS} + r * 1000000000 + 9000000,
          'attributes': {{'gen_ai.evaluation.name': 'tool_success', 'gen_ai.evaluation.score.value': {_TOOL_SUCCESS}}}}}
    ]) AS VARCHAR) ELSE '[]' END AS events, '[]' AS links, '{{"service.name":"shop"}}' AS resource,
    'bench' AS scope_name, '1' AS scope_version, 'shop' AS service_name,
    {BASE_NS} + r * 1000000000 + s * 1000000 AS start_unix_nano,
    {BASE_NS} + r * 1000000000 + s * 1000000 + 500000 AS end_unix_nano
FROM s ORDER BY r, s"""


def rewards_sql(first: int, count: int) -> str:
    """SELECT of the rewards of rollouts ``first ..`` as rows of ``REWARD_SCHEMA``: what the
    converter makes of the root span's two reward events."""
    return f"""
SELECT md5('reward-' || r || '-' || name) AS reward_id, md5('rollout-' || r) AS rollout_id,
    CAST(NULL AS INTEGER) AS step_index, name,
    CASE name WHEN 'correct' THEN {_CORRECT} ELSE {_TOOL_SUCCESS} END AS value,
    CAST(NULL AS VARCHAR) AS label, CAST(NULL AS VARCHAR) AS reason, CAST(NULL AS VARCHAR) AS metrics,
    'emitted' AS source, {BASE_NS} + r * 1000000000 + 9000000 AS created_unix_nano,
    md5('rollout-' || r) AS trace_id, substr(md5('span-' || r || '-0'), 1, 16) AS span_id
FROM (SELECT range AS r FROM range({first}, {first + count})), (SELECT unnest(['correct', 'tool_success']) AS name)
ORDER BY r, name"""


class Generator:
    """Arrow batches of synthetic rollouts, made by an in-memory DuckDB."""

    def __init__(self) -> None:
        self.connection = duckdb.connect()

    def batch(self, first: int, count: int) -> tuple[pa.Table, pa.Table]:
        """(spans, rewards) of rollouts ``first .. first + count - 1``."""
        spans = self.connection.sql(spans_sql(first, count)).to_arrow_table().cast(SPAN_SCHEMA)
        rewards = self.connection.sql(rewards_sql(first, count)).to_arrow_table().cast(REWARD_SCHEMA)
        return spans, rewards

    def close(self) -> None:
        self.connection.close()
