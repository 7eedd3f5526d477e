"""Recording what decorators cannot see: LLM calls, tool calls, events and rewards.

Contract:

* ``record_llm_call`` / ``record_tool_call`` add one finished span (``chat {model}`` /
  ``execute_tool {name}``) as a child of the current span and return its
  :class:`~opentelemetry.trace.SpanContext` (``None`` when recording is off).
* ``record_event`` adds an ``agent_rl.event`` event to the current recording span, or to a new
  zero-length ``event {type}`` span when there is none.
* ``emit_reward`` adds a ``gen_ai.evaluation.result`` event to the current span of the rewarded
  rollout, or to a zero-length ``reward {name}`` span (rollout given by id, or no current span).
* Content (messages, arguments, results, reasoning, event content) is only stored when
  ``capture_content`` is on; every value goes through :mod:`agent_rl_plugin.serialize`.
* ``record_llm_call`` also records what training needs of the call: the GiGPO ``state_key``
  (``agent_rl.state.key``), the behaviour log-probs of the sampled tokens (``agent_rl.logprobs``,
  read as the step dataset's ``old_logprobs``) and their token ids (``agent_rl.token_ids``, only
  with ``capture_content``: they spell the output). Both lists are stored as OTel sequence
  attributes, never cut to the attribute size limit. An invalid one is logged (once per kind of
  problem) and left out; the rest of the call is recorded.
* With recording off (``enable_rl=False``, or inside a call of an ``enable_rl=False``
  instance) they do nothing. None of them raises, except ``emit_reward`` on bad input (a value
  that is not a finite number, a bad ``step``, no rollout to reward).
"""

from __future__ import annotations

import math
import numbers
import time
from datetime import UTC, datetime
from typing import Any, Callable, Iterable, Mapping, Sequence, Sized

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanContext

from agent_rl_plugin import tracing
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation import context as rl_context
from agent_rl_plugin.instrumentation.calls import is_recording
from agent_rl_plugin.instrumentation.spans import (
    capture_content,
    current_recording_span,
    end_span,
    log_failure,
    max_size,
    record_error,
    record_error_text,
    set_attributes,
    to_attr,
    to_json_text,
)
from agent_rl_plugin.semconv import (
    EVENT_AGENT_ID,
    EVENT_CONTENT,
    EVENT_DATA,
    EVENT_EVALUATION_RESULT,
    EVENT_NAME,
    EVENT_REASON,
    EVENT_ROUND,
    EVENT_TARGET,
    EVENT_TYPE,
    GEN_AI_AGENT_ID,
    GEN_AI_EVALUATION_EXPLANATION,
    GEN_AI_EVALUATION_NAME,
    GEN_AI_EVALUATION_SCORE_VALUE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OPERATION_NAME,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    LOGPROBS,
    OP_CHAT,
    OP_EXECUTE_TOOL,
    POLICY_VERSION,
    PROMPT_TOKEN_IDS,
    REASONING,
    REWARD_METADATA,
    REWARD_SOURCE,
    ROLLOUT_ID,
    SPAN_KIND,
    SPAN_KIND_EVENT,
    SPAN_KIND_LLM,
    SPAN_KIND_REWARD,
    SPAN_KIND_TOOL,
    STATE_KEY,
    STEP_INDEX,
    TOKEN_IDS,
)
from agent_rl_plugin.serialize import safe_repr, to_attribute_value

__all__ = ["record_llm_call", "record_tool_call", "record_event", "emit_reward"]

TimeLike = int | float | datetime | None
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _to_ns(value: TimeLike) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.astimezone()
        delta = aware - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    return int(value)


def _times(start: TimeLike, end: TimeLike, duration_s: float | None) -> tuple[int, int]:
    """(start_ns, end_ns): given times, else end=now and start=end-duration."""
    start_ns, end_ns = _to_ns(start), _to_ns(end)
    duration_ns = int(duration_s * 1e9) if duration_s is not None else None
    if end_ns is None:
        if start_ns is not None and duration_ns is not None:
            end_ns = start_ns + duration_ns
        else:
            end_ns = time.time_ns()
    if start_ns is None:
        start_ns = end_ns - duration_ns if duration_ns is not None else end_ns
    return start_ns, end_ns


