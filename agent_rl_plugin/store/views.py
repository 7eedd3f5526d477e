"""The canonical SQL views over ``spans`` and ``rewards``.

Contract:

* Every view is created by a migration (:mod:`agent_rl_plugin.store.migrations`). The SQL below
  is **frozen once released**: the dicts ``VIEWS_V1`` (and later ``VIEWS_V2``...) are applied by
  named migrations, so changing a view means adding a new dict and a new migration with
  ``CREATE OR REPLACE VIEW``, never editing an old one (``tests/test_store_migrations.py`` pins
  a hash of every migration's SQL).
* Attribute names come from :mod:`agent_rl_plugin.semconv`; JSON paths quote the keys because
  they contain dots (``attributes->>'$."gen_ai.tool.name"'``).
* Content columns (messages, arguments, results, input, output) are ``VARCHAR`` holding the JSON
  text as recorded (it may be cut and end with a truncation marker, so it is not cast to JSON).
* ``status`` is ``'ok'``, ``'error'`` or (rollouts, agents) ``'cancelled'``; ``error`` is the
  status message, else ``error.type``, and is ``NULL`` unless the status is not ``'ok'``.
* Timestamps are UTC ``TIMESTAMP`` (microseconds); ``duration_ms`` is ``DOUBLE``.
* The episode reward has one definition, the ``episode_rewards`` view (:data:`EPISODE_REWARDS_V1`
  states its rule, :data:`EPISODE_REWARDS_V2` adds each name's ``weight`` from the
  ``reward_weights`` table, 1.0 when none is recorded); ``rollouts.total_reward`` and every reader
  of episode rewards (advantages, datasets, reports, the CLI) go through it, with
  :func:`combined_reward_sql` combining names: sum(weight * value) / sum(weight) over the names
  a rollout has (:data:`COMBINED_REWARD`). Readers given explicit reward names or weights apply
  those instead of the recorded ones.
"""

from __future__ import annotations

from agent_rl_plugin import semconv as sc


def _a(key: str, column: str = "attributes") -> str:
    """``column->>'$."key"'``: the text of one attribute (``NULL`` when absent)."""
    return f"{column}->>'$.\"{key}\"'"


def _ea(key: str) -> str:
    """The text of one attribute of a span event held in the JSON value ``event``."""
    return f"event->>'$.attributes.\"{key}\"'"


