"""Stored token ids against a tokenizer: the tokenizer checks of ``agent-rl doctor``
(:func:`agent_rl_plugin.data.health.check_traces` with ``tokenizer=``) and the one rule both the
doctor and the offline trainer use to decide whether stored completion ids belong to the
recorded text.

**The rule** (:func:`ids_match_text`): stored completion ids match the recorded completion text
when ``tokenizer.decode(ids, skip_special_tokens=False)`` equals the text exactly, after dropping
at most one trailing id that is the tokenizer's end-of-sequence id or one of its special ids
(the end-of-turn token a server samples and does not show). An id outside ``[0, len(tokenizer))``
(:func:`out_of_vocab`) or a decode that raises never matches. Only completions whose text is
all of what was sampled are compared (:func:`comparable_text`): not those with tool calls or
reasoning (their ids hold text the output messages do not). The doctor flags a call that fails
the rule as ``token_ids_mismatch``; the trainer
(:mod:`agent_rl_plugin.train.stored_tokens`) does not train the ids of such a row and
re-tokenises its text instead (reason ``decode_mismatch``).

**The doctor's checks** (:func:`token_flags`), per LLM call with stored ids, oldest first, at
most ``limit`` calls; a row that cannot be judged is a finding, never an exception:

* ``out_of_vocab``: a stored completion or prompt id is negative or ``>= len(tokenizer)`` (its
  other checks are then skipped);
* ``token_ids_mismatch``: the completion ids fail the rule (including a decode that raises);
* ``retokenization_differs``: they pass it but the text encodes to other ids;
* ``prompt_ids_mismatch``: the prompt ids differ from the chat template of the input messages
  (calls whose template cannot render, or whose encoding raises, are not compared).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data.report import DatasetError
from agent_rl_plugin.data.sql import arrow, attr, messages_sql, system_text_sql, with_system_sql
from agent_rl_plugin.store.views import LLM_CONDITION

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "TOKEN_CODES",
    "agent_of_sql",
    "comparable_text",
    "end_token_ids",
    "ids_match_text",
    "load_tokenizer_arg",
    "out_of_vocab",
    "token_flags",
]

#: The checks of :func:`token_flags`, in the order of ``CHECKS``.
TOKEN_CODES = ("out_of_vocab", "token_ids_mismatch", "retokenization_differs", "prompt_ids_mismatch")
#: Message keys that mean the sampled ids hold more than the message text.
_NOT_TEXT_KEYS = ("tool_calls", "reasoning_content", "reasoning", "function_call")

#: ``(agent, id, flagged)`` per judged LLM call.
Flags = list[tuple[str | None, str, bool]]


def agent_of_sql(column: str = "attributes") -> str:
    """SQL: the span's own agent (``gen_ai.agent.name``, else ``gen_ai.agent.id``)."""
    return f"coalesce({attr(sc.GEN_AI_AGENT_NAME, column)}, {attr(sc.GEN_AI_AGENT_ID, column)})"


def load_tokenizer_arg(tokenizer: Any) -> Any:
    """A tokenizer from a path (``AutoTokenizer.from_pretrained``) or a tokenizer object; raises
    :class:`DatasetError` for anything else or a path that cannot be loaded."""
    if isinstance(tokenizer, (str, os.PathLike)):
        from agent_rl_plugin.data.output import load_tokenizer

        return load_tokenizer(os.fspath(tokenizer))
    if not (hasattr(tokenizer, "encode") and hasattr(tokenizer, "decode")):
        raise DatasetError(
            f"tokenizer must be a path or a tokenizer object with encode and decode, got {type(tokenizer).__name__}"
        )
    return tokenizer


def end_token_ids(tokenizer: Any) -> set[int]:
    """The ids :func:`ids_match_text` allows once at the end: the special ids and the EOS id."""
    ends = set(getattr(tokenizer, "all_special_ids", None) or [])
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ends.add(tokenizer.eos_token_id)
    return ends


def out_of_vocab(tokenizer: Any, ids: Sequence[int]) -> bool:
    """Whether an id is negative or ``>= len(tokenizer)`` (the tokenizer cannot decode it)."""
    size = len(tokenizer)
    return any(i < 0 or i >= size for i in ids)