def _finished_span(
    name: str,
    attributes: Mapping[str, Any],
    start_ns: int,
    end_ns: int,
    error: BaseException | str | None = None,
) -> SpanContext:
    span = tracing.start_with_attributes(tracing.get_tracer(), name, dict(attributes), start_time=start_ns)
    try:
        if isinstance(error, BaseException):
            record_error(span, error)
        elif error is not None:
            record_error_text(span, "error", str(error))
    finally:
        end_span(span, end_time=end_ns)
    return span.get_span_context()


# --- LLM and tool calls -----------------------------------------------------------------------
def _as_messages(value: Any, role: str) -> list[Any]:
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, Mapping):
        return [dict(value)]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _output_messages(output: Any, tool_calls: Sequence[Any] | None) -> list[Any]:
    if output is None:
        messages: list[Any] = [{"role": "assistant", "content": None}] if tool_calls else []
    else:
        messages = _as_messages(output, "assistant")
    if tool_calls is not None and messages and isinstance(messages[-1], dict):
        if "tool_calls" not in messages[-1]:
            messages[-1] = {**messages[-1], "tool_calls": list(tool_calls)}
    return messages


class _InvalidTrainingData(ValueError):
    """A ``state_key``, ``logprobs`` or ``token_ids`` that record_llm_call leaves out."""


#: Longest token list kept per call (ids or log-probs): longer than any model's context, so a
#: longer one is a hostile or broken server, not an answer.
MAX_TOKENS_PER_CALL = 262_144
#: Largest token id kept: vocabularies are far smaller; a larger id cannot index any embedding.
MAX_TOKEN_ID = 2**31 - 1


def _as_list(value: Any, name: str) -> list[Any]:
    if (type(value) is list or type(value) is tuple) and len(value) <= MAX_TOKENS_PER_CALL:
        return list(value)  # the common case, without the ABC checks below
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise _InvalidTrainingData(f"{name} must be a sequence, got {type(value).__name__}")
    if isinstance(value, Sized) and len(value) > MAX_TOKENS_PER_CALL:
        raise _InvalidTrainingData(f"{name} has {len(value)} items, more than {MAX_TOKENS_PER_CALL}")
    items = list(value.tolist() if hasattr(value, "tolist") else value)  # numpy arrays, tensors
    if len(items) > MAX_TOKENS_PER_CALL:
        raise _InvalidTrainingData(f"{name} has {len(items)} items, more than {MAX_TOKENS_PER_CALL}")
    return items


def _check_state_key(value: Any) -> str:
    if not isinstance(value, str):
        raise _InvalidTrainingData(f"state_key must be a str, got {type(value).__name__} {safe_repr(value):.40}")
    return value


def _check_logprobs(value: Any) -> tuple[float, ...]:
    items = _as_list(value, "logprobs")
    if all(type(item) is float for item in items) and all(map(math.isfinite, items)):
        return tuple(items)  # the common case, without the per-item ABC checks below
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, numbers.Real) or not math.isfinite(item):
            raise _InvalidTrainingData(f"logprobs[{i}] is {safe_repr(item):.40}, not a finite number")
    return tuple(float(item) for item in items)


def _check_token_ids(value: Any) -> tuple[int, ...]:
    items = _as_list(value, "token_ids")
    if all(type(item) is int for item in items) and (not items or (min(items) >= 0 and max(items) <= MAX_TOKEN_ID)):
        return tuple(items)  # the common case, without the per-item ABC checks below
    for i, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, numbers.Integral) or not 0 <= int(item) <= MAX_TOKEN_ID:
            raise _InvalidTrainingData(
                f"token_ids[{i}] is {safe_repr(item):.40}, not a token id (an int from 0 to {MAX_TOKEN_ID})"
            )
    return tuple(int(item) for item in items)


