"""The captured-call hot path (issue 19, ``capture`` bench row): what a captured OpenAI SDK call
records, key by key and in order, and the shortcuts that made it cheaper giving exactly what the
general code gives.

The shortcuts: the ``chat`` span's start attributes (token ids and log-probs as tuples included)
are handed to our span processor without OTel re-validating each item
(:func:`agent_rl_plugin.tracing.start_with_attributes`); the export path's redaction pre-check
reads tuples of plain values (:meth:`Redactor.cannot_change`), so a ``chat`` span is passed on
without a copy; SDK values are copied, and token ids and log-probs checked, with C-level type
scans (:func:`~agent_rl_plugin.instrumentation.clients.capture.plain`, ``int_list``,
``chat_shape._logprobs``).
"""

from __future__ import annotations

import math
import random
from typing import Any

import openai
import pydantic
import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS
from agent_rl_plugin.instrumentation.clients import instrument_clients, uninstrument_clients
from agent_rl_plugin.instrumentation.clients.capture import int_list, plain
from agent_rl_plugin.instrumentation.clients.chat_shape import _logprobs
from agent_rl_plugin.redaction import Redactor
from agent_rl_plugin.testing.llm_server import Reply, ScriptedLLMServer

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Which way?"}]
TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]
WORDS = [f" w{i}" for i in range(16)]


def _chat_spans(exporter) -> list:  # noqa: ANN001
    arl.flush()
    return sorted((s for s in exporter.get_finished_spans() if s.name.startswith("chat ")), key=lambda s: s.start_time)


def _typed(span) -> list[tuple[str, Any, str]]:  # noqa: ANN001
    return [(k, v, type(v).__name__) for k, v in span.attributes.items()]


@pytest.fixture
def openai_client():
    reply = Reply(text="".join(WORDS), pieces=WORDS, token_ids=list(range(16)), prompt_token_ids=list(range(40)), finish_reason="stop",
                  model="m")  # fmt: skip
    with ScriptedLLMServer([reply, reply]) as server:
        instrument_clients(["openai"])
        try:
            yield openai.OpenAI(base_url=server.openai_url, api_key="test", max_retries=0)
        finally:
            uninstrument_clients(["openai"])


def test_the_bench_call_records_exactly_these_attributes_in_order(span_exporter, openai_client) -> None:
    with arl.rollout(task_id="bench") as rollout:
        openai_client.chat.completions.create(
            model="m", messages=MESSAGES, tools=TOOLS, logprobs=True, extra_body={"return_token_ids": True}
        )
        for _ in openai_client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_body={"return_token_ids": True}
        ):
            pass
    whole, streamed = _chat_spans(span_exporter)
    text = '[{"role": "assistant", "content": "' + "".join(WORDS) + '"}]'
    head = [
        ("gen_ai.operation.name", "chat", "str"),
        ("agent_rl.span.kind", "llm", "str"),
        ("gen_ai.request.model", "m", "str"),
        ("gen_ai.provider.name", "openai", "str"),
    ]
    inputs = ("gen_ai.input.messages", '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": '
              '"Which way?"}]', "str")  # fmt: skip
    usage = [("gen_ai.usage.input_tokens", whole.attributes["gen_ai.usage.input_tokens"], "int"),
             ("gen_ai.usage.output_tokens", 16, "int")]  # fmt: skip
    rollout_ids = [("agent_rl.rollout.id", rollout.rollout_id, "str"), ("agent_rl.task.id", "bench", "str")]
    assert _typed(whole) == [
        *head,
        *usage,
        ("gen_ai.response.finish_reasons", ("stop",), "tuple"),
        inputs,
        ("gen_ai.output.messages", text, "str"),
        (
            "gen_ai.tool.definitions",
            '[{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]',
            "str",
        ),  # fmt: skip
        ("gen_ai.response.model", "m", "str"),
        ("gen_ai.response.id", whole.attributes["gen_ai.response.id"], "str"),
        ("agent_rl.logprobs", (-0.5,) * 16, "tuple"),
        ("agent_rl.token_ids", tuple(range(16)), "tuple"),
        ("agent_rl.prompt_token_ids", tuple(range(40)), "tuple"),
        *rollout_ids,
    ]
    assert all(type(v) is float for v in whole.attributes["agent_rl.logprobs"])
    assert all(type(v) is int for v in whole.attributes["agent_rl.prompt_token_ids"])
    items = _typed(streamed)
    assert items[: len(head)] == head
    assert ("gen_ai.response.finish_reasons", ("stop",), "tuple") in items
    assert ("gen_ai.output.messages", text, "str") in items
    assert ("agent_rl.token_ids", tuple(range(16)), "tuple") in items
    assert items[-2:] == rollout_ids


CLEAN = {"s": "x", "floats": (-0.5, 1.0), "ints": [1, 2, 3], "words": ["stop", "length"], "bools": (True, False),
         "mixed": (1, 2.5, "a", True), "empty": ()}  # fmt: skip
# Not stored directly (OTel cleans them): the whole mapping then takes OTel's own path.
UNCLEAN = {**CLEAN, "with_none": (1, None), "nested": ((1, 2), (3,)), "mapping": {"a": 1}}


@pytest.mark.parametrize("attributes", [CLEAN, UNCLEAN], ids=["clean", "unclean"])
def test_start_attributes_handed_over_are_stored_as_otel_stores_them(span_exporter, attributes) -> None:  # noqa: ANN001
    tracer = tracing.get_tracer()
    tracing.start_with_attributes(tracer, "chat handed", dict(attributes), start_time=1_000).end(end_time=2_000)
    tracer.start_span("chat general", attributes=dict(attributes), start_time=1_000).end(end_time=2_000)
    handed, general = _chat_spans(span_exporter)
    assert handed.start_time == general.start_time == 1_000
    assert _typed(handed) == _typed(general)
    assert handed.attributes["ints"] == (1, 2, 3)


