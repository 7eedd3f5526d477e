"""Import saved conversations as rollouts: history from before this plugin, ready to score.

:func:`import_chats` (``agent-rl import chats FILE.jsonl``) reads OpenAI-format conversations,
one per line (the format: :mod:`agent_rl_plugin.rollouts.chat_parse`), and records each as one
rollout, through the same instrumentation API agents use:

* ``rollout(task_id, group_id, metadata)``: ``task_id`` from the line (or ``task_key``, or a hash
  of the opening messages); ``group_id`` from the line, else ``f"{task_id}/{import_id}"`` (the
  conversations of one task in one import form a group; ``import_id`` is new per call);
  ``metadata`` is the line's metadata plus ``import_hash`` (sha256 of the line's JSON value,
  canonical form), ``import_id``, ``import_source`` (the file name) and ``import_line``;
* inside it one agent span ``invoke_agent {agent}`` (input: the messages before the first
  reply; output: the last assistant message's content) holding, in order, one
  ``record_llm_call`` per assistant message (input: every message before it; output: the
  message, content and tool_calls) and one ``record_tool_call`` per tool message (name and
  arguments from the matched call, result from the message);
* then ``emit_reward`` for each reward of the line.

Timestamps are synthetic: the file has none, so steps start 1 µs apart from the moment of
import, in message order, which is the order of the ``steps`` view. Contents follow
``capture_content`` like any recording.

Bad lines: all or nothing. Any bad line raises :class:`ChatImportError` naming each (line
number and problem) and nothing is imported, unless ``skip_bad=True`` (the good lines are
imported, the bad ones listed in the report).

Idempotency: importing the same file again creates new rollouts. With ``dedupe=True``, a line
whose ``import_hash`` is already in the database (a query over the rollout roots' metadata), or
earlier in the same input, is skipped and counted in ``duplicates``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from opentelemetry import context as otel_context
from opentelemetry import trace

import agent_rl_plugin.tracing as tracing
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation.context import rollout
from agent_rl_plugin.instrumentation.recording import emit_reward, record_llm_call, record_tool_call
from agent_rl_plugin.instrumentation.spans import capture_content, end_span, to_json_text
from agent_rl_plugin.rollouts.chat_parse import ChatLine, LlmStep, parse_chat
from agent_rl_plugin.rollouts.tasks import describe_bad, use_database
from agent_rl_plugin.semconv import (
    AGENT_ROLE,
    GEN_AI_AGENT_NAME,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    OP_INVOKE_AGENT,
    ROLLOUT_INPUT,
    ROLLOUT_METADATA,
    ROLLOUT_OUTPUT,
    SPAN_KIND,
    SPAN_KIND_AGENT,
)

__all__ = ["BadChatLine", "ChatImportError", "ImportReport", "import_chats", "parse_chat_lines", "STEP_NS"]

#: Synthetic time between two consecutive steps of an imported conversation (nanoseconds).
STEP_NS = 1_000
HASH_KEY = "import_hash"
_HASH_SQL = (
    f"SELECT DISTINCT regexp_extract(attributes->>'$.\"{ROLLOUT_METADATA}\"', "
    f'\'"{HASH_KEY}":\\s*"([0-9a-f]{{64}})"\', 1) AS h FROM spans WHERE is_rollout_root'
)


class ChatImportError(AgentRLError, ValueError):
    """The input cannot be imported (bad lines, no file...); ``hint`` says the fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class BadChatLine:
    line: int
    error: str


@dataclass
class ImportReport:
    """What :func:`import_chats` did."""

    database: str | None
    import_id: str
    imported: int = 0
    duplicates: int = 0
    bad: list[BadChatLine] = field(default_factory=list)
    rollout_ids: list[str] = field(default_factory=list)
    llm_calls: int = 0
    tool_calls: int = 0
    rewards: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _items(path_or_lines: Any) -> tuple[str, list[tuple[int, Any]]]:
    """(source name, [(line number, text or parsed value)]) of a file or of given lines."""
    if isinstance(path_or_lines, (str, os.PathLike)):
        path = os.fspath(path_or_lines)
        if not os.path.isfile(path):
            raise ChatImportError(f"no chat file at {path}", "pass a .jsonl file: one conversation per line")
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
        return os.path.basename(path), [(n, text) for n, text in enumerate(lines, start=1) if text.strip()]
    items = []
    for number, item in enumerate(path_or_lines, start=1):
        if isinstance(item, str) and not item.strip():
            continue
        items.append((number, item))
    return "the given lines", items


def parse_chat_lines(
    items: Iterable[tuple[int, Any]], task_key: str | None = None
) -> tuple[list[ChatLine], list[BadChatLine]]:
    """Parse numbered lines (JSON text, or already parsed values) into conversations and bad lines."""
    chats: list[ChatLine] = []
    bad: list[BadChatLine] = []
    for number, item in items:
        if isinstance(item, (str, bytes)):
            try:
                item = json.loads(item)
            except ValueError as exc:
                bad.append(BadChatLine(number, f"invalid JSON ({exc})"))
                continue
        try:
            chats.append(parse_chat(item, number, task_key))
        except ValueError as exc:
            bad.append(BadChatLine(number, str(exc)))
    return chats, bad