def _training_attributes(state_key: Any, logprobs: Any, token_ids: Any, prompt_token_ids: Any = None) -> dict[str, Any]:
    """The valid ones of ``state_key``, ``logprobs``, ``token_ids`` and ``prompt_token_ids`` as
    span attributes; each invalid one (or both output lists, when their lengths differ) is logged
    and left out. Token ids are content: kept only when content is captured."""
    attrs: dict[str, Any] = {}
    checks: list[tuple[str, Any, Callable[[Any], Any]]] = [
        (STATE_KEY, state_key, _check_state_key),
        (LOGPROBS, logprobs, _check_logprobs),
        (TOKEN_IDS, token_ids, _check_token_ids),
        (PROMPT_TOKEN_IDS, prompt_token_ids, _check_token_ids),
    ]
    for key, value, check in checks:
        if value is None:
            continue
        try:
            attrs[key] = check(value)
        except _InvalidTrainingData:
            log_failure(f"record_llm_call({key.rsplit('.', 1)[-1]}=...)")
    if LOGPROBS in attrs and TOKEN_IDS in attrs and len(attrs[LOGPROBS]) != len(attrs[TOKEN_IDS]):
        try:
            raise _InvalidTrainingData(
                f"{len(attrs[LOGPROBS])} logprobs for {len(attrs[TOKEN_IDS])} token_ids: both left out"
            )
        except _InvalidTrainingData:
            log_failure("record_llm_call(logprobs=..., token_ids=...)")
        del attrs[LOGPROBS], attrs[TOKEN_IDS]
    if not capture_content():
        attrs.pop(TOKEN_IDS, None)
        attrs.pop(PROMPT_TOKEN_IDS, None)
    return attrs


def record_llm_call(
    model: str,
    input_messages: Any = None,
    output: Any = None,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    provider: str | None = None,
    reasoning: str | None = None,
    finish_reason: str | Sequence[str] | None = None,
    tool_calls: Sequence[Any] | None = None,
    start_time: TimeLike = None,
    end_time: TimeLike = None,
    duration_s: float | None = None,
    error: BaseException | str | None = None,
    agent_id: str | None = None,
    state_key: str | None = None,
    logprobs: Sequence[float] | None = None,
    token_ids: Sequence[int] | None = None,
    policy_version: str | None = None,
    prompt_token_ids: Sequence[int] | None = None,
    **attributes: Any,
) -> SpanContext | None:
    """Record one LLM call made outside a traced client, as a finished ``chat {model}`` span.

    ``agent_id``: the agent that made the call (``gen_ai.agent.id``), for multi-agent systems
    whose agents share one rollout.

    For training on the call (GiGPO step datasets, offline GRPO):

    * ``state_key``: the GiGPO state key of this step (``agent_rl.state.key``): steps of one
      group with the same key are compared with each other. A recorded key always wins over
      the ``agent_rl_state_key`` hook.
    * ``logprobs``: the behaviour policy's log-prob of each sampled output token, in order
      (``agent_rl.logprobs``; the step dataset's ``old_logprobs``). Finite numbers.
    * ``token_ids``: the sampled output token ids (``agent_rl.token_ids``; ints >= 0, as many
      as ``logprobs`` when both are given). Stored only when content is captured.
    * ``prompt_token_ids``: the prompt's token ids exactly as the model saw them
      (``agent_rl.prompt_token_ids``; vLLM and SGLang return them), so training uses the tokens
      that were generated from rather than re-tokenised text. Stored only when content is captured.
    * ``policy_version``: which policy answered (``agent_rl.policy.version``; a training loop
      sets it to its round's adapter version), so every step is traceable to the weights that
      produced it.

    Any sequence works (a list, a tuple, a numpy array). An invalid value is logged once and
    left out (both lists, when their lengths differ); it never raises into the agent.

    ``input_messages``: a list of messages, or a str (one user message). ``output``: a str (one
    assistant message, ``tool_calls`` added to it), a message dict or a list of messages.
    Times are epoch nanoseconds or datetimes; by default the call ends now and started
    ``duration_s`` earlier. Extra keyword ``attributes`` are stored as span attributes.
    """
    if not is_recording():
        return None
    try:
        attrs: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: OP_CHAT,
            SPAN_KIND: SPAN_KIND_LLM,
            GEN_AI_REQUEST_MODEL: str(model),
        }
        if provider is not None:
            attrs[GEN_AI_PROVIDER_NAME] = str(provider)
        if agent_id is not None:
            attrs[GEN_AI_AGENT_ID] = str(agent_id)
        if input_tokens is not None:
            attrs[GEN_AI_USAGE_INPUT_TOKENS] = int(input_tokens)
        if output_tokens is not None:
            attrs[GEN_AI_USAGE_OUTPUT_TOKENS] = int(output_tokens)
        if finish_reason is not None:
            reasons = [finish_reason] if isinstance(finish_reason, str) else list(finish_reason)
            attrs[GEN_AI_RESPONSE_FINISH_REASONS] = [str(r) for r in reasons]
        if capture_content():
            if input_messages is not None:
                attrs[GEN_AI_INPUT_MESSAGES] = to_json_text(_as_messages(input_messages, "user"))
            if output is not None or tool_calls:
                attrs[GEN_AI_OUTPUT_MESSAGES] = to_json_text(_output_messages(output, tool_calls))
            if reasoning is not None:
                attrs[REASONING] = to_attr(reasoning)
        size = max_size()
        for key, value in attributes.items():
            if value is not None:
                attrs[key] = to_attribute_value(value, size)
        attrs.update(_training_attributes(state_key, logprobs, token_ids, prompt_token_ids))
        if policy_version is not None:
            attrs[POLICY_VERSION] = str(policy_version)
        start_ns, end_ns = _times(start_time, end_time, duration_s)
        return _finished_span(f"{OP_CHAT} {model}", attrs, start_ns, end_ns, error)
    except Exception:
        log_failure("record_llm_call")
        return None