def comparable_text(completion: Any) -> str | None:
    """The text a completion's stored ids should decode to, or ``None`` when it is not comparable:
    a string is itself; a message list is its messages' ``content`` joined, unless a message has
    tool calls or reasoning, or a content that is not a string (or null)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, (list, tuple)) or not completion:
        return None
    parts = []
    for message in completion:
        if not isinstance(message, Mapping) or any(message.get(key) for key in _NOT_TEXT_KEYS):
            return None
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            return None
        parts.append(content or "")
    return "".join(parts)


def ids_match_text(tokenizer: Any, ids: Sequence[int], text: str, end_ids: set[int] | None = None) -> bool:
    """The rule of the module doc: do stored completion ``ids`` decode to ``text`` (one trailing
    end / special id allowed)? ``end_ids``: :func:`end_token_ids`, computed when ``None``."""
    ids = list(ids)
    if out_of_vocab(tokenizer, ids):
        return False
    ends = end_token_ids(tokenizer) if end_ids is None else end_ids
    core = ids[:-1] if ids and ids[-1] in ends else ids
    try:
        return tokenizer.decode(core, skip_special_tokens=False) == text
    except Exception:  # ids the tokenizer cannot decode (e.g. > int64, corrupt vocab entries)
        return False


def _int_list(text: Any) -> list[int] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _plain_messages(messages: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    return [{k: v for k, v in message.items() if v is not None} for message in messages or []]


def _calls_sql(rollouts: str, limit: int | None) -> str:
    prompt_key = sc.PROMPT_TOKEN_IDS
    return f"""
        WITH c AS (
            SELECT span_id, rollout_id, start_unix_nano, {agent_of_sql()} AS agent,
                   {attr(sc.TOKEN_IDS)} AS token_ids, {attr(prompt_key)} AS prompt_ids,
                   {attr(sc.REASONING)} AS reasoning, {attr(sc.GEN_AI_INPUT_MESSAGES)} AS ins,
                   {attr(sc.GEN_AI_OUTPUT_MESSAGES)} AS outs, {attr(sc.GEN_AI_SYSTEM_INSTRUCTIONS)} AS sys
            FROM spans
            WHERE {LLM_CONDITION} AND rollout_id IN (SELECT rollout_id FROM {rollouts})
              AND ({attr(sc.TOKEN_IDS)} IS NOT NULL OR {attr(prompt_key)} IS NOT NULL)
            ORDER BY start_unix_nano, span_id
            {"" if limit is None else f"LIMIT {int(limit)}"}
        ),
        m AS (
            SELECT *, {messages_sql("outs")} AS out_m, {messages_sql("ins")} AS in_raw,
                   {system_text_sql("sys")} AS sys_text
            FROM c
        )
        SELECT m.span_id, coalesce(m.agent, r.agent_name) AS agent, m.token_ids, m.prompt_ids, m.reasoning,
               m.out_m, {with_system_sql("in_raw", "sys_text")} AS in_m
        FROM m LEFT JOIN {rollouts} r ON r.rollout_id = m.rollout_id
        ORDER BY m.start_unix_nano, m.span_id"""


def _judge_completion(tokenizer: Any, ids: list[int], text: str, ends: set[int]) -> tuple[bool, bool]:
    """``(mismatch, retokenization_differs)`` of one call's completion ids (never raises)."""
    if not ids_match_text(tokenizer, ids, text, ends):
        return True, False
    core = ids[:-1] if ids and ids[-1] in ends else ids
    try:
        return False, list(tokenizer.encode(text, add_special_tokens=False)) != core
    except Exception:  # the text cannot be encoded: the stored ids are all there is
        return False, True


def token_flags(
    connection: duckdb.DuckDBPyConnection, rollouts: str, tokenizer: Any, limit: int | None
) -> tuple[int, dict[str, Flags]]:
    """The checks of the module doc over the LLM calls of ``rollouts`` (a registered table with
    ``rollout_id``, ``agent_name``): ``(calls judged, {code: [(agent, span id, flagged)]})``."""
    rows = arrow(connection, _calls_sql(rollouts, limit)).to_pylist()
    ends = end_token_ids(tokenizer)
    flags: dict[str, Flags] = {code: [] for code in TOKEN_CODES}
    for row in rows:
        agent, span_id = row["agent"], row["span_id"]
        ids, prompt = _int_list(row["token_ids"]), _int_list(row["prompt_ids"])
        bad_ids = any(x is not None and out_of_vocab(tokenizer, x) for x in (ids, prompt))
        flags["out_of_vocab"].append((agent, span_id, bad_ids))
        if bad_ids:
            continue
        text = None if row["reasoning"] else comparable_text(row["out_m"] or [])
        if ids is not None and text is not None and row["out_m"]:
            mismatch, differs = _judge_completion(tokenizer, ids, text, ends)
            flags["token_ids_mismatch"].append((agent, span_id, mismatch))
            flags["retokenization_differs"].append((agent, span_id, differs))
        in_m = _plain_messages(row["in_m"])
        if prompt is not None and in_m and getattr(tokenizer, "chat_template", None):
            try:
                rendered = tokenizer.apply_chat_template(in_m, tokenize=False, add_generation_prompt=True)
                expected = list(tokenizer.encode(rendered, add_special_tokens=False))
            except Exception:  # a template that refuses these messages: not compared
                continue
            flags["prompt_ids_mismatch"].append((agent, span_id, expected != prompt))
    return len(rows), flags