def imported_hashes(db: str) -> set[str]:
    """The ``import_hash`` values already in ``db`` (empty when there is no file yet)."""
    from agent_rl_plugin.store import open_reader
    from agent_rl_plugin.store.connection import live_writer

    if live_writer(db) is None and not os.path.exists(db):
        return set()
    connection = open_reader(db)
    try:
        return {row[0] for row in connection.execute(_HASH_SQL).fetchall() if row[0]}
    finally:
        connection.close()


def _wait_past(ns: int) -> None:
    """Sleep until the clock passes ``ns``, so the rollout span ends after its synthetic steps."""
    while time.time_ns() <= ns:
        time.sleep(max((ns - time.time_ns()) / 1e9, 0) + 1e-6)


def _record_steps(chat: ChatLine) -> int:
    """The agent span with its LLM and tool steps; returns the agent span's end (ns)."""
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: OP_INVOKE_AGENT,
        GEN_AI_AGENT_NAME: chat.agent,
        SPAN_KIND: SPAN_KIND_AGENT,
        AGENT_ROLE: "agent",
    }
    if capture_content():
        attributes[ROLLOUT_INPUT] = to_json_text({"messages": chat.context})
        attributes[GEN_AI_INPUT_MESSAGES] = to_json_text(chat.context)
        if chat.final_output is not None:
            attributes[ROLLOUT_OUTPUT] = to_json_text(chat.final_output)
    at = time.time_ns()
    span = tracing.get_tracer().start_span(f"{OP_INVOKE_AGENT} {chat.agent}", start_time=at, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        for step in chat.steps:
            at += STEP_NS
            if isinstance(step, LlmStep):
                record_llm_call(
                    step.model,
                    step.input_messages,
                    step.output,
                    input_tokens=step.input_tokens,
                    output_tokens=step.output_tokens,
                    start_time=at,
                    end_time=at + STEP_NS // 2,
                )
            else:
                record_tool_call(
                    step.name,
                    step.arguments,
                    step.result,
                    call_id=step.call_id,
                    start_time=at,
                    end_time=at + STEP_NS // 2,
                )
    finally:
        otel_context.detach(token)
        end_span(span, end_time=at + STEP_NS)
    return at + STEP_NS


def _record(chat: ChatLine, import_id: str, source: str) -> str:
    metadata: dict[str, Any] = {
        HASH_KEY: chat.content_hash,
        "import_id": import_id,
        "import_source": source,
        "import_line": chat.line,
    }
    metadata.update({k: v for k, v in chat.metadata.items() if k not in metadata})
    rollout_id = new_id()
    group_id = chat.group_id or f"{chat.task_id}/{import_id}"
    with rollout(task_id=chat.task_id, group_id=group_id, metadata=metadata, rollout_id=rollout_id):
        ended = _record_steps(chat)
        for name, value in chat.rewards.items():
            emit_reward(value, name=name)
        _wait_past(ended)
    return rollout_id


def import_chats(
    path_or_lines: str | os.PathLike[str] | Iterable[Any],
    *,
    db: str | os.PathLike[str] | None = None,
    task_key: str | None = None,
    dedupe: bool = False,
    skip_bad: bool = False,
) -> ImportReport:
    """Record each conversation of ``path_or_lines`` as a rollout (see the module docstring).

    ``path_or_lines``: a JSONL file path, or an iterable of lines (JSON text, or already parsed
    lists/dicts). ``db``: record into this DuckDB file (default: the configured database).
    ``task_key``: dotted path of the task id in each line object. Everything recorded is flushed
    before returning. Raises :class:`ChatImportError` for bad lines (unless ``skip_bad``), a
    missing file, recording switched off, or ``dedupe`` without a database file, and
    :class:`~agent_rl_plugin.store.StoreError` when the database cannot be written (e.g.
    another process holds it).
    """
    source, items = _items(path_or_lines)
    chats, bad = parse_chat_lines(items, task_key)
    if bad and not skip_bad:
        raise ChatImportError(
            describe_bad(source, bad) + "; nothing was imported",
            "fix those lines, or pass --skip-bad (skip_bad=True) to import the others",
        )
    database = use_database(db)
    if not tracing.is_enabled():
        raise ChatImportError(
            "recording is switched off (enable_rl=False), so nothing would be stored", "unset AGENT_RL_ENABLE_RL"
        )
    if database is not None and chats:
        from agent_rl_plugin.store import ensure_schema

        ensure_schema(database)  # fails now, clearly, if another process holds the file
    report = ImportReport(database=database, import_id=new_id()[:8], bad=bad)
    if dedupe:
        if database is None:
            raise ChatImportError(
                "dedupe needs a database file to look the hashes up in", "give the database file (db)"
            )
        seen = imported_hashes(database)
        kept = []
        for chat in chats:
            if chat.content_hash in seen:
                report.duplicates += 1
                continue
            seen.add(chat.content_hash)
            kept.append(chat)
        chats = kept
    for chat in chats:
        report.rollout_ids.append(_record(chat, report.import_id, source))
        report.imported += 1
        report.llm_calls += sum(isinstance(step, LlmStep) for step in chat.steps)
        report.tool_calls += sum(not isinstance(step, LlmStep) for step in chat.steps)
        report.rewards += len(chat.rewards)
    tracing.flush()
    return report
