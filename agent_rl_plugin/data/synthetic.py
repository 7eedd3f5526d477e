"""Synthetic stores for benchmarks and tests: many tool-using rollouts written straight into
``spans`` and ``rewards`` with SQL (no OTel, no Python per span), following the store's schema.

Each rollout has ``2 * llm_calls`` spans: a root ``invoke_agent`` span (with the agent's input
and output), ``llm_calls`` chat spans and ``llm_calls - 1`` tool spans. Chat call ``k`` sees
the system and user messages plus the ``k`` earlier assistant tool calls and tool results (a
well-behaved agent: every call sends the whole history) and answers with the next tool call,
or the final answer for the last call. Rewards: ``correct`` (emitted, 0 or 1) and
``tool_success`` (a plugin row, in [0, 1]), deterministic functions of the rollout number.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any, Mapping, Sequence

import duckdb

BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
SYSTEM_PROMPT = (
    "You are a careful shopping assistant. Look every price up with the lookup tool before you "
    "compute, and answer with the total only."
)


def _sql(rollouts: int, llm_calls: int, group_size: int, n_tasks: int) -> str:
    k_max = llm_calls - 1
    sys_msg = f"json_object('role', 'system', 'content', '{SYSTEM_PROMPT}')"
    user_msg = (
        "json_object('role', 'user', 'content', 'How much do ' || (t % 7 + 1) || ' notebooks and ' || "
        "(t % 5 + 1) || ' pens cost in total? Task ' || t || '.')"
    )
    call = (
        "json_object('role', 'assistant', 'content', '', 'tool_calls', json_array(json_object("
        "'id', 'call-' || {j}, 'name', 'lookup', 'arguments', json_object('item', 'item-' || {j}))))"
    )
    tool = "json_object('role', 'tool', 'tool_call_id', 'call-' || {j}, 'content', CAST({j} * 1.5 + r % 3 AS VARCHAR))"
    answer = "json_object('role', 'assistant', 'content', 'The total is ' || (r % 11) || '.00.')"
    history = f"flatten(list_transform(range(k), lambda j: [{call.format(j='j')}, {tool.format(j='j')}]))"
    input_messages = f"CAST(to_json(list_concat([{sys_msg}, {user_msg}], {history})) AS VARCHAR)"
    output_messages = f"CAST(to_json([CASE WHEN k < {k_max} THEN {call.format(j='k')} ELSE {answer} END]) AS VARCHAR)"
    ids = "'agent_rl.rollout.id', rollout_id, 'agent_rl.task.id', task_id, 'agent_rl.group.id', group_id"
    return f"""
    WITH base AS (
        SELECT range AS r, range // {group_size} AS g, (range // {group_size}) % {n_tasks} AS t,
               lpad(to_hex(range + 1), 32, '0') AS rollout_id
        FROM range({rollouts})
    ),
    ids AS (
        SELECT *, 'task-' || t AS task_id, 'group-' || g AS group_id FROM base
    ),
    s AS (
        SELECT ids.*, range AS s,
               CASE WHEN range = 0 THEN 'root' WHEN range % 2 = 1 THEN 'llm' ELSE 'tool' END AS what,
               CASE WHEN range % 2 = 1 THEN (range - 1) // 2 ELSE range // 2 - 1 END AS k
        FROM ids, range({2 * llm_calls})
    ),
    rows AS (
        SELECT *,
               {BASE_NS} + r * 1000000000 + s * 1000000 AS start_ns,
               CASE what
                 WHEN 'root' THEN json_object('gen_ai.operation.name', 'invoke_agent', 'gen_ai.agent.name', 'shopper',
                     'agent_rl.span.kind', 'agent', 'agent_rl.rollout.root', true,
                     'agent_rl.input', CAST(to_json(json_object('question', 'How much? Task ' || t || '.')) AS VARCHAR),
                     'agent_rl.output', CAST(to_json('The total is ' || (r % 11) || '.00.') AS VARCHAR), {ids})
                 WHEN 'llm' THEN json_object('gen_ai.operation.name', 'chat', 'agent_rl.span.kind', 'llm',
                     'gen_ai.request.model', 'shopper-1', 'gen_ai.usage.input_tokens', 40 + 20 * k,
                     'gen_ai.usage.output_tokens', 12,
                     'gen_ai.input.messages', {input_messages}, 'gen_ai.output.messages', {output_messages}, {ids})
                 ELSE json_object('gen_ai.operation.name', 'execute_tool', 'agent_rl.span.kind', 'tool',
                     'gen_ai.tool.name', 'lookup', 'gen_ai.tool.call.id', 'call-' || k,
                     'gen_ai.tool.call.arguments', CAST(to_json(json_object('item', 'item-' || k)) AS VARCHAR),
                     'gen_ai.tool.call.result', CAST(k * 1.5 + r % 3 AS VARCHAR), {ids})
               END AS attributes
        FROM s
    )
    SELECT rollout_id AS trace_id,
           lpad(to_hex(r * 64 + s + 1), 16, '0') AS span_id,
           CASE WHEN s = 0 THEN NULL ELSE lpad(to_hex(r * 64 + 1), 16, '0') END AS parent_span_id,
           CASE what WHEN 'root' THEN 'invoke_agent shopper' WHEN 'llm' THEN 'chat shopper-1' ELSE 'execute_tool lookup' END AS name,
           CASE what WHEN 'llm' THEN 'CLIENT' ELSE 'INTERNAL' END AS kind,
           make_timestamp(start_ns // 1000) AS start_time,
           make_timestamp((start_ns + 500000) // 1000) AS end_time,
           0.5 AS duration_ms,
           'UNSET' AS status_code, NULL AS status_message,
           attributes, CAST('[]' AS JSON) AS events, CAST('[]' AS JSON) AS links,
           CAST('{{"service.name": "bench"}}' AS JSON) AS resource,
           'bench' AS scope_name, '0' AS scope_version, 'bench' AS service_name,
           rollout_id, task_id, group_id, s = 0 AS is_rollout_root,
           CASE what WHEN 'root' THEN 'invoke_agent' WHEN 'llm' THEN 'chat' ELSE 'execute_tool' END AS operation,
           CASE what WHEN 'root' THEN 'agent' ELSE what END AS span_kind,
           start_ns AS start_unix_nano, start_ns + 500000 AS end_unix_nano,
           make_timestamp({BASE_NS} // 1000) AS ingested_at
    FROM rows
    """


def _rewards_sql(rollouts: int) -> str:
    return f"""
    SELECT 'r-' || range || '-' || name AS reward_id, lpad(to_hex(range + 1), 32, '0') AS rollout_id,
           NULL AS step_index, name,
           CASE name WHEN 'correct' THEN CAST(hash(range, 'c') % 100 < 55 AS DOUBLE)
                     ELSE (hash(range, 't') % 101) / 100.0 END AS value,
           NULL AS label, NULL AS reason, NULL AS metrics,
           CASE name WHEN 'correct' THEN NULL ELSE 'tool_success' END AS plugin,
           CASE name WHEN 'correct' THEN NULL ELSE '1.0' END AS plugin_version,
           CASE name WHEN 'correct' THEN 'emitted' ELSE 'code' END AS source,
           NULL AS input_hash, make_timestamp({BASE_NS} // 1000 + range) AS created_at,
           NULL AS error, NULL AS trace_id, NULL AS span_id
    FROM range({rollouts}), (SELECT unnest(['correct', 'tool_success']) AS name)
    """


def synthesize_store(
    db: str | os.PathLike[str] | duckdb.DuckDBPyConnection,
    rollouts: int = 1000,
    llm_calls: int = 5,
    group_size: int = 4,
    n_tasks: int = 100,
    rewards: bool = True,
) -> dict[str, Any]:
    """Write ``rollouts`` synthetic rollouts (``2 * llm_calls`` spans each) and their rewards into
    the store ``db`` (a path, created and migrated, or a read-write connection). Returns counts."""
    if llm_calls < 1 or rollouts < 1 or group_size < 1:
        raise ValueError("rollouts, llm_calls and group_size must be >= 1")
    from agent_rl_plugin.store import connect_writer

    own = not isinstance(db, duckdb.DuckDBPyConnection)
    connection = db if isinstance(db, duckdb.DuckDBPyConnection) else connect_writer(os.fspath(db))
    try:
        connection.execute(f"INSERT INTO spans {_sql(rollouts, llm_calls, group_size, n_tasks)}")
        if rewards:
            connection.execute(f"INSERT INTO rewards {_rewards_sql(rollouts)}")
        connection.execute("CHECKPOINT")
    finally:
        if own:
            connection.close()
    return {"rollouts": rollouts, "spans": rollouts * 2 * llm_calls, "rewards": 2 * rollouts if rewards else 0}


__all__ = ["synthesize_store", "write_reward", "write_rollout"]


def write_rollout(
    connection: duckdb.DuckDBPyConnection,
    rollout_id: str,
    *,
    llm_calls: Sequence[tuple[Any, Any]] = (),
    task_id: str | None = None,
    group_id: str | None = None,
    agent_input: Any = None,
    agent_output: Any = None,
    rewards: Mapping[str, float] | None = None,
    start_s: float = 0.0,
    llm_attributes: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Write one rollout precisely (for tests and examples): a root agent span with
    ``agent_input``/``agent_output`` (JSON-encoded), one chat span per ``(input_messages,
    output_messages)`` of ``llm_calls`` (lists are JSON-encoded, strings stored as given), and
    ``rewards`` as code-plugin episode rows. ``llm_attributes`` adds attributes per call."""
    base = BASE_NS + int(start_s * 1e9)
    ids = {"agent_rl.rollout.id": rollout_id}
    if task_id is not None:
        ids["agent_rl.task.id"] = task_id
    if group_id is not None:
        ids["agent_rl.group.id"] = group_id
    root: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "agent_rl.span.kind": "agent",
        "agent_rl.rollout.root": True,
        **ids,
    }
    if agent_input is not None:
        root["agent_rl.input"] = json.dumps(agent_input)
    if agent_output is not None:
        root["agent_rl.output"] = json.dumps(agent_output)
    rows: list[tuple[str, str | None, str, str, bool, dict[str, Any]]] = [
        ("invoke_agent agent", None, "invoke_agent", "agent", True, root)
    ]
    for i, (inp, out) in enumerate(llm_calls):
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "agent_rl.span.kind": "llm",
            "gen_ai.request.model": "m",
            **ids,
        }
        for key, value in (("gen_ai.input.messages", inp), ("gen_ai.output.messages", out)):
            if value is not None:
                attributes[key] = value if isinstance(value, str) else json.dumps(value)
        if llm_attributes and i < len(llm_attributes):
            attributes.update(llm_attributes[i])
        rows.append(("chat m", "root", "chat", "llm", False, attributes))
    trace = rollout_id.replace("-", "")[:32].rjust(32, "0")
    for n, (name, parent, operation, kind, is_root, attributes) in enumerate(rows):
        start = base + n * 1_000_000
        connection.execute(
            "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms, "
            "status_code, attributes, events, links, resource, rollout_id, task_id, group_id, is_rollout_root, "
            "operation, span_kind, start_unix_nano, end_unix_nano, ingested_at) VALUES "
            "(?, ?, ?, ?, 'INTERNAL', make_timestamp(?::BIGINT // 1000), make_timestamp(?::BIGINT // 1000), 0.5, "
            "'UNSET', ?, '[]', '[]', '{}', ?, ?, ?, ?, ?, ?, ?, ?, make_timestamp(?::BIGINT // 1000))",
            [
                trace,
                f"{n + 1:016x}",
                None if parent is None else f"{1:016x}",
                name,
                start,
                start + 500_000,
                json.dumps(attributes),
                rollout_id,
                task_id,
                group_id,
                is_root,
                operation,
                kind,
                start,
                start + 500_000,
                base,
            ],
        )
    for name, value in (rewards or {}).items():
        write_reward(connection, rollout_id, name, value)


def write_reward(
    connection: duckdb.DuckDBPyConnection,
    rollout_id: str,
    name: str,
    value: float | None,
    *,
    source: str = "code",
    step_index: int | None = None,
    error: str | None = None,
    created_s: float = 0.0,
) -> None:
    """Append one row to ``rewards``."""
    connection.execute(
        "INSERT INTO rewards (reward_id, rollout_id, step_index, name, value, plugin, plugin_version, source, "
        "created_at, error) VALUES (?, ?, ?, ?, ?, ?, '1', ?, make_timestamp(?::BIGINT), ?)",
        [
            f"{rollout_id}-{name}-{next(_reward_ids)}",
            rollout_id,
            step_index,
            name,
            value,
            None if source == "emitted" else name,
            source,
            BASE_NS // 1000 + int(created_s * 1e6),
            error,
        ],
    )


_reward_ids = itertools.count()
