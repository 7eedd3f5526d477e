"""``agent-rl traces list`` and ``agent-rl traces show ROLLOUT_ID``.

``show`` prints a rollout as a tree: agent runs, LLM calls (model, tokens, last input message,
output), tool calls (arguments, result or error), coordination events and rewards, each with its
start offset and duration. A unique prefix of a rollout id is enough.

``list`` reads the ``rollouts`` view's rows for the newest rollouts only
(:func:`newest_rollouts_source`): the view aggregates every span and scores every rollout's
rewards, which costs most of the command on a large store, while ``list`` shows ``--limit`` of
them. The rows are the view's own, so the output is the same.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

import typer

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.cli.common import (
    TABLE,
    DbOption,
    Output,
    UserError,
    db_path,
    output_options,
    print_json,
)
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    from rich.tree import Tree

app = typer.Typer(help="List recorded rollouts and show one as a tree.", no_args_is_help=True)

SNIPPET = 120

#: ``traces list`` as a table: (column, header), most telling first, so a narrow terminal
#: leaves out the start time and not the reward (JSON and CSV keep the query's names and order).
LIST_TABLE_COLUMNS = (
    ("rollout_id", "rollout"),
    ("task_id", "task"),
    ("group_id", "group"),
    ("status", "status"),
    ("total_reward", "reward"),
    ("n_llm_calls", "llm"),
    ("n_tool_calls", "tools"),
    ("n_tool_errors", "errors"),
    ("duration_ms", "ms"),
    ("start_time", "started"),
)


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@app.command("list")
@output_options()
def list_traces(
    db: str = DbOption,
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many rollouts, newest first."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task id."),
    group: Optional[str] = typer.Option(None, "--group", help="Only this group id."),
    status: Optional[str] = typer.Option(None, "--status", help="Only ok, error or cancelled."),
    output: Output = TABLE,
) -> None:
    """The latest rollouts with their status, reward, calls and timings.

    The table shows short rollout ids (enough for `agent-rl traces show`); --json, --csv or --wide show them in full."""
    filters = []
    if task:
        filters.append(f"task_id = {_sql_literal(task)}")
    if group:
        filters.append(f"group_id = {_sql_literal(group)}")
    if status:
        filters.append(f"status = {_sql_literal(status)}")
    where = f"where {' and '.join(filters)}" if filters else ""
    source = "rollouts" if status else newest_rollouts_source(int(limit), filters)
    sql = (
        "select rollout_id, task_id, group_id, status, start_time, round(duration_ms, 1) as duration_ms, "
        "n_llm_calls, n_tool_calls, n_tool_errors, total_reward "
        f"from {source} {where} order by start_time desc limit {int(limit)}"
    )
    columns, rows = run_query(db_path(db), sql)
    if output.format != "table":
        output.rows(columns, rows, title="rollouts")
        return
    order = [columns.index(name) for name, _ in LIST_TABLE_COLUMNS]
    output.rows([header for _, header in LIST_TABLE_COLUMNS], [[row[i] for i in order] for row in rows], "rollouts")


# The newest rollouts, from the view's own SQL (``store.views.CURRENT_VIEWS``), cut down: the
# span aggregate (``members``) and the rewards (``latest`` of ``episode_rewards``, read through
# ``emitted``) keep only the rollouts of ``_newest``. Both filters are on the column the
# aggregate groups by and the reward windows partition by, so every kept rollout gets the rows
# the whole view gives it. Each anchor must occur exactly once, else the plain view is read.
_VIEW_HEAD = "CREATE OR REPLACE VIEW rollouts AS\nWITH members AS ("
_REWARDS_HEAD = "CREATE OR REPLACE VIEW episode_rewards AS\n"
_MEMBERS_SCAN = "    FROM spans\n    GROUP BY rollout_id\n"
_EMITTED_SCAN = "    FROM episode_rewards e\n"
_REWARDS_SCAN = "    FROM rewards\n"
_KEPT = "(SELECT rollout_id FROM _newest)"

#: Above this ``--limit`` the whole view is read: cutting it down then costs more than it saves.
NEWEST_MAX = 5000


def _rollouts_view_parts() -> tuple[str, str] | None:
    """(rollouts, episode_rewards) view bodies when their SQL has every anchor, else ``None``."""
    from agent_rl_plugin.store.views import CURRENT_VIEWS

    rollouts, rewards = CURRENT_VIEWS["rollouts"], CURRENT_VIEWS["episode_rewards"]
    if not (rollouts.startswith(_VIEW_HEAD) and rewards.startswith(_REWARDS_HEAD)):
        return None
    if (rollouts.count(_MEMBERS_SCAN), rollouts.count(_EMITTED_SCAN), rewards.count(_REWARDS_SCAN)) != (1, 1, 1):
        return None
    return rollouts[len(_VIEW_HEAD) :], rewards[len(_REWARDS_HEAD) :]


def newest_rollouts_source(limit: int, root_filters: list[str] | None = None) -> str:
    """A relation for ``FROM`` that holds the ``rollouts`` view's rows of (at least) the newest
    ``limit`` rollouts by ``start_time`` that pass ``root_filters`` (SQL conditions on the root
    span's ``task_id`` / ``group_id``), aliased ``rollouts``; ``"rollouts"`` (the view itself)
    when ``limit`` is below 1 or above :data:`NEWEST_MAX`, or the view's SQL no longer has the
    expected shape.

    ``ORDER BY start_time DESC LIMIT limit`` (with the same filters) over it gives what it gives
    over the view. A rollout's ``start_time`` and ids are its root span's (the earliest
    ``is_rollout_root`` span by start and span id, as in the view); every rollout whose start is
    at least the ``limit``-th newest is kept (ties included; every one when fewer rollouts pass,
    or when the cut is a NULL start), and only these rollouts' spans and rewards are read, through
    the indexes on ``rollout_id``."""
    parts = _rollouts_view_parts() if 1 <= limit <= NEWEST_MAX else None
    if parts is None:
        return "rollouts"
    rollouts, rewards = parts
    key = "(start_unix_nano, span_id)"
    where = f"WHERE {' AND '.join(root_filters)}" if root_filters else ""
    newest = f"""WITH _newest_roots AS (
    SELECT rollout_id, arg_min(start_time, {key}) AS start_time, arg_min(task_id, {key}) AS task_id,
        arg_min(group_id, {key}) AS group_id
    FROM spans
    WHERE is_rollout_root
    GROUP BY rollout_id
),
_newest_kept AS (SELECT rollout_id, start_time FROM _newest_roots {where}),
_newest_cut AS (SELECT start_time FROM _newest_kept ORDER BY start_time DESC LIMIT 1 OFFSET {int(limit) - 1}),
_newest AS (
    SELECT rollout_id FROM _newest_kept
    WHERE (SELECT start_time FROM _newest_cut) IS NULL OR start_time >= (SELECT start_time FROM _newest_cut)
),
members AS ("""
    kept_rewards = rewards.replace(
        _REWARDS_SCAN, f"    FROM (SELECT * FROM rewards WHERE rollout_id IN {_KEPT}) AS rewards\n"
    )
    # The anchors are replaced in the view's SQL only: ``newest`` holds the caller's filters,
    # whose literals may hold an anchor's text (a ``--task`` value with newlines).
    body = rollouts.replace(
        _MEMBERS_SCAN, f"    FROM spans\n    WHERE rollout_id IN {_KEPT}\n    GROUP BY rollout_id\n"
    )
    body = body.replace(_EMITTED_SCAN, f"    FROM ({kept_rewards}) e\n")
    return f"({newest}{body}) AS rollouts"


@app.command("show")
@output_options("table", "json")
def show_trace(
    rollout_id: str = typer.Argument(..., help="A rollout id, or a unique prefix of one."),
    db: str = DbOption,
    output: Output = TABLE,
) -> None:
    """One rollout as a tree of agent runs, LLM calls, tool calls, events and rewards."""
    path = db_path(db)
    full_id = resolve_rollout_id(path, rollout_id)
    spans = load_spans(path, full_id)
    rewards_columns, reward_rows = run_query(
        path,
        "select name, step_index, value, source, plugin, reason, error from rewards "
        f"where rollout_id = {_sql_literal(full_id)} order by created_at, name",
    )
    roots = build_tree(spans)
    if output.json:
        print_json(
            {"rollout_id": full_id, "spans": roots, "rewards": [dict(zip(rewards_columns, r)) for r in reward_rows]}
        )
        return
    from rich.tree import Tree

    from agent_rl_plugin.cli.common import console

    start = min((s["start_ns"] for s in spans), default=0)
    tree = Tree(f"[bold]rollout {full_id}[/]")
    for root in roots:
        _render(tree, root, start)
    console.print(tree)
    if reward_rows:
        output.rows(rewards_columns, reward_rows, title="rewards")


def resolve_rollout_id(path: str, prefix: str) -> str:
    """The full rollout id starting with ``prefix``; a clear error when none or several match."""
    pattern = _sql_literal(prefix.replace("%", "").replace("_", "\\_") + "%")
    _, rows = run_query(
        path, f"select distinct rollout_id from spans where rollout_id like {pattern} escape '\\' limit 5"
    )
    if not rows:
        _, stored = run_query(path, "select count(*) from rollouts")
        if not stored or not stored[0][0]:
            from agent_rl_plugin.rl.hints import RECORD_HINT

            raise UserError(f"no rollout with id {prefix!r}: the store holds no rollouts ({path})", RECORD_HINT)
        raise UserError(f"no rollout with id {prefix!r}", "list them with `agent-rl traces list`")
    if len(rows) > 1:
        ids = ", ".join(r[0] for r in rows)
        raise UserError(f"{prefix!r} matches several rollouts ({ids})", "give more characters of the id")
    return rows[0][0]


def load_spans(path: str, rollout_id: str) -> list[dict[str, Any]]:
    """Every stored span of a rollout, oldest first, with attributes and events parsed."""
    columns, rows = run_query(
        path,
        "select span_id, parent_span_id, name, epoch_ns(start_time) as start_ns, duration_ms, "
        "status_code, status_message, span_kind, operation, attributes, events "
        f"from spans where rollout_id = {_sql_literal(rollout_id)} order by start_time, span_id",
    )
    spans = []
    for row in rows:
        span = dict(zip(columns, row))
        span["attributes"] = _loads(span["attributes"]) or {}
        span["events"] = _loads(span["events"]) or []
        spans.append(span)
    return spans


def build_tree(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nest spans under their parents (spans whose parent is not stored become roots)."""
    by_id = {s["span_id"]: {**s, "children": []} for s in spans}
    roots: list[dict[str, Any]] = []
    for span in by_id.values():
        parent = by_id.get(span["parent_span_id"]) if span["parent_span_id"] else None
        (parent["children"] if parent else roots).append(span)
    return roots


def _loads(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _snippet(value: Any, width: int = SNIPPET) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _last_message_text(messages_json: Any) -> str:
    messages = _loads(messages_json)
    if isinstance(messages, list) and messages:
        last = messages[-1]
        if isinstance(last, dict):
            content = last.get("content")
            if content is None and last.get("parts"):
                content = last["parts"]
            calls = last.get("tool_calls") or []
            text = _snippet(content) if content not in (None, "") else ""
            if calls:
                names = ", ".join(_call_text(c) for c in calls if isinstance(c, dict))
                text = f"{text} → {names}" if text else f"→ {names}"
            return f"{last.get('role', '?')}: {text}"
    return _snippet(messages)


def _call_text(call: dict[str, Any]) -> str:
    nested = call.get("function")
    function = nested if isinstance(nested, dict) else call
    arguments = function.get("arguments")
    return f"{function.get('name', '?')}({_snippet(arguments, 60) if arguments is not None else ''})"


def _label(span: dict[str, Any], start_ns: int) -> str:
    attrs = span["attributes"]
    offset = (span["start_ns"] - start_ns) / 1e6
    timing = f"[dim]+{offset:.1f} ms, {span['duration_ms'] or 0:.1f} ms[/]"
    status = " [red]ERROR[/]" if span["status_code"] == "ERROR" else ""
    kind = span.get("span_kind") or ""
    op = span.get("operation") or ""
    name = span["name"].replace("[", "\\[")
    if op in sc.LLM_OPERATIONS or kind == sc.SPAN_KIND_LLM:
        tokens = (
            f"{attrs.get(sc.GEN_AI_USAGE_INPUT_TOKENS, '?')}→{attrs.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS, '?')} tokens"
        )
        return f"[cyan]{name}[/] {timing} {tokens}{status}"
    if op == sc.OP_EXECUTE_TOOL or kind == sc.SPAN_KIND_TOOL:
        return f"[green]{name}[/] {timing}{status}"
    if kind == sc.SPAN_KIND_ROLLOUT or attrs.get(sc.ROLLOUT_ROOT):
        ids = f"task={attrs.get(sc.TASK_ID)} group={attrs.get(sc.GROUP_ID)}"
        return f"[bold magenta]{name}[/] {timing} [dim]{ids}[/]{status}"
    return f"[bold]{name}[/] {timing}{status}"


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def _render(parent: Tree, span: dict[str, Any], start_ns: int) -> None:
    node = parent.add(_label(span, start_ns))
    attrs = span["attributes"]
    if sc.GEN_AI_INPUT_MESSAGES in attrs and span.get("operation") in sc.LLM_OPERATIONS:
        node.add(_escape(f"in:  {_last_message_text(attrs[sc.GEN_AI_INPUT_MESSAGES])}"))
    if sc.GEN_AI_OUTPUT_MESSAGES in attrs:
        node.add(_escape(f"out: {_last_message_text(attrs[sc.GEN_AI_OUTPUT_MESSAGES])}"))
    if sc.REASONING in attrs:
        node.add(_escape(f"reasoning: {_snippet(attrs[sc.REASONING])}"))
    if sc.GEN_AI_TOOL_CALL_ARGUMENTS in attrs:
        node.add(_escape(f"args:   {_snippet(_loads(attrs[sc.GEN_AI_TOOL_CALL_ARGUMENTS]))}"))
    if sc.GEN_AI_TOOL_CALL_RESULT in attrs:
        node.add(_escape(f"result: {_snippet(_loads(attrs[sc.GEN_AI_TOOL_CALL_RESULT]))}"))
    if span["status_code"] == "ERROR":
        error = attrs.get(sc.ERROR_TYPE) or ""
        node.add("[red]error:[/] " + _escape(f"{error} {span.get('status_message') or ''}"))
    if sc.ROLLOUT_OUTPUT in attrs and span.get("span_kind") == sc.SPAN_KIND_AGENT:
        node.add(_escape(f"output: {_snippet(_loads(attrs[sc.ROLLOUT_OUTPUT]))}"))
    children = sorted(span["children"], key=lambda s: s["start_ns"])
    child_index = 0
    for event in span["events"]:
        event_time = event.get("time_ns") or event.get("time") or 0
        while child_index < len(children) and _comparable(children[child_index]["start_ns"]) <= _comparable(event_time):
            _render(node, children[child_index], start_ns)
            child_index += 1
        _render_event(node, event)
    for child in children[child_index:]:
        _render(node, child, start_ns)


def _comparable(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def _render_event(node: Tree, event: dict[str, Any]) -> None:
    attrs = event.get("attributes") or {}
    name = event.get("name")
    if name == sc.EVENT_NAME:
        parts = [f"[yellow]• {attrs.get(sc.EVENT_TYPE, 'event')}[/]"]
        for key, label in ((sc.EVENT_ROUND, "round"), (sc.EVENT_AGENT_ID, "agent"), (sc.EVENT_TARGET, "→")):
            if attrs.get(key) is not None:
                parts.append(_escape(f"{label} {attrs[key]}"))
        if attrs.get(sc.EVENT_REASON):
            parts.append(_escape(f"({_snippet(attrs[sc.EVENT_REASON], 80)})"))
        if attrs.get(sc.EVENT_CONTENT):
            parts.append(_escape(f": {_snippet(attrs[sc.EVENT_CONTENT], 80)}"))
        node.add(" ".join(parts))
    elif name == sc.EVENT_EVALUATION_RESULT:
        step = attrs.get(sc.STEP_INDEX)
        where = f" step {step}" if step is not None else ""
        reason = attrs.get(sc.GEN_AI_EVALUATION_EXPLANATION)
        text = f"reward {attrs.get(sc.GEN_AI_EVALUATION_NAME)}{where} = {attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)}"
        node.add(f"[bold yellow]★[/] {_escape(text)}" + (f" [dim]{_escape(_snippet(reason, 80))}[/]" if reason else ""))
    elif name == "exception":
        message = attrs.get("exception.message", "")
        node.add(
            f"[red]exception[/] {_escape(str(attrs.get('exception.type', '')))}: {_escape(_snippet(message, 100))}"
        )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.add_typer(app, name="traces")
