"""``agent-rl traces list`` and ``agent-rl traces show ROLLOUT_ID``.

``show`` prints a rollout as a tree: agent runs, LLM calls (model, tokens, last input message,
output), tool calls (arguments, result or error), coordination events and rewards, each with its
start offset and duration. A unique prefix of a rollout id is enough.

``list`` runs :func:`~agent_rl_plugin.cli.traces_core.list_traces_command` (typer-free, shared
with the fast path of :mod:`agent_rl_plugin.cli.fast_path`), which reads the ``rollouts`` view's
rows for the newest rollouts only (:func:`newest_rollouts_source`, importable from here).
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
from agent_rl_plugin.cli.traces_core import LIST_LIMIT, LIST_LIMIT_MIN, _sql_literal, list_traces_command
from agent_rl_plugin.cli.traces_core import LIST_TABLE_COLUMNS as LIST_TABLE_COLUMNS  # importable from here
from agent_rl_plugin.cli.traces_core import NEWEST_MAX as NEWEST_MAX
from agent_rl_plugin.cli.traces_core import newest_rollouts_source as newest_rollouts_source
from agent_rl_plugin.hookspecs import hookimpl

if TYPE_CHECKING:
    from rich.tree import Tree

app = typer.Typer(help="List recorded rollouts and show one as a tree.", no_args_is_help=True)

SNIPPET = 120


@app.command("list")
@output_options()
def list_traces(
    db: str = DbOption,
    limit: int = typer.Option(LIST_LIMIT, "--limit", "-n", min=LIST_LIMIT_MIN, help="How many rollouts, newest first."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task id."),
    group: Optional[str] = typer.Option(None, "--group", help="Only this group id."),
    status: Optional[str] = typer.Option(None, "--status", help="Only ok, error or cancelled."),
    output: Output = TABLE,
) -> None:
    """The latest rollouts with their status, reward, calls and timings.

    The table shows short rollout ids (enough for `agent-rl traces show`); --json, --csv or --wide show them in full."""
    list_traces_command(db, limit, task, group, status, output)


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
