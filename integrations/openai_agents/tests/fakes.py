"""A scripted custom ``Model`` (it opens no tracing span of its own, like most custom models),
function tools (one raising), two agents with a handoff, and a guardrail."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    GuardrailFunctionOutput,
    ModelResponse,
    Usage,
    function_tool,
    input_guardrail,
)
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(arguments),
                                    call_id=call_id, id=f"fc_{call_id}", status="completed")


class ScriptedModel(Model):
    """Returns the scripted outputs in order (a step that is an exception is raised). Records
    what it was sent in ``calls``; emits no tracing span."""

    def __init__(self, steps: list[Any], name: str = "scripted-1", tokens: tuple[int, int] = (12, 5)) -> None:
        self.steps = list(steps)
        self.model = name
        self.tokens = tokens
        self.calls: list[dict[str, Any]] = []

    def _next(self, system_instructions: Any, input: Any) -> list[Any]:
        self.calls.append({"instructions": system_instructions, "input": input})
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return list(step)

    def _usage(self) -> Usage:
        i, o = self.tokens
        return Usage(requests=1, input_tokens=i, output_tokens=o, total_tokens=i + o)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kwargs) -> ModelResponse:
        output = self._next(system_instructions, input)
        return ModelResponse(output=output, usage=self._usage(), response_id=None)

    async def stream_response(self, system_instructions, input, model_settings, tools, output_schema,
                              handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                              prompt=None, **kwargs) -> AsyncIterator[Any]:
        output = self._next(system_instructions, input)
        i, o = self.tokens
        response = Response(
            id="resp_1", created_at=0, model=self.model, object="response", output=output,
            tool_choice="auto", tools=[], top_p=None, parallel_tool_calls=False, status="completed",
            usage=ResponseUsage(input_tokens=i, output_tokens=o, total_tokens=i + o,
                                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                                output_tokens_details=OutputTokensDetails(reasoning_tokens=0)),
        )
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=1)


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@function_tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@input_guardrail
async def no_secrets(ctx, agent, input) -> GuardrailFunctionOutput:
    text = input if isinstance(input, str) else json.dumps(input, default=str)
    return GuardrailFunctionOutput(output_info={"checked": True}, tripwire_triggered="password" in text)


def main_script() -> list[Any]:
    """Triage: add and a failing divide in one turn, then hand off to the writer."""
    return [
        [call("add", {"a": 2, "b": 3}, "call_add"), call("divide", {"a": 1, "b": 0}, "call_div")],
        [say("Handing over."), call("transfer_to_writer", {}, "call_handoff")],
    ]


def writer_script() -> list[Any]:
    return [[say("2 + 3 = 5; 1 / 0 is undefined.")]]


def build_agents(wrap=lambda m: m, main_steps=None, writer_steps=None) -> tuple[Agent, ScriptedModel, ScriptedModel]:
    """(triage agent, its model, the writer's model); ``wrap`` is applied to both models."""
    main_model = ScriptedModel(main_script() if main_steps is None else main_steps, name="scripted-triage")
    writer_model = ScriptedModel(writer_script() if writer_steps is None else writer_steps, name="scripted-writer", tokens=(20, 9))
    writer = Agent(name="writer", instructions="Write the answer.", model=wrap(writer_model))
    triage = Agent(name="triage", instructions="Compute, then hand off to the writer.", tools=[add, divide],
                   handoffs=[writer], input_guardrails=[no_secrets], model=wrap(main_model))
    return triage, main_model, writer_model


# -- the SDK's own OpenAI models, against a mocked HTTP transport (no network, no key) ----------
def openai_client(responses: list[dict[str, Any]] | None = None, completions: list[dict[str, Any]] | None = None):
    """An ``AsyncOpenAI`` whose ``/responses`` and ``/chat/completions`` answer the scripted
    steps (``{"output": [...items]}`` / ``{"content": ..., "tool_calls": [...]}``)."""
    import httpx2
    from openai import AsyncOpenAI

    responses = list(responses or [])
    completions = list(completions or [])

    def handler(request):
        if request.url.path.endswith("/responses"):
            step = responses.pop(0)
            return httpx2.Response(200, json={
                "id": f"resp_{len(responses)}", "object": "response", "created_at": 0,
                "model": "gpt-test-2024", "status": "completed", "instructions": step.get("instructions"),
                "output": step["output"], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 30, "output_tokens": 4, "total_tokens": 34,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 1}},
            })
        step = completions.pop(0)
        message = {"role": "assistant", "content": step.get("content")}
        if step.get("tool_calls"):
            message["tool_calls"] = step["tool_calls"]
        return httpx2.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test-2024",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if step.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 21, "completion_tokens": 6, "total_tokens": 27},
        })

    return AsyncOpenAI(api_key="sk-test-not-a-key", base_url="http://mock.invalid/v1",
                       http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))


RESPONSES_SCRIPT = [
    {"output": [{"type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "add",
                 "arguments": "{\"a\": 2, \"b\": 3}", "status": "completed"}], "instructions": "Be brief."},
    {"output": [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "2 + 3 is 5"}]},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "5", "annotations": []}]}], "instructions": "Be brief."},
]

COMPLETIONS_SCRIPT = [
    {"content": None, "tool_calls": [{"id": "call_c1", "type": "function",
                                      "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 1}"}}]},
    {"content": "2"},
]