def _in(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


LLM_CONDITION = f"(operation IN {_in(sc.LLM_OPERATIONS)} OR span_kind = '{sc.SPAN_KIND_LLM}')"
TOOL_CONDITION = f"(operation = '{sc.OP_EXECUTE_TOOL}' OR span_kind = '{sc.SPAN_KIND_TOOL}')"
AGENT_CONDITION = f"(operation = '{sc.OP_INVOKE_AGENT}' OR span_kind = '{sc.SPAN_KIND_AGENT}')"
_CANCELLED = f"coalesce({_a(sc.CANCELLED)} = 'true', false)"
_STATUS = "CASE WHEN status_code = 'ERROR' THEN 'error' ELSE 'ok' END"
_STATUS_CANCELLED = f"CASE WHEN {_CANCELLED} THEN 'cancelled' WHEN status_code = 'ERROR' THEN 'error' ELSE 'ok' END"
_AGENT_NAME = f"coalesce({_a(sc.GEN_AI_AGENT_NAME)}, regexp_replace(name, '^{sc.OP_INVOKE_AGENT} ', ''))"
_ERROR_TYPE = f"CASE WHEN status_code = 'ERROR' THEN {_a(sc.ERROR_TYPE)} END"
_ERROR = (
    f"CASE WHEN status_code = 'ERROR' OR {_CANCELLED} "
    f"THEN coalesce(nullif(status_message, ''), {_a(sc.ERROR_TYPE)}, 'error') END"
)

LLM_CALLS_V1 = f"""CREATE OR REPLACE VIEW llm_calls AS
SELECT
    rollout_id,
    task_id,
    group_id,
    name,
    operation,
    coalesce({_a(sc.GEN_AI_PROVIDER_NAME)}, {_a(sc.GEN_AI_SYSTEM)}) AS provider,
    {_a(sc.GEN_AI_REQUEST_MODEL)} AS request_model,
    {_a(sc.GEN_AI_RESPONSE_MODEL)} AS response_model,
    TRY_CAST({_a(sc.GEN_AI_USAGE_INPUT_TOKENS)} AS BIGINT) AS input_tokens,
    TRY_CAST({_a(sc.GEN_AI_USAGE_OUTPUT_TOKENS)} AS BIGINT) AS output_tokens,
    {_a(sc.GEN_AI_INPUT_MESSAGES)} AS input_messages,
    {_a(sc.GEN_AI_OUTPUT_MESSAGES)} AS output_messages,
    {_a(sc.REASONING)} AS reasoning,
    {_a(sc.GEN_AI_RESPONSE_FINISH_REASONS)} AS finish_reasons,
    {_STATUS} AS status,
    {_ERROR_TYPE} AS error_type,
    {_ERROR} AS error,
    start_time,
    end_time,
    duration_ms,
    {_a(sc.STATE_KEY)} AS state_key,
    trace_id,
    span_id,
    parent_span_id
FROM spans
WHERE {LLM_CONDITION}"""

TOOL_CALLS_V1 = f"""CREATE OR REPLACE VIEW tool_calls AS
SELECT
    rollout_id,
    task_id,
    group_id,
    coalesce({_a(sc.GEN_AI_TOOL_NAME)}, regexp_replace(name, '^{sc.OP_EXECUTE_TOOL} ', '')) AS tool_name,
    {_a(sc.GEN_AI_TOOL_CALL_ID)} AS call_id,
    {_a(sc.GEN_AI_TOOL_CALL_ARGUMENTS)} AS arguments,
    {_a(sc.GEN_AI_TOOL_CALL_RESULT)} AS result,
    {_STATUS} AS status,
    {_ERROR_TYPE} AS error_type,
    {_ERROR} AS error,
    start_time,
    end_time,
    duration_ms,
    {_a(sc.STATE_KEY)} AS state_key,
    trace_id,
    span_id,
    parent_span_id
FROM spans
WHERE {TOOL_CONDITION}"""

AGENTS_V1 = f"""CREATE OR REPLACE VIEW agents AS
SELECT
    rollout_id,
    task_id,
    group_id,
    {_AGENT_NAME} AS agent_name,
    {_a(sc.GEN_AI_AGENT_ID)} AS agent_id,
    {_a(sc.AGENT_ROLE)} AS role,
    {_a(sc.ROLLOUT_INPUT)} AS input,
    {_a(sc.ROLLOUT_OUTPUT)} AS output,
    {_STATUS_CANCELLED} AS status,
    {_ERROR_TYPE} AS error_type,
    {_ERROR} AS error,
    start_time,
    end_time,
    duration_ms,
    TRY_CAST({_a(sc.STREAM_CHUNKS)} AS BIGINT) AS stream_chunks,
    is_rollout_root,
    trace_id,
    span_id,
    parent_span_id
FROM spans
WHERE {AGENT_CONDITION}"""

# Coordination events: span events named agent_rl.event, plus zero-length event spans that
# carry the event keys as their own attributes (and no agent_rl.event span event).
EVENTS_V1 = f"""CREATE OR REPLACE VIEW events AS
WITH span_events AS (
    SELECT
        rollout_id AS span_rollout_id,
        task_id,
        group_id,
        trace_id,
        span_id,
        unnest(events->'$[*]') AS event,
        generate_subscripts(events->'$[*]', 1) - 1 AS event_index
    FROM spans
    WHERE contains(CAST(events AS VARCHAR), '"{sc.EVENT_NAME}"')
)
SELECT
    coalesce({_ea(sc.ROLLOUT_ID)}, span_rollout_id) AS rollout_id,
    task_id,
    group_id,
    trace_id,
    span_id,
    CAST(event_index AS INTEGER) AS event_index,
    make_timestamp(TRY_CAST(event->>'$.time' AS BIGINT) // 1000) AS time,
    {_ea(sc.EVENT_TYPE)} AS event_type,
    TRY_CAST({_ea(sc.EVENT_ROUND)} AS INTEGER) AS round,
    {_ea(sc.EVENT_AGENT_ID)} AS agent_id,
    {_ea(sc.EVENT_TARGET)} AS target,
    {_ea(sc.EVENT_REASON)} AS reason,
    {_ea(sc.EVENT_CONTENT)} AS content,
    {_ea(sc.EVENT_DATA)} AS data
FROM span_events
WHERE event->>'$.name' = '{sc.EVENT_NAME}'
UNION ALL
SELECT
    rollout_id,
    task_id,
    group_id,
    trace_id,
    span_id,
    CAST(0 AS INTEGER) AS event_index,
    start_time AS time,
    {_a(sc.EVENT_TYPE)} AS event_type,
    TRY_CAST({_a(sc.EVENT_ROUND)} AS INTEGER) AS round,
    {_a(sc.EVENT_AGENT_ID)} AS agent_id,
    {_a(sc.EVENT_TARGET)} AS target,
    {_a(sc.EVENT_REASON)} AS reason,
    {_a(sc.EVENT_CONTENT)} AS content,
    {_a(sc.EVENT_DATA)} AS data
FROM spans
WHERE span_kind = '{sc.SPAN_KIND_EVENT}'
  AND {_a(sc.EVENT_TYPE)} IS NOT NULL
  AND NOT contains(CAST(events AS VARCHAR), '"{sc.EVENT_NAME}"')"""

STEPS_V1 = """CREATE OR REPLACE VIEW steps AS
WITH items AS (
    SELECT rollout_id, task_id, group_id, 'llm' AS kind,
           coalesce(response_model, request_model, name) AS name,
           input_messages AS input, output_messages AS output, status, error,
           trace_id, span_id, -1 AS event_index, start_time, duration_ms, state_key
    FROM llm_calls
    UNION ALL
    SELECT rollout_id, task_id, group_id, 'tool' AS kind,
           tool_name AS name,
           arguments AS input, result AS output, status, error,
           trace_id, span_id, -1 AS event_index, start_time, duration_ms, state_key
    FROM tool_calls
    UNION ALL
    SELECT rollout_id, task_id, group_id, 'event' AS kind,
           event_type AS name,
           data AS input,
           CAST(json_object('agent_id', agent_id, 'target', target, 'reason', reason,
                            'content', content, 'round', round) AS VARCHAR) AS output,
           'ok' AS status, NULL AS error,
           trace_id, span_id, event_index, time AS start_time, NULL AS duration_ms, NULL AS state_key
    FROM events
)
SELECT
    rollout_id,
    task_id,
    group_id,
    CAST(row_number() OVER (PARTITION BY rollout_id ORDER BY start_time, span_id, event_index) - 1
         AS INTEGER) AS step_index,
    kind,
    name,
    input,
    output,
    status,
    error,
    start_time,
    duration_ms,
    state_key,
    trace_id,
    span_id,
    CASE WHEN kind = 'event' THEN event_index END AS event_index
FROM items"""

ROLLOUTS_V1 = f"""CREATE OR REPLACE VIEW rollouts AS
WITH roots AS (
    SELECT *
    FROM spans
    WHERE is_rollout_root
    QUALIFY row_number() OVER (PARTITION BY rollout_id ORDER BY start_unix_nano, span_id) = 1
),
members AS (
    SELECT
        rollout_id,
        count(*) AS n_spans,
        count(*) FILTER (WHERE {LLM_CONDITION}) AS n_llm_calls,
        count(*) FILTER (WHERE {TOOL_CONDITION}) AS n_tool_calls,
        count(*) FILTER (WHERE {TOOL_CONDITION} AND status_code = 'ERROR') AS n_tool_errors,
        CAST(sum(TRY_CAST({_a(sc.GEN_AI_USAGE_INPUT_TOKENS)} AS BIGINT)) FILTER (WHERE {LLM_CONDITION}) AS BIGINT) AS input_tokens,
        CAST(sum(TRY_CAST({_a(sc.GEN_AI_USAGE_OUTPUT_TOKENS)} AS BIGINT)) FILTER (WHERE {LLM_CONDITION}) AS BIGINT) AS output_tokens,
        arg_min({_AGENT_NAME}, start_unix_nano) FILTER (WHERE {AGENT_CONDITION}) AS agent_name,
        arg_min({_a(sc.ROLLOUT_INPUT)}, start_unix_nano) FILTER (WHERE {AGENT_CONDITION}) AS agent_input,
        arg_min({_a(sc.ROLLOUT_OUTPUT)}, start_unix_nano) FILTER (WHERE {AGENT_CONDITION}) AS agent_output
    FROM spans
    WHERE rollout_id IN (SELECT rollout_id FROM roots)
    GROUP BY rollout_id
),
emitted AS (
    SELECT rollout_id, sum(value) AS total_reward
    FROM rewards
    WHERE source = 'emitted'
    GROUP BY rollout_id
)
SELECT
    r.rollout_id,
    r.task_id,
    r.group_id,
    r.name,
    m.agent_name,
    r.start_time,
    r.end_time,
    r.duration_ms,
    CASE WHEN coalesce({_a(sc.CANCELLED, "r.attributes")} = 'true', false) THEN 'cancelled'
         WHEN r.status_code = 'ERROR' THEN 'error' ELSE 'ok' END AS status,
    CASE WHEN r.status_code = 'ERROR' OR coalesce({_a(sc.CANCELLED, "r.attributes")} = 'true', false)
         THEN coalesce(nullif(r.status_message, ''), {_a(sc.ERROR_TYPE, "r.attributes")}, 'error') END AS error,
    coalesce({_a(sc.ROLLOUT_INPUT, "r.attributes")}, m.agent_input) AS input,
    coalesce({_a(sc.ROLLOUT_OUTPUT, "r.attributes")}, m.agent_output) AS output,
    {_a(sc.ROLLOUT_METADATA, "r.attributes")} AS metadata,
    coalesce(m.n_spans, 0) AS n_spans,
    coalesce(m.n_llm_calls, 0) AS n_llm_calls,
    coalesce(m.n_tool_calls, 0) AS n_tool_calls,
    coalesce(m.n_tool_errors, 0) AS n_tool_errors,
    coalesce(m.input_tokens, 0) AS input_tokens,
    coalesce(m.output_tokens, 0) AS output_tokens,
    e.total_reward,
    r.trace_id,
    r.span_id AS root_span_id,
    r.service_name
FROM roots r
LEFT JOIN members m ON m.rollout_id = r.rollout_id
LEFT JOIN emitted e ON e.rollout_id = r.rollout_id"""

# Version 2 of ``rollouts`` (migration ``0006_rollouts_v2``): the ``members`` aggregate no longer
# filters ``rollout_id IN (SELECT rollout_id FROM roots)``. With that filter, DuckDB 2.0 deadlocks
# on ``SELECT ... FROM rollouts LIMIT n`` (no ORDER BY) once a store holds ~70k rollouts: the
# materialised ``roots`` CTE is read by both sides of the plan under a streaming limit. The
# result is the same (the LEFT JOIN from ``roots`` drops spans of rollouts without a root).
ROLLOUTS_V2 = ROLLOUTS_V1.replace(
    """    FROM spans
    WHERE rollout_id IN (SELECT rollout_id FROM roots)
    GROUP BY rollout_id""",
    """    FROM spans
    WHERE rollout_id IS NOT NULL
    GROUP BY rollout_id""",
)
assert ROLLOUTS_V2 != ROLLOUTS_V1

# The one definition of the episode reward (view ``episode_rewards``, migration
# ``0009_episode_rewards``): one row per (rollout, reward name) holding the value that counts.
# Rule: only episode-level rows (``step_index IS NULL``) with a value and no error; of several
# rows for the same rollout and name, whatever their source (emitted, code, llm, human), the
# latest ``created_at`` wins (then the larger ``reward_id``): a re-emission or a re-scoring
# replaces the earlier value, it does not add to it. NaN and infinite values are kept, so the
# readers that must refuse them (advantages, datasets) can name the rollout.
EPISODE_REWARDS_V1 = """CREATE OR REPLACE VIEW episode_rewards AS
SELECT
    rollout_id,
    name,
    value,
    source,
    plugin,
    created_at,
    CAST(count(*) OVER (PARTITION BY rollout_id, name) AS INTEGER) AS n_recorded,
    reward_id
FROM rewards
WHERE step_index IS NULL AND value IS NOT NULL AND error IS NULL AND rollout_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY rollout_id, name ORDER BY created_at DESC, reward_id DESC) = 1"""


def combined_reward_sql(weight_sql: str = "1.0", alias: str = "e") -> str:
    """SQL aggregate of the combined episode reward over ``episode_rewards`` rows aliased
    ``alias``, each weighted by the SQL expression ``weight_sql`` (e.g. ``coalesce(w.weight,
    1.0)``): ``sum(w * value) / sum(w)``, ``NULL`` when the weights sum to 0. With every weight
    1 it is the mean over names, which is ``rollouts.total_reward``."""
    return f"sum({weight_sql} * {alias}.value) / nullif(sum({weight_sql}), 0)"


# Version 3 of ``rollouts`` (migration ``0009_episode_rewards``): ``total_reward`` is the
# episode reward read from ``episode_rewards`` (the mean over reward names of each name's value
# that counts), no longer the sum of every emitted row (which double-counted a re-emitted name,
# counted step rewards and ignored plugin scores).
ROLLOUTS_V3 = ROLLOUTS_V2.replace(
    """emitted AS (
    SELECT rollout_id, sum(value) AS total_reward
    FROM rewards
    WHERE source = 'emitted'
    GROUP BY rollout_id
)""",
    f"""emitted AS (
    SELECT e.rollout_id, {combined_reward_sql()} AS total_reward
    FROM episode_rewards e
    GROUP BY e.rollout_id
)""",
)
assert ROLLOUTS_V3 != ROLLOUTS_V2

# Version 2 of ``episode_rewards`` (migration ``0011_reward_weights``): the same rows, plus the
# ``weight`` each name counts with in the combined episode reward: the weight recorded for the
# name in ``reward_weights`` (written by ``agent-rl score`` from the rewards' configured weights),
# else 1.0 (emitted rewards, names never scored by a plugin).
EPISODE_REWARDS_V2 = """CREATE OR REPLACE VIEW episode_rewards AS
WITH latest AS (
    SELECT
        rollout_id,
        name,
        value,
        source,
        plugin,
        created_at,
        CAST(count(*) OVER (PARTITION BY rollout_id, name) AS INTEGER) AS n_recorded,
        reward_id
    FROM rewards
    WHERE step_index IS NULL AND value IS NOT NULL AND error IS NULL AND rollout_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY rollout_id, name ORDER BY created_at DESC, reward_id DESC) = 1
)
SELECT
    l.rollout_id,
    l.name,
    l.value,
    l.source,
    l.plugin,
    l.created_at,
    l.n_recorded,
    l.reward_id,
    coalesce(w.weight, 1.0) AS weight
FROM latest l
LEFT JOIN reward_weights w ON w.name = l.name"""

#: The combined episode reward of the rollout rows of ``episode_rewards`` aliased ``e``: each
#: name weighted by its ``weight`` column (the one rule, shared by ``rollouts.total_reward``,
#: ``agent-rl score --explain``, datasets, advantages and the report).
COMBINED_REWARD = combined_reward_sql("e.weight", "e")

# Version 4 of ``rollouts`` (migration ``0011_reward_weights``): ``total_reward`` weights each
# name by ``episode_rewards.weight`` (version 3 took every weight as 1, ignoring the weights the
# rewards were configured with).
ROLLOUTS_V4 = ROLLOUTS_V3.replace(
    f"SELECT e.rollout_id, {combined_reward_sql()} AS total_reward",
    f"SELECT e.rollout_id, {COMBINED_REWARD} AS total_reward",
)
assert ROLLOUTS_V4 != ROLLOUTS_V3

#: A span holds coordination events (span events named agent_rl.event): the expression that
#: migration ``0012_lookup_indexes`` indexes, and that ``events`` (version 2) compares with ``true``.
AGENT_EVENT_SQL = f"""contains(CAST(events AS VARCHAR), '"{sc.EVENT_NAME}"')"""

# Version 5 of ``rollouts`` and version 2 of ``events`` (migration ``0012_lookup_indexes``): the
# same rows, written so that DuckDB answers a lookup of one rollout (``WHERE rollout_id = ...``
# through rollouts, steps, events) from that migration's indexes instead of reading every span.
# DuckDB uses an index only where a scan's one filter is the indexed column (or expression)
# compared with a constant. Version 4 read the roots in a second scan filtered on is_rollout_root
# and rollout_id (no index); here the aggregate over the rollout's spans (filtered on rollout_id
# alone) also picks the root's row id (``arg_min`` by start and span id among the root spans: the
# row the window of version 4 kept), and the root is fetched by row id, which DuckDB prunes to
# that one row. Listing every rollout gets cheaper too (~0.75x the CPU on 1M spans): one scan for
# counts and roots, no window. The span-event filter reads ``AGENT_EVENT_SQL = true``.
_ROOT_COLUMNS = (
    "task_id",
    "group_id",
    "name",
    "start_time",
    "end_time",
    "duration_ms",
    "status_code",
    "status_message",
    "attributes",
    "trace_id",
    "span_id",
    "service_name",
)
_COUNTS = ROLLOUTS_V4[
    ROLLOUTS_V4.index("        count(*) AS n_spans,") : ROLLOUTS_V4.index("    FROM spans\n    WHERE rollout")
]
_COLUMNS = ROLLOUTS_V4[ROLLOUTS_V4.index("SELECT\n    r.rollout_id") : ROLLOUTS_V4.index("FROM roots r")]
ROLLOUTS_V5 = f"""CREATE OR REPLACE VIEW rollouts AS
WITH members AS (
    SELECT
        rollout_id,
        arg_min(rowid, (start_unix_nano, span_id)) FILTER (WHERE is_rollout_root) AS root_rowid,
{_COUNTS}    FROM spans
    GROUP BY rollout_id
),
roots AS (
    SELECT {", ".join("s." + c for c in _ROOT_COLUMNS)}, m.* EXCLUDE (root_rowid)
    FROM members m
    JOIN spans s ON s.rowid = m.root_rowid
),
emitted AS (
    SELECT e.rollout_id, {COMBINED_REWARD} AS total_reward
    FROM episode_rewards e
    GROUP BY e.rollout_id
)
{_COLUMNS.replace("m.", "r.")}FROM roots r
LEFT JOIN emitted e ON e.rollout_id = r.rollout_id"""
assert ROLLOUTS_V5 != ROLLOUTS_V4
EVENTS_V2 = EVENTS_V1.replace(f"WHERE {AGENT_EVENT_SQL}\n)", f"WHERE {AGENT_EVENT_SQL} = true\n)")
assert EVENTS_V2 != EVENTS_V1

#: Views created by migration ``0003_views_v1``, in creation order (later ones read earlier ones).
VIEWS_V1: dict[str, str] = {
    "llm_calls": LLM_CALLS_V1,
    "tool_calls": TOOL_CALLS_V1,
    "agents": AGENTS_V1,
    "events": EVENTS_V1,
    "steps": STEPS_V1,
    "rollouts": ROLLOUTS_V1,
}

#: The SQL in force for each view: later versions (``VIEWS_V2``...) are merged in on top.
VIEWS_V2: dict[str, str] = {"rollouts": ROLLOUTS_V2}

#: Views created or replaced by migration ``0009_episode_rewards``, in creation order.
VIEWS_V3: dict[str, str] = {"episode_rewards": EPISODE_REWARDS_V1, "rollouts": ROLLOUTS_V3}

#: Views replaced by migration ``0011_reward_weights``, in creation order.
VIEWS_V4: dict[str, str] = {"episode_rewards": EPISODE_REWARDS_V2, "rollouts": ROLLOUTS_V4}

#: Views replaced by migration ``0012_lookup_indexes``, in creation order.
VIEWS_V5: dict[str, str] = {"events": EVENTS_V2, "rollouts": ROLLOUTS_V5}

CURRENT_VIEWS: dict[str, str] = {**VIEWS_V1, **VIEWS_V2, **VIEWS_V3, **VIEWS_V4, **VIEWS_V5}

#: The public views, in the order the schema documentation lists them.
VIEW_NAMES: tuple[str, ...] = ("rollouts", "episode_rewards", "steps", "llm_calls", "tool_calls", "events", "agents")

#: What each view holds and what its columns mean (used by ``docs/schema.md``; not SQL, so
#: editable at any time). Columns not listed here are shown without a description.
VIEW_DOCS: dict[str, tuple[str, dict[str, str]]] = {
    "rollouts": (
        "One row per rollout (episode): its root span, counts over its spans, and its episode "
        "reward (see episode_rewards). A parentless span of another framework with "
        "gen_ai.operation.name and no rollout id is a rollout too (rollout_id = its trace id).",
        {
            "name": "Root span name ('rollout t1', 'invoke_agent planner', ...).",
            "agent_name": "Name of the first agent span (the root, when an agent span is the root).",
            "status": "ok, error, or cancelled.",
            "error": "Status message (else error.type) when not ok.",
            "input": "agent_rl.input of the root, else of the first agent span (JSON text).",
            "output": "agent_rl.output of the root, else of the first agent span.",
            "metadata": "agent_rl.rollout.metadata (JSON text).",
            "n_spans": "Spans recorded with this rollout id.",
            "n_llm_calls": "Rows of llm_calls in this rollout.",
            "n_tool_calls": "Rows of tool_calls in this rollout.",
            "n_tool_errors": "Tool calls with status error.",
            "input_tokens": "Sum of gen_ai.usage.input_tokens over LLM calls (0 when none).",
            "output_tokens": "Sum of gen_ai.usage.output_tokens over LLM calls.",
            "total_reward": "The episode reward: sum(weight * value) / sum(weight) over the reward names "
            "of the rollout (episode_rewards: the value that counts for each name, and its weight); "
            "NULL when the rollout has no episode-level reward or its weights sum to 0. "
            "`agent-rl score --explain ROLLOUT` shows the sum.",
            "root_span_id": "span_id of the root span.",
        },
    ),
    "episode_rewards": (
        "The one definition of the episode reward: one row per (rollout, reward name) with the value "
        "that counts. Only episode-level rewards (step_index NULL) with a value and no error; of "
        "several rows for one rollout and name, whatever their source, the latest (created_at, then "
        "reward_id) wins: a re-emission or re-scoring replaces, it does not add. Step rewards are "
        "never part of it. A rollout's episode reward is sum(weight * value) / sum(weight) over its "
        "names: rollouts.total_reward; advantages, datasets and reports use these weights unless "
        "given reward names and weights of their own.",
        {
            "name": "Reward name.",
            "value": "The value that counts (the latest usable row's); NaN or infinite values are kept.",
            "source": "emitted, code, llm, heuristic or human: the source of that row.",
            "plugin": "Reward plugin of that row, NULL for emitted rewards.",
            "created_at": "When that row was produced, UTC.",
            "n_recorded": "How many usable episode-level rows the rollout has for this name (1: never replaced).",
            "reward_id": "rewards.reward_id of that row.",
            "weight": "The weight of this name in the combined episode reward: reward_weights.weight "
            "(recorded by agent-rl score from the reward's configured weight), else 1.0.",
        },
    ),
    "steps": (
        "LLM calls, tool calls and coordination events of each rollout in time order: the unit "
        "of step-level credit (GiGPO).",
        {
            "step_index": "0-based position in the rollout (by start time, then span id, then event order).",
            "kind": "llm, tool or event.",
            "name": "Model (llm), tool name (tool) or event type (event).",
            "input": "Input messages (llm), arguments (tool), or the event's data (event).",
            "output": "Output messages (llm), result (tool), or a JSON object of the event's "
            "agent_id, target, reason, content and round (event).",
            "status": "ok or error.",
            "state_key": "agent_rl.state.key of the span (groups equivalent states for GiGPO).",
            "event_index": "Position of the event among its span's events (events only).",
        },
    ),
    "llm_calls": (
        "One row per LLM call (gen_ai.operation.name chat, text_completion or generate_content, "
        "or agent_rl.span.kind = 'llm').",
        {
            "provider": "gen_ai.provider.name (or the older gen_ai.system).",
            "input_messages": "gen_ai.input.messages (JSON text).",
            "output_messages": "gen_ai.output.messages (JSON text).",
            "reasoning": "agent_rl.reasoning: reasoning text of the turn.",
            "finish_reasons": "gen_ai.response.finish_reasons (JSON list).",
            "error_type": "error.type when the call failed.",
        },
    ),
    "tool_calls": (
        "One row per tool execution (execute_tool spans).",
        {
            "tool_name": "gen_ai.tool.name (else the span name without 'execute_tool ').",
            "call_id": "gen_ai.tool.call.id.",
            "arguments": "gen_ai.tool.call.arguments (JSON text).",
            "result": "gen_ai.tool.call.result (JSON text).",
            "error_type": "error.type when the tool raised (e.g. ValueError).",
            "error": "The status message ('ValueError: ...') when the tool failed.",
        },
    ),
    "events": (
        "Coordination events (span events named agent_rl.event, or event spans): answers, votes, restarts...",
        {
            "rollout_id": "The event's own agent_rl.rollout.id, else its span's rollout.",
            "event_index": "Position among the span's events.",
            "time": "When it happened, UTC.",
            "event_type": "new_answer, vote, restart, final_answer, reasoning, ...",
            "round": "Coordination round.",
            "agent_id": "Agent that produced the event.",
            "target": "Agent it refers to (e.g. the one voted for).",
            "data": "Extra fields (JSON text).",
        },
    ),
    "agents": (
        "One row per agent invocation (invoke_agent spans).",
        {
            "role": "agent_rl.agent.role: agent or orchestrator.",
            "input": "agent_rl.input: the call's arguments (JSON text).",
            "output": "agent_rl.output: its return value or streamed output.",
            "stream_chunks": "Chunks a streaming agent yielded.",
            "is_rollout_root": "True when this agent span is its rollout's root.",
        },
    ),
}
