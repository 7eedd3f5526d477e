"""Reading OpenAI-shaped chat completions (the OpenAI SDK, vLLM, SGLang, LiteLLM): whole
responses and streamed chunks, into :class:`CallResult` s, one per choice.

Token ids and log-probs, when the server sent them:

* ``choices[i].logprobs.content[j].logprob``: OpenAI's (and vLLM's) per-token log-probs;
* ``choices[i].token_ids``: the sampled token ids (vLLM with ``return_token_ids``; also in each
  streamed chunk's choice, as a delta);
* ``prompt_token_ids``: the prompt's ids after the chat template (vLLM, on the response or the
  first streamed chunk; SGLang per choice).

Every reader takes objects or dicts (:func:`~.capture.get`) and never trusts a field's type: a
value of the wrong shape is left out.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from agent_rl_plugin.instrumentation.clients.capture import CallRequest, CallResult, get, int_list, plain, view


def _logprobs(choice: Any) -> list[float] | None:
    content = get(get(choice, "logprobs"), "content")
    if not isinstance(content, (list, tuple)) or not content:
        return None
    values = [get(item, "logprob") for item in content]
    if set(map(type, values)) == _FLOAT and all(map(math.isfinite, values)):
        return values  # the common case: floats already, without a check per item below
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return [float(v) for v in values]
    return None


_FLOAT = {float}


def _tool_call(call: Any) -> dict[str, Any]:
    function = get(call, "function")
    return {
        "id": get(call, "id"),
        "type": "function",
        "function": {"name": get(function, "name"), "arguments": get(function, "arguments", "")},
    }


def _usage(response: Any) -> tuple[int | None, int | None]:
    usage = get(response, "usage")
    prompt, completion = get(usage, "prompt_tokens"), get(usage, "completion_tokens")
    return (prompt if isinstance(prompt, int) else None, completion if isinstance(completion, int) else None)


def chat_results(response: Any) -> list[CallResult]:
    """One :class:`CallResult` per choice of a whole (not streamed) chat completion."""
    choices = get(response, "choices") or []
    prompt_ids = int_list(get(response, "prompt_token_ids"))
    input_tokens, output_tokens = _usage(response)
    results = []
    for choice in choices:
        message = get(choice, "message")
        calls = get(message, "tool_calls") or []
        reasoning = get(message, "reasoning_content") or get(message, "reasoning")
        result = CallResult(
            output=get(message, "content") if not calls or get(message, "content") else None,
            tool_calls=[_tool_call(c) for c in calls] or None,
            finish_reasons=[str(get(choice, "finish_reason"))] if get(choice, "finish_reason") else None,
            response_model=get(response, "model"),
            response_id=get(response, "id"),
            logprobs=_logprobs(choice),
            token_ids=int_list(get(choice, "token_ids")),
            prompt_token_ids=prompt_ids or int_list(get(choice, "prompt_token_ids")),
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )
        if len(choices) == 1:
            result.input_tokens, result.output_tokens = input_tokens, output_tokens
        else:
            result.attributes["agent_rl.choice.index"] = get(choice, "index", 0)
        results.append(result)
    if not results:
        return [
            CallResult(response_model=get(response, "model"), input_tokens=input_tokens, output_tokens=output_tokens)
        ]
    return results


class _ChoiceParts:
    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.logprobs: list[float] = []
        self.logprobs_ok = True
        self.token_ids: list[int] = []
        self.prompt_token_ids: list[int] | None = None


class ChatStreamAccumulator:
    """Builds per-choice results from streamed chat completion chunks."""

    def __init__(self) -> None:
        self._choices: dict[int, _ChoiceParts] = {}
        self._model: str | None = None
        self._id: str | None = None
        self._usage: tuple[int | None, int | None] = (None, None)
        self._prompt_ids: list[int] | None = None

    def add(self, chunk: Any) -> None:
        fields = view(chunk)
        self._model = fields.get("model") or self._model
        self._id = fields.get("id") or self._id
        if fields.get("usage") is not None:
            self._usage = _usage(chunk)
        if self._prompt_ids is None and fields.get("prompt_token_ids") is not None:
            self._prompt_ids = int_list(fields.get("prompt_token_ids"))
        for choice in fields.get("choices") or ():
            self._add_choice(view(choice))

    def _add_choice(self, choice: Mapping[str, Any]) -> None:
        index = choice.get("index") or 0
        parts = self._choices.setdefault(index if isinstance(index, int) else 0, _ChoiceParts())
        delta = view(choice.get("delta"))
        text = delta.get("content")
        if isinstance(text, str):
            parts.content.append(text)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            parts.reasoning.append(reasoning)
        for call in delta.get("tool_calls") or ():
            self._add_tool_call(parts, call)
        parts.finish_reason = choice.get("finish_reason") or parts.finish_reason
        if choice.get("logprobs") is not None:
            step = _logprobs(choice)
            if step is not None:
                parts.logprobs.extend(step)
            elif get(choice.get("logprobs"), "content"):
                parts.logprobs_ok = False
        ids = choice.get("token_ids")
        if ids is not None:
            parts.token_ids.extend(int_list(ids) or ())
        if parts.prompt_token_ids is None and choice.get("prompt_token_ids") is not None:
            parts.prompt_token_ids = int_list(choice.get("prompt_token_ids"))

    @staticmethod
    def _add_tool_call(parts: _ChoiceParts, call: Any) -> None:
        index = get(call, "index", len(parts.tool_calls))
        entry = parts.tool_calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
        )
        entry["id"] = get(call, "id") or entry["id"]
        function = get(call, "function")
        entry["function"]["name"] = get(function, "name") or entry["function"]["name"]
        piece = get(function, "arguments")
        if isinstance(piece, str):
            entry["function"]["arguments"] += piece

    def result(self) -> list[CallResult]:
        results = []
        for index in sorted(self._choices):
            parts = self._choices[index]
            calls = [parts.tool_calls[k] for k in sorted(parts.tool_calls)]
            text = "".join(parts.content)
            result = CallResult(
                output=text if text or not calls else None,
                tool_calls=calls or None,
                finish_reasons=[str(parts.finish_reason)] if parts.finish_reason else None,
                response_model=self._model,
                response_id=self._id,
                logprobs=parts.logprobs if parts.logprobs and parts.logprobs_ok else None,
                token_ids=parts.token_ids or None,
                prompt_token_ids=self._prompt_ids or parts.prompt_token_ids,
                reasoning="".join(parts.reasoning) or None,
            )
            if len(self._choices) == 1:
                result.input_tokens, result.output_tokens = self._usage
            else:
                result.attributes["agent_rl.choice.index"] = index
            results.append(result)
        return results or [CallResult(response_model=self._model)]


def chat_request(provider: str, kwargs: dict[str, Any]) -> CallRequest:
    """An OpenAI-shaped chat call's request (OpenAI SDK, LiteLLM): model, messages, settings, ``n``."""
    return CallRequest(
        provider=provider,
        model=str(kwargs.get("model")),
        messages=plain(kwargs.get("messages")),
        attributes=chat_request_attributes(kwargs),
        choices=requested_choices(kwargs),
    )


def requested_choices(kwargs: dict[str, Any]) -> int:
    """The ``n`` a chat request asks for (1 when absent or not a small positive int)."""
    n = kwargs.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1024 else 1


def chat_request_attributes(kwargs: dict[str, Any]) -> dict[str, Any]:
    """GenAI request attributes of a chat call's keyword arguments (tools as definitions)."""
    attributes: dict[str, Any] = {}
    temperature = kwargs.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        attributes["gen_ai.request.temperature"] = float(temperature)
    for name in ("max_tokens", "max_completion_tokens"):
        value = kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            attributes["gen_ai.request.max_tokens"] = value
    for name, key in (("top_p", "gen_ai.request.top_p"), ("seed", "gen_ai.request.seed")):
        value = kwargs.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[key] = value
    tools = kwargs.get("tools")
    if isinstance(tools, (list, tuple)) and tools:
        attributes["gen_ai.tool.definitions"] = plain(list(tools))
    return attributes


__all__ = ["ChatStreamAccumulator", "chat_request", "chat_request_attributes", "chat_results", "requested_choices"]