def record_tool_call(
    name: str,
    arguments: Any = None,
    result: Any = None,
    error: BaseException | str | None = None,
    call_id: str | None = None,
    start_time: TimeLike = None,
    end_time: TimeLike = None,
    duration_s: float | None = None,
    **attributes: Any,
) -> SpanContext | None:
    """Record one tool execution as a finished ``execute_tool {name}`` span.

    ``error`` (an exception or a message) marks it failed. ``call_id`` defaults to a new
    32-hex id. Times as in :func:`record_llm_call`. Extra keyword ``attributes`` are stored as
    span attributes (they never replace the tool's own name, id, arguments or result).
    """
    if not is_recording():
        return None
    try:
        attrs: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL,
            SPAN_KIND: SPAN_KIND_TOOL,
            GEN_AI_TOOL_NAME: str(name),
            GEN_AI_TOOL_CALL_ID: str(call_id) if call_id is not None else new_id(),
        }
        if capture_content():
            if arguments is not None:
                attrs[GEN_AI_TOOL_CALL_ARGUMENTS] = to_json_text(arguments)
            if result is not None:
                attrs[GEN_AI_TOOL_CALL_RESULT] = to_json_text(result)
        size = max_size()
        for key, value in attributes.items():
            if value is not None and key not in attrs:
                attrs[key] = to_attribute_value(value, size)
        start_ns, end_ns = _times(start_time, end_time, duration_s)
        return _finished_span(f"{OP_EXECUTE_TOOL} {name}", attrs, start_ns, end_ns, error)
    except Exception:
        log_failure("record_tool_call")
        return None


# --- events -----------------------------------------------------------------------------------
def _event_on_span(event: str, attributes: dict[str, Any], span_name: str, kind: str) -> None:
    """Add ``event`` to the current recording span, or to a new zero-length span."""
    span = current_recording_span()
    if span is not None:
        span.add_event(event, attributes=attributes)
        return
    now = time.time_ns()
    new = tracing.get_tracer().start_span(span_name, start_time=now, attributes={SPAN_KIND: kind})
    try:
        new.add_event(event, attributes=attributes, timestamp=now)
    finally:
        end_span(new, end_time=now)


