"""The SQL the dataset builders share: opening the store, selecting rollouts, normalising chat
messages, and combining episode rewards (read from the ``episode_rewards`` view), all inside DuckDB (results come back as Arrow).

Messages are normalised to one fixed Arrow type, :data:`MESSAGE_TYPE`::

    {role, content, tool_calls: [{id, type: "function", function: {name, arguments}}],
     tool_call_id, name}

``content`` is text (``""`` when absent; a list of parts becomes the concatenation of its text
parts; any other JSON value its JSON text); ``tool_calls`` is ``NULL`` when the message has none,
and ``arguments`` is JSON text (what chat templates and the OpenAI API expect). Both the
OpenAI-style form (``{"role", "content", "tool_calls": [{"id", "name", "arguments"}]}`` or
``{"function": {"name", "arguments"}}``) and the GenAI ``parts`` form (``text``, ``tool_call``,
``tool_call_response`` parts) are read. A message holding ``tool_call_response`` parts gives one
``tool`` message per part, in order (``tool_call_id`` the part's ``id``, ``content`` its
``response``, else ``result`` as pydantic-ai writes it), then a message of its own role with its
other parts when they hold text or tool calls. Messages that are not valid JSON (a value cut at
the attribute size limit) read as an empty list. :func:`with_system_sql` puts the
``gen_ai.system_instructions`` (:func:`system_text_sql`) in front as a ``system`` message.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.store.views import LLM_CONDITION, combined_reward_sql

_counter = itertools.count()

_MESSAGE_SCHEMA = (
    '[{"role": "VARCHAR", "content": "JSON", '
    '"tool_calls": [{"id": "VARCHAR", "name": "VARCHAR", "arguments": "VARCHAR", '
    '"function": {"name": "VARCHAR", "arguments": "VARCHAR"}}], '
    '"tool_call_id": "VARCHAR", "name": "VARCHAR", "parts": "JSON[]"}]'
)

_PLAIN_SCHEMA = _MESSAGE_SCHEMA.replace('"content": "JSON"', '"content": "VARCHAR"').replace(', "parts": "JSON[]"', "")
#: JSON texts that need the full path: a list-valued content, or GenAI ``parts``.
_RICH_PATTERN = r'"content"\s*:\s*\[|"parts"\s*:'

# A typed tool call of the schema above (OpenAI nested or flat form); VARCHAR arguments hold
# the JSON text whether they were recorded as a string or as an object.
_TOOL_CALL = (
    "struct_pack(id := arl_t.id, type := 'function', function := struct_pack("
    "name := coalesce(arl_t.function.name, arl_t.name, ''), arguments := coalesce(arl_t.function.arguments, arl_t.arguments, '{}')))"
)
#: SQL type of a normalised message's ``tool_calls``.
TOOL_CALLS_TYPE = "STRUCT(id VARCHAR, type VARCHAR, function STRUCT(name VARCHAR, arguments VARCHAR))[]"
# A GenAI ``tool_call`` part (JSON).
_PART_CALL = (
    "struct_pack(id := arl_p->>'id', type := 'function', function := struct_pack("
    "name := coalesce(arl_p->>'name', ''), arguments := coalesce(arl_p->>'arguments', '{}')))"
)


def attr(key: str, column: str = "attributes") -> str:
    """SQL for the text of one span attribute."""
    return f"{column}->>'$.\"{key}\"'"


def _full_messages_sql(expr: str) -> str:
    """Every form of message (parts, content lists...): see :func:`messages_sql`.

    A message holding GenAI ``tool_call_response`` parts becomes one ``tool`` message per part,
    in order (OpenAI style: ``tool_call_id``, ``content`` = the part's ``response``, else its
    ``result`` as pydantic-ai writes it), followed by a message of its own role with its other
    content (text parts, tool calls) when it has any."""
    text_part = "coalesce(arl_p->>'text', arl_p->>'content')"
    parts_text = (
        "nullif(array_to_string(list_filter(list_transform(arl_m.parts, lambda arl_p: CASE WHEN arl_p->>'type' = 'text' "
        "THEN arl_p->>'content' END), lambda arl_s: arl_s IS NOT NULL), ''), '')"
    )
    content = (
        "coalesce(CASE json_type(arl_m.content) WHEN 'VARCHAR' THEN arl_m.content->>'$' WHEN 'NULL' THEN NULL "
        f"WHEN 'ARRAY' THEN array_to_string(list_filter(list_transform(from_json(arl_m.content, '[\"JSON\"]'), "
        f"lambda arl_p: {text_part}), lambda arl_s: arl_s IS NOT NULL), '') "
        f"ELSE CAST(arl_m.content AS VARCHAR) END, {parts_text}, '')"
    )
    part_calls = "list_filter(arl_m.parts, lambda arl_p: arl_p->>'type' = 'tool_call')"
    tool_calls = (
        f"CASE WHEN len(arl_m.tool_calls) > 0 THEN list_transform(arl_m.tool_calls, lambda arl_t: {_TOOL_CALL}) "
        f"WHEN len(arl_m.parts) > 0 AND len({part_calls}) > 0 THEN list_transform({part_calls}, lambda arl_p: {_PART_CALL}) END"
    )
    own = (
        f"struct_pack(role := coalesce(arl_m.role, 'user'), content := {content}, tool_calls := {tool_calls}, "
        "tool_call_id := arl_m.tool_call_id, name := arl_m.name)"
    )
    responses = "list_filter(arl_m.parts, lambda arl_p: arl_p->>'type' = 'tool_call_response')"
    results = (
        f"list_transform({responses}, lambda arl_r: struct_pack(role := 'tool', "
        "content := coalesce(arl_r->>'response', arl_r->>'result', ''), "
        f"tool_calls := CAST(NULL AS {TOOL_CALLS_TYPE}), tool_call_id := coalesce(arl_r->>'id', arl_m.tool_call_id), "
        "name := arl_m.name))"
    )
    has_own = f"({content} <> '' OR len({tool_calls}) > 0)"
    expanded = (
        f"CASE WHEN len(arl_m.parts) > 0 AND len({responses}) > 0 THEN "
        f"CASE WHEN {has_own} THEN list_append({results}, {own}) ELSE {results} END ELSE [{own}] END"
    )
    return (
        f"coalesce(flatten(list_transform(try(from_json({expr}, '{_MESSAGE_SCHEMA}')), lambda arl_m: {expanded})), [])"
    )


def system_text_sql(expr: str) -> str:
    """SQL for the text of ``gen_ai.system_instructions`` held in ``expr`` (``VARCHAR``), or
    ``NULL`` when there is none: a JSON list of parts gives its text parts (``content``, else
    ``text``; plain strings too) joined with newlines; a JSON string or object its text (as
    :func:`text_of_sql`); text that is not JSON itself, unless it looks like JSON cut at the
    attribute size limit (starts with ``[`` or ``{``: no instructions). Pass a column (``expr``
    appears several times; a constant would be folded through every branch)."""
    part = (
        "CASE json_type(arl_p) WHEN 'VARCHAR' THEN arl_p->>'$' WHEN 'OBJECT' THEN "
        "CASE WHEN coalesce(arl_p->>'type', 'text') = 'text' THEN coalesce(arl_p->>'content', arl_p->>'text') END END"
    )
    return (
        f"nullif(CASE WHEN {expr} IS NULL OR trim({expr}) = '' THEN NULL "
        f"WHEN NOT json_valid({expr}) THEN CASE WHEN NOT regexp_matches({expr}, '^\\s*[\\[{{]') THEN {expr} END "
        f"WHEN json_type({expr}) = 'ARRAY' THEN array_to_string(list_filter(list_transform("
        f"from_json({expr}, '[\"JSON\"]'), lambda arl_p: {part}), lambda arl_s: arl_s IS NOT NULL), chr(10)) "
        f"WHEN json_type({expr}) = 'NULL' THEN NULL "
        f"ELSE {text_of_sql(expr)} END, '')"
    )


def with_system_sql(messages: str, system_text: str) -> str:
    """SQL for the normalised list ``messages`` preceded by a ``system`` message holding
    ``system_text`` (:func:`system_text_sql`) when that is not ``NULL``, ``messages`` is not
    empty and holds no ``system`` (or ``developer``) message: the GenAI conventions keep the
    instructions in ``gen_ai.system_instructions``, out of the input messages.

    ``messages`` appears several times: pass a column."""
    message = (
        f"struct_pack(role := 'system', content := {system_text}, tool_calls := CAST(NULL AS {TOOL_CALLS_TYPE}), "
        "tool_call_id := CAST(NULL AS VARCHAR), name := CAST(NULL AS VARCHAR))"
    )
    return (
        f"CASE WHEN {system_text} IS NOT NULL AND len({messages}) > 0 AND NOT list_bool_or(list_transform({messages}, "
        f"lambda arl_m: arl_m.role IN ('system', 'developer'))) THEN list_prepend({message}, {messages}) "
        f"ELSE {messages} END"
    )


def plain_parse_sql(expr: str) -> str:
    """First stage of :func:`finish_messages_sql`: ``expr`` parsed with text contents."""
    return f"try(from_json({expr}, '{_PLAIN_SCHEMA}'))"


def finish_messages_sql(parsed: str, expr: str) -> str:
    """Normalised messages from ``parsed`` (a column holding :func:`plain_parse_sql` of
    ``expr``), falling back to the full path on ``expr`` for lists that may hold list-valued
    contents or GenAI ``parts`` (a message without content, tool calls or tool call id, or a
    content starting with ``[``). Same result as :func:`messages_sql`, one parse cheaper."""
    rich = (
        f"list_bool_or(list_transform({parsed}, lambda arl_m: (arl_m.content IS NULL AND arl_m.tool_calls IS NULL "
        "AND arl_m.tool_call_id IS NULL) OR starts_with(arl_m.content, '[')))"
    )
    return f"CASE WHEN {rich} THEN {_full_messages_sql(expr)} ELSE {_plain_from_parsed(parsed)} END"


def _plain_from_parsed(parsed: str) -> str:
    return (
        f"coalesce(list_transform({parsed}, lambda arl_m: struct_pack("
        f"role := coalesce(arl_m.role, 'user'), content := coalesce(arl_m.content, ''), "
        f"tool_calls := CASE WHEN len(arl_m.tool_calls) > 0 THEN list_transform(arl_m.tool_calls, lambda arl_t: {_TOOL_CALL}) END, "
        f"tool_call_id := arl_m.tool_call_id, name := arl_m.name)), [])"
    )


def _plain_messages_sql(expr: str) -> str:
    """Messages whose content is text or absent and that have no ``parts`` (the common case)."""
    return _plain_from_parsed(plain_parse_sql(expr))


def messages_sql(expr: str) -> str:
    """SQL turning ``expr`` (JSON text or JSON holding a list of messages) into a list of
    normalised message structs (see the module docstring). Never fails: bad JSON gives ``[]``.

    ``expr`` appears several times in the result: pass a column, not an expensive expression.
    Texts without a list-valued ``content`` or a ``parts`` key take a cheaper path (same result).
    """
    return (
        f"CASE WHEN regexp_matches({expr}, '{_RICH_PATTERN}') THEN {_full_messages_sql(expr)} "
        f"ELSE {_plain_messages_sql(expr)} END"
    )


def text_of_sql(expr: str) -> str:
    """SQL for a JSON value as text: a string is itself, an object with a string ``content``
    (or a single string field) that string, anything else its JSON text."""
    return (
        f"CASE json_type({expr}) WHEN 'VARCHAR' THEN {expr}->>'$' "
        f"WHEN 'OBJECT' THEN coalesce(CASE WHEN json_type({expr}->'$.content') = 'VARCHAR' THEN {expr}->>'$.content' END, "
        f"CASE WHEN len(json_keys({expr})) = 1 AND json_type(({expr}->'$.*')[1]) = 'VARCHAR' "
        f"THEN ({expr}->>'$.*')[1] END, CAST({expr} AS VARCHAR)) "
        f"ELSE CAST({expr} AS VARCHAR) END"
    )


def arrow(connection: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pa.Table:
    """Run ``sql`` (with ``params`` for its ``?`` placeholders) and return the result as an Arrow table."""
    relation = connection.sql(sql, params=list(params) or None)
    return (getattr(relation, "to_arrow_table", None) or relation.arrow)()  # duckdb 2 / 1.x


@contextlib.contextmanager
def open_store(db_or_connection: Any) -> Iterator[duckdb.DuckDBPyConnection]:
    """A reading connection: ``db_or_connection`` itself when it is a DuckDB connection (left
    open), else :func:`~agent_rl_plugin.store.open_reader` on the path (closed afterwards)."""
    if isinstance(db_or_connection, duckdb.DuckDBPyConnection):
        yield db_or_connection
        return
    from agent_rl_plugin.store import open_reader

    connection = open_reader(os.fspath(db_or_connection))
    try:
        yield connection
    finally:
        connection.close()


@contextlib.contextmanager
def registered(connection: duckdb.DuckDBPyConnection, table: pa.Table, stem: str) -> Iterator[str]:
    """Register ``table`` under a fresh name for the duration of the block; yields the name."""
    name = f"_arl_ds_{stem}_{os.getpid()}_{next(_counter)}"
    connection.register(name, table)
    try:
        yield name
    finally:
        connection.unregister(name)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _filter_text(where: str | None, sql: str | None, rollout_ids: list[str] | None, rollout_run_id: str | None) -> str:
    from agent_rl_plugin.rl.store import describe_selection

    described = describe_selection(where, rollout_ids, rollout_run_id)
    if sql:
        return f"the query {sql!r}" + (f" and {described}" if described else "")
    return described or "the selection"


_SELECT_COLUMNS = "rollout_id, task_id, group_id, start_time"
#: Every rollout, as the ``rollouts`` view finds them (its ``roots``: the first root span of each
#: rollout id), without the view's per-rollout aggregates (three times faster on 1M spans).
ROOTS_SQL = (
    f"SELECT {_SELECT_COLUMNS} FROM spans WHERE is_rollout_root "
    "QUALIFY row_number() OVER (PARTITION BY rollout_id ORDER BY start_unix_nano, span_id) = 1"
)


def select_rollouts(
    connection: duckdb.DuckDBPyConnection,
    where: str | None = None,
    sql: str | None = None,
    *,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
) -> pa.Table:
    """The chosen rollouts (oldest first): rollout_id, task_id, group_id, start_time.

    ``where``: an SQL condition over the ``rollouts`` view. ``sql``: a full read-only query
    returning a ``rollout_id`` column (its rollouts are taken; ids not in the store are
    ignored). ``rollout_ids``: only these rollouts (an empty list selects none).
    ``rollout_run_id``: only the rollouts of that
    :func:`~agent_rl_plugin.rollouts.run_rollouts` call (the ``run_id`` of their metadata).
    The filters given are combined by AND; ids are SQL parameters, never SQL text
    (:func:`agent_rl_plugin.rl.store.selection_sql`). Raises :class:`DatasetError` for a bad
    query or when nothing matches.
    """
    from agent_rl_plugin.rl.hints import nothing_selected
    from agent_rl_plugin.rl.store import rollout_id_list, selection_sql

    if where and sql:
        raise DatasetError("give either where or sql, not both")
    if where:
        _check_where(where)
    ids = rollout_id_list(rollout_ids)
    condition, params = selection_sql(where, ids, rollout_run_id)
    # only ids: the cheap roots query; where and the run id read columns of the rollouts view
    source = "rollouts" if where or sql or rollout_run_id is not None else f"({ROOTS_SQL}) AS roots"
    filtered = f"SELECT {_SELECT_COLUMNS} FROM {source}" + (f" WHERE {condition}" if condition else "")
    order = " ORDER BY start_time, rollout_id"
    try:
        if sql:
            ids_table = _query_ids(connection, sql)
            everything = arrow(connection, filtered, params)
            with registered(connection, ids_table, "ids") as i, registered(connection, everything, "all") as a:
                table = arrow(
                    connection, f"SELECT a.* FROM {a} a SEMI JOIN {i} i ON i.rollout_id = a.rollout_id{order}"
                )
        elif condition:
            table = arrow(connection, f"{filtered}{order}", params)
        else:
            table = arrow(connection, f"{ROOTS_SQL}{order}")
    except duckdb.Error as exc:
        hint = (
            None
            if sql
            else (
                "columns of the rollouts view: rollout_id, task_id, group_id, status, total_reward, "
                "n_llm_calls, ... (see docs/schema.md)"
            )
        )
        raise DatasetError(f"SQL error in {'the query' if sql else 'where'}: {first_line(exc)}", hint) from None
    if table.num_rows == 0:
        filtered_by = where or sql or ids is not None or rollout_run_id is not None
        # the store is empty (say how to record) or the filters matched none of its rollouts
        raise DatasetError(
            *nothing_selected(connection, _filter_text(where, sql, ids, rollout_run_id) if filtered_by else None)
        )
    return table


def _check_where(where: str) -> None:
    """Refuse a ``where`` that is not one condition that only reads the database (no
    data-modifying CTE, no file-reading table function): it is spliced into an internal query
    on the caller's connection, so this check is its wall (see docs/security.md)."""
    from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError, check_condition

    try:
        check_condition(where, "SELECT rollout_id FROM rollouts WHERE ({where})")
    except SqlRefused as exc:
        raise DatasetError(f"where must be one condition that only reads the store: {exc}", exc.hint) from None
    except UserSqlError as exc:
        raise DatasetError(f"SQL error in where: {exc}", exc.hint) from None


def query_columns(connection: duckdb.DuckDBPyConnection, sql: str) -> tuple[str, list[str]]:
    """``(inner, columns)`` of a user query: the query without its trailing ``;`` and its
    lower-cased column names. Raises :class:`DatasetError` when it does not parse, does not
    only read the store (a write, a data-modifying CTE, a table function reading files: see
    :func:`~agent_rl_plugin.store.user_sql.check_user_sql`), or fails to plan."""
    from agent_rl_plugin.store.user_sql import SqlRefused, UserSqlError, check_user_sql

    try:
        check_user_sql(sql)
    except SqlRefused as exc:
        raise DatasetError(f"the query must only read the store (SELECT ...): {exc}", exc.hint) from None
    except UserSqlError as exc:
        raise DatasetError(f"SQL error in the query: {exc}") from None
    if len(duckdb.extract_statements(sql)) != 1:
        raise DatasetError("the query must be one SELECT statement")
    inner = sql.strip().rstrip(";")
    try:
        columns = [c.lower() for c in connection.sql(f"SELECT * FROM ({inner}) AS _q LIMIT 0").columns]
    except duckdb.Error as exc:
        raise DatasetError(f"SQL error in the query: {first_line(exc)}") from None
    return inner, columns


def _query_ids(connection: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """The distinct rollout ids a user query returns (checked to be read-only)."""
    inner, columns = query_columns(connection, sql)
    if "rollout_id" not in columns:
        raise DatasetError(
            f"the query must return a rollout_id column (it returns {', '.join(columns) or 'nothing'})",
            "e.g. sql=\"select rollout_id from rewards where name = 'correct' and value = 1\"",
        )
    return arrow(connection, f"SELECT DISTINCT CAST(_q.rollout_id AS VARCHAR) AS rollout_id FROM ({inner}) AS _q")


def normalize_weights(weights: Mapping[str, float] | Sequence[str] | None) -> dict[str, float] | None:
    """``None`` (every reward, weight 1), a list of names (weight 1 each) or ``{name: weight}``."""
    if weights is None:
        return None
    if isinstance(weights, str):
        weights = [weights]
    if not isinstance(weights, Mapping):
        weights = {str(name): 1.0 for name in weights}
    out: dict[str, float] = {}
    for name, weight in weights.items():
        try:
            value = float(weight)
        except (TypeError, ValueError):
            raise DatasetError(f"weight of reward {name!r} must be a number, got {weight!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise DatasetError(f"weight of reward {name!r} must be finite, got {weight!r}")
        out[str(name)] = value
    if not out:
        raise DatasetError("no reward names given")
    return out


def combined_rewards(
    connection: duckdb.DuckDBPyConnection,
    selected: str,
    weights: Mapping[str, float] | None,
    report: BuildReport | None = None,
) -> pa.Table:
    """``(rollout_id, reward, n_rewards)`` for the rollouts in the registered table ``selected``.

    The per-name values are the rows of the ``episode_rewards`` view (the one definition of the
    episode reward: per rollout and name the latest usable episode-level row, whatever its
    source); the combination is sum(w * r) / sum(w) over the names a rollout has
    (:func:`~agent_rl_plugin.store.views.combined_reward_sql`, the rule of
    :meth:`~agent_rl_plugin.rewards.RewardEngine.combine`), ``w`` the view's ``weight`` (the
    weights recorded by scoring) when ``weights`` is None, which is ``rollouts.total_reward``. A NaN or infinite value raises :class:`DatasetError` naming the
    rollout. Rollouts without any usable reward are absent from the result.
    """
    name_filter = ""
    weight_table = pa.table({"name": pa.array([], pa.string()), "weight": pa.array([], pa.float64())})
    if weights is not None:
        weight_table = pa.table({"name": list(weights), "weight": list(weights.values())})
        name_filter = "AND name IN (SELECT name FROM {w})"
    weight = "p.weight" if weights is None else "w.weight"  # None: the weights the store records
    with registered(connection, weight_table, "weights") as w:
        table = arrow(
            connection,
            f"""
            WITH per_name AS (
                SELECT rollout_id, name, value, weight
                FROM episode_rewards
                WHERE rollout_id IN (SELECT rollout_id FROM {selected}) {name_filter.format(w=w)}
            )
            SELECT p.rollout_id,
                   {combined_reward_sql(weight, "p")} AS reward,
                   count(*) AS n_rewards,
                   arg_min(p.name, p.name) FILTER (WHERE NOT isfinite(p.value)) AS bad_name,
                   list(p.name) AS names
            FROM per_name p LEFT JOIN {w} w ON w.name = p.name
            GROUP BY p.rollout_id
            """,
        )
    if report is not None:  # every name read (one pass over the view: no second query for them)
        names = pc.unique(pc.list_flatten(table.column("names"))).to_pylist() if table.num_rows else []
        report.reward_names = sorted(names)
    bad = pc.is_valid(table.column("bad_name"))
    if table.num_rows and pc.any(bad).as_py():
        row = table.filter(bad).slice(0, 1).to_pylist()[0]
        raise DatasetError(
            f"reward {row['bad_name']!r} of rollout {row['rollout_id']} is NaN or infinite",
            "fix or re-score that reward, or leave it out of the reward names",
        )
    usable = pc.fill_null(pc.is_finite(table.column("reward")), False)
    return table.filter(usable).select(["rollout_id", "reward", "n_rewards"])


LLM_WHERE = LLM_CONDITION

__all__ = [
    "arrow",
    "attr",
    "combined_rewards",
    "messages_sql",
    "normalize_weights",
    "open_store",
    "registered",
    "select_rollouts",
    "system_text_sql",
    "text_of_sql",
    "with_system_sql",
]