def test_long_strings_in_a_sequence_are_cut_as_otel_cuts_them() -> None:
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=4))
    tracer = provider.get_tracer("t")
    attributes: dict[str, Any] = {"words": ("stop", "toolong"), "fine": ("ab", 1), "text": "abc"}
    handed: Any = tracer.start_span("handed")
    tracing._put_start_attributes(handed, dict(attributes))  # noqa: SLF001 - the shortcut itself
    general: Any = tracer.start_span("general", attributes=dict(attributes))
    assert dict(handed.attributes) == dict(general.attributes)
    assert handed.attributes["words"] == ("stop", "tool")
    assert list(handed.attributes) == list(general.attributes)


FRAGMENTS = ["sk-", "Ab3dEf6hIj9kLm2nOp5qRs8t", "password", "=", ":", " ", "Bearer ", "eyJ", "abcdefghij", ".",
             "AKIA", "ABCDEFGHIJKLMNOP", "ghp_", "x" * 30, "token", "api_key", "\x00", "-", "stop", "w1"]  # fmt: skip


def test_redaction_precheck_reads_tuples_and_agrees_with_the_full_redaction() -> None:
    redactor = Redactor(DEFAULT_REDACTION_PATTERNS)
    secret = "sk-" + "Ab3dEf6hIj9kLm2nOp5qRs8t"
    assert redactor.cannot_change({"ids": (1, 2, 3), "lps": (-0.5, -1.0), "reasons": ("stop",), "flags": (True,)})
    assert not redactor.cannot_change({"reasons": ("stop", secret)})
    assert not redactor.cannot_change({"nested": (("stop",),)})  # fail closed
    assert not redactor.cannot_change({"as_list": ["stop"]})  # only OTel's own sequences (tuples)
    masked = {"reasons": ("stop", secret)}
    assert redactor.redact_attributes(masked) and secret not in repr(masked)
    rng = random.Random(19)
    for _ in range(3000):
        attributes: dict[str, Any] = {
            f"k{i}": tuple("".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 6))) if rng.random() < 0.7
                           else rng.randint(0, 9) for _ in range(rng.randint(0, 3)))
            for i in range(rng.randint(1, 3))
        }  # fmt: skip
        if redactor.cannot_change(attributes):
            assert {k: redactor.redact_value(v) for k, v in attributes.items()} == attributes, attributes


# --- the old general code, kept here as the reference the shortcuts must match -----------------
def _plain_reference(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:
            return dump()
    if isinstance(value, dict):
        return {k: _plain_reference(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_reference(v) for v in value]
    return value


def _int_list_reference(value: Any) -> list[int] | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    return list(value) if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else None


def _logprobs_reference(values: list[Any]) -> list[float] | None:
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return [float(v) for v in values]
    return None


class _Part(pydantic.BaseModel):
    type: str = "text"
    text: str | None = None


class _DumpingDict(dict):
    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {"dumped": True}


class _Flag(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        MESSAGES,
        [{"role": "user", "content": [_Part(text="hi"), {"type": "image"}]}, ("a", 1)],
        {"k": _DumpingDict(a=1), "t": (1, [2.5, None]), "b": True},
        _DumpingDict(a=1),
        [_DumpingDict(a=1)],
        ("x", {"y": _Part(text=None)}),
        "text",
        None,
    ],
)
def test_plain_gives_what_the_general_copy_gives(value: Any) -> None:
    copied = plain(value)
    assert copied == _plain_reference(value)
    assert repr(copied) == repr(_plain_reference(value))  # same types all the way down
    if isinstance(value, (list, dict)):
        assert copied is not value  # a copy: the caller may change theirs later


@pytest.mark.parametrize(
    "value",
    [[1, 2, 3], (4, 5), [1, True], [_Flag(3), 4], [1, 2.0], [], "12", [None], [2**40]],
)
def test_int_list_gives_what_the_general_check_gives(value: Any) -> None:
    assert int_list(value) == _int_list_reference(value)


@pytest.mark.parametrize(
    "values",
    [[-0.5, -1.25], [-2, -0.5], [True, -0.5], [-0.5, math.nan], [-math.inf], [-0.5, None], [-1.0, "x"], [0.0]],
)
def test_logprobs_give_what_the_general_check_gives(values: list[Any]) -> None:
    choice = {"logprobs": {"content": [{"token": "t", "logprob": v} for v in values]}}
    got = _logprobs(choice)
    assert got == _logprobs_reference(values)
    if got is not None:
        assert all(type(v) is float for v in got)


def test_token_lists_longer_than_the_cap_are_left_out_whatever_their_type(span_exporter) -> None:
    from agent_rl_plugin.instrumentation.recording import MAX_TOKENS_PER_CALL

    too_many = MAX_TOKENS_PER_CALL + 1
    arl.record_llm_call("cap", "q", "a", logprobs=[-0.5] * too_many, prompt_token_ids=tuple(range(too_many)))
    arl.record_llm_call("cap", "q", "a", logprobs=(-0.5, -0.25), token_ids=[3, 4], prompt_token_ids=(1, 2))
    over, kept = _chat_spans(span_exporter)
    assert "agent_rl.logprobs" not in over.attributes and "agent_rl.prompt_token_ids" not in over.attributes
    assert kept.attributes["agent_rl.logprobs"] == (-0.5, -0.25)
    assert kept.attributes["agent_rl.token_ids"] == (3, 4)
    assert kept.attributes["agent_rl.prompt_token_ids"] == (1, 2)