def record_event(
    event_type: str,
    *,
    round: int | None = None,  # noqa: A002 - the documented name
    agent_id: str | None = None,
    target: str | None = None,
    reason: str | None = None,
    content: Any = None,
    **data: Any,
) -> None:
    """Record a coordination/agent event (``new_answer``, ``vote``, ``restart``,
    ``final_answer``, ``reasoning``, or your own type) on the current span.

    Extra keyword arguments are stored together as JSON in ``agent_rl.event.data``.
    """
    if not is_recording():
        return
    try:
        size = max_size()
        attrs: dict[str, Any] = {EVENT_TYPE: str(event_type)}
        if round is not None:
            attrs[EVENT_ROUND] = to_attribute_value(round, size)
        if agent_id is not None:
            attrs[EVENT_AGENT_ID] = str(agent_id)
        if target is not None:
            attrs[EVENT_TARGET] = str(target)
        if reason is not None:
            attrs[EVENT_REASON] = to_attr(reason)
        if content is not None and capture_content():
            attrs[EVENT_CONTENT] = to_attr(content)
        if data:
            attrs[EVENT_DATA] = to_json_text(data)
        info = rl_context.current_rollout()
        if info is not None:
            attrs[ROLLOUT_ID] = info.rollout_id
        _event_on_span(EVENT_NAME, attrs, f"event {event_type}", SPAN_KIND_EVENT)
    except Exception:
        log_failure("record_event")


# --- rewards ----------------------------------------------------------------------------------
def _check_reward(value: Any, step: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"emit_reward() needs a finite number (int or float), got {type(value).__name__} {safe_repr(value)}"
        )
    score = float(value)
    if not math.isfinite(score):
        raise ValueError(f"emit_reward() needs a finite number, got {score!r}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral)):
        raise ValueError(f"emit_reward() step must be an int, got {safe_repr(step)}")
    return score


def emit_reward(
    value: float,
    name: str = "reward",
    *,
    step: int | None = None,
    reason: str | None = None,
    rollout_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Attach a reward to the current rollout (or to ``rollout_id``), optionally for one step.

    Raises ``ValueError`` for a value that is not a finite number (bools, strings, NaN, inf are
    rejected), a non-int ``step``, or when there is no rollout to reward. Stored as a
    ``gen_ai.evaluation.result`` event with ``agent_rl.reward.source="emitted"``.
    """
    score = _check_reward(value, step)
    if not is_recording():
        return
    current = rl_context.current_rollout()
    target_id = str(rollout_id) if rollout_id is not None else None
    if target_id is None:
        if current is None:
            raise ValueError(
                "emit_reward() needs a rollout: call it inside `with rollout(...)` or a traced "
                "agent, or pass rollout_id="
            )
        target_id = current.rollout_id
    try:
        _emit(score, name, step, reason, target_id, metadata, current)
    except Exception:
        log_failure("emit_reward")


def _emit(
    score: float,
    name: str,
    step: int | None,
    reason: str | None,
    target_id: str,
    metadata: Mapping[str, Any] | None,
    current: rl_context.RolloutInfo | None,
) -> None:
    attrs: dict[str, Any] = {
        GEN_AI_EVALUATION_NAME: str(name),
        GEN_AI_EVALUATION_SCORE_VALUE: score,
        ROLLOUT_ID: target_id,
        REWARD_SOURCE: "emitted",
    }
    if reason is not None:
        attrs[GEN_AI_EVALUATION_EXPLANATION] = to_attr(reason)
    if step is not None:
        attrs[STEP_INDEX] = int(step)
    if metadata is not None:
        attrs[REWARD_METADATA] = to_json_text(metadata)
    same_rollout = current is not None and current.rollout_id == target_id
    span = current_recording_span() if same_rollout else None
    if span is not None:
        span.add_event(EVENT_EVALUATION_RESULT, attributes=attrs)
        return
    # A span of its own, stamped with the rewarded rollout. Rewarding another rollout: started
    # with no active rollout (so the current one's ids are not stamped on it), as a new trace.
    tracer = tracing.get_tracer()
    kind = {SPAN_KIND: SPAN_KIND_REWARD}
    now = time.time_ns()
    if same_rollout:
        new = tracer.start_span(f"reward {name}", attributes=kind, start_time=now)
    else:
        token = rl_context.set_current(None)
        try:
            new = tracer.start_span(f"reward {name}", context=otel_context.Context(), attributes=kind, start_time=now)
        finally:
            rl_context.reset_current(token)
    try:
        set_attributes(new, {ROLLOUT_ID: target_id})
        new.add_event(EVENT_EVALUATION_RESULT, attributes=attrs, timestamp=now)
    finally:
        end_span(new, end_time=now)
