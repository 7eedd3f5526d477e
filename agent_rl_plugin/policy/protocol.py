"""The OpenAI chat-completions wire format of the policy server (:mod:`.server`): requests in,
checked; answers out, shaped like vLLM's OpenAI server so the same agent code runs on both.

    request = parse_chat_request(json.loads(body), max_tokens_limit=4096)
    generation = policy.generate(request.messages, choices=request.choices, ...)
    answer = chat_response(request, generation, model="policy", decode=tokenizer.decode)

Contract:

* :func:`parse_chat_request` takes the JSON object of ``POST /v1/chat/completions`` and returns a
  :class:`ChatRequest`, or raises :class:`ApiError` (status 400) naming the bad field. Accepted:
  ``model``, ``messages`` (roles ``system``/``developer``/``user``/``assistant``/``tool``; content a
  string or a list of ``{"type": "text", "text": ...}`` parts), ``temperature`` (finite, >= 0;
  ``0`` is greedy; default 1), ``max_completion_tokens`` or ``max_tokens`` (1 to the limit;
  ``max_completion_tokens`` wins), ``logprobs`` (bool), ``top_logprobs`` (0 only), ``n`` (1 only),
  ``stream`` (false only), ``seed`` (an integer: the policy's sampling generator is reseeded
  with it before this answer, so a seed repeats its sample), ``return_token_ids``, ``return_tokens_as_token_ids`` and the choice constraint as
  ``structured_outputs: {"choice": [...]}`` (current vLLM) or ``guided_choice: [...]`` (older
  vLLM; both may be given when equal).
* Parameters this server cannot honour are refused, never silently dropped: any other
  structured-output form (``json``, ``regex``, ``grammar``, ``guided_json``...), ``tools``,
  ``stop``, ``logit_bias``, a custom ``chat_template``, ``response_format`` other than text, and
  ``top_p``/``top_k``/``min_p``/penalties other than their neutral values (``top_p`` 1, ``top_k``
  -1 or 0, ``min_p`` 0, ``presence_penalty``/``frequency_penalty`` 0, ``repetition_penalty`` 1).
  Fields not named here (``user``, ``metadata``, ``store``, ...) are ignored, as vLLM does.
* :func:`chat_response` builds the ``chat.completion`` object: ``choices[0].message`` (role
  ``assistant``), ``finish_reason`` (``stop``/``length``), ``logprobs.content`` (one entry per
  generated token, the end token included; ``top_logprobs`` empty) when asked, ``usage``,
  ``system_fingerprint`` and ``agent_rl_policy_version`` (the policy version that produced the
  answer) and, with ``return_token_ids``, ``prompt_token_ids`` (top level) and
  ``choices[0].token_ids`` as vLLM returns them.
* :func:`error_body` is OpenAI's error shape ``{"error": {"message", "type", "param", "code"}}``
  with ``code`` the HTTP status, as vLLM answers.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.policy.local import Generation

__all__ = ["ApiError", "ChatRequest", "chat_response", "error_body", "parse_chat_request"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
MAX_CHOICES = 1024
MAX_CHOICE_CHARS = 1000
#: The most characters all the choices of one request may have together (tokenising a choice
#: set holds the policy's lock, and the policy caches sets: this bounds both).
MAX_CHOICE_SET_CHARS = 16_384
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    411: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    500: "internal_server_error",
    503: "service_unavailable",
}
# Sampling fields this server cannot apply: accepted only at the value that changes nothing.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "top_p": (1, 1.0),
    "top_k": (-1, 0),
    "min_p": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "frequency_penalty": (0, 0.0),
    "repetition_penalty": (1, 1.0),
    "best_of": (1,),
    "use_beam_search": (False,),
    "min_tokens": (0,),
    "ignore_eos": (False,),
    "skip_special_tokens": (True,),
    "echo": (False,),
    "add_generation_prompt": (True,),
    "continue_final_message": (False,),
    "prompt_logprobs": (0,),
    "parallel_tool_calls": (True, False),
    "tool_choice": ("none", "auto"),
}
# Fields that are refused unless empty: each changes the answer in a way this server does not do.
_EMPTY_ONLY = ("stop", "stop_token_ids", "logit_bias", "tools", "functions", "chat_template", "chat_template_kwargs")
_GUIDED_OTHER = (
    "guided_json",
    "guided_regex",
    "guided_grammar",
    "guided_whitespace_pattern",
    "guided_decoding_backend",
)


class ApiError(AgentRLError):
    """A request the server answers with an error: ``status`` (HTTP), the message, and ``param``
    (the request field at fault, or ``None``)."""

    def __init__(self, status: int, message: str, param: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat-completion request (see the module doc); ``model`` is ``None`` when the
    request named none (the server then answers with the weights it holds)."""

    model: str | None
    messages: list[dict[str, str]]
    choices: tuple[str, ...] | None
    temperature: float
    greedy: bool
    max_tokens: int
    logprobs: bool
    return_token_ids: bool
    tokens_as_ids: bool
    seed: int | None = None


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's (and vLLM's) error object for ``status``."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "internal_server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _content(value: Any, index: int) -> str:
    """A message's content as text: a string, ``None`` (empty) or a list of text parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise _bad(
                    f"messages[{index}].content: only text parts are supported "
                    '({"type": "text", "text": "..."}), got ' + repr(part)[:200],
                    "messages",
                )
            texts.append(part["text"])
        return "".join(texts)
    raise _bad(f"messages[{index}].content must be a string or a list of text parts", "messages")


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise _bad("messages must be a non-empty list of chat messages", "messages")
    out = []
    for index, message in enumerate(value):
        if not isinstance(message, Mapping):
            raise _bad(f"messages[{index}] must be an object with a role and content", "messages")
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"messages[{index}].role must be one of {sorted(ROLES)}, got {role!r}"[:300], "messages")
        if message.get("tool_calls"):
            raise _bad(f"messages[{index}]: tool calls are not supported by this server", "messages")
        out.append({"role": role, "content": _content(message.get("content"), index)})
    return out


def _choice_list(value: Any, param: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _bad(f"{param} must be a non-empty list of strings", param)
    if len(value) > MAX_CHOICES:
        raise _bad(f"{param} has {len(value)} choices; at most {MAX_CHOICES} are allowed", param)
    if sum(len(choice) for choice in value if isinstance(choice, str)) > MAX_CHOICE_SET_CHARS:
        raise _bad(f"the choices in {param} have more than {MAX_CHOICE_SET_CHARS} characters together", param)
    if any(not isinstance(choice, str) or not choice or len(choice) > MAX_CHOICE_CHARS for choice in value):
        raise _bad(
            f"every choice in {param} must be a non-empty string of at most {MAX_CHOICE_CHARS} characters", param
        )
    return tuple(value)


def _choices(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The choice constraint of ``structured_outputs.choice`` and/or ``guided_choice``."""
    found: list[tuple[str, ...]] = []
    structured = body.get("structured_outputs")
    if structured is not None:
        if not isinstance(structured, Mapping):
            raise _bad('structured_outputs must be an object such as {"choice": ["yes", "no"]}', "structured_outputs")
        other = sorted(key for key, value in structured.items() if key != "choice" and value not in (None, False))
        if other:
            raise _bad(
                f"structured_outputs {other} is not supported: this server constrains answers to a "
                'list of choices only ({"choice": [...]})',
                "structured_outputs",
            )
        if structured.get("choice") is None:
            raise _bad('structured_outputs needs "choice": a list of allowed answers', "structured_outputs")
        found.append(_choice_list(structured["choice"], "structured_outputs.choice"))
    if body.get("guided_choice") is not None:
        found.append(_choice_list(body["guided_choice"], "guided_choice"))
    for name in _GUIDED_OTHER:
        if body.get(name) is not None:
            raise _bad(f"{name} is not supported: only choice constraints (guided_choice) are", name)
    if len(found) == 2 and found[0] != found[1]:
        raise _bad("structured_outputs.choice and guided_choice differ: give one of them", "guided_choice")
    return found[0] if found else None


def _check_unsupported(body: Mapping[str, Any]) -> None:
    for name, neutral in _NEUTRAL.items():
        value = body.get(name)
        if value is not None and (isinstance(value, bool) is not isinstance(neutral[0], bool) or value not in neutral):
            raise _bad(f"{name}={value!r} is not supported by this server (only {neutral[0]!r})"[:300], name)
    for name in _EMPTY_ONLY:
        if body.get(name):
            raise _bad(f"{name} is not supported by this server", name)
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise _bad(
            'response_format other than {"type": "text"} is not supported; constrain answers with '
            'structured_outputs: {"choice": [...]}',
            "response_format",
        )


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _bad(f"{name} must be true or false, got {value!r}"[:200], name)
    return value


def parse_chat_request(body: Any, *, max_tokens_limit: int = 4096, default_max_tokens: int = 256) -> ChatRequest:
    """Check the JSON ``body`` of a chat-completion request (see the module doc). Raises
    :class:`ApiError` (400) for anything this server cannot answer as asked."""
    if not isinstance(body, Mapping):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        raise _bad("model must be a non-empty string", "model")
    messages = _messages(body.get("messages"))
    n = body.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise _bad(f"n={n!r}: this server returns one choice per request (n=1)"[:200], "n")
    if body.get("stream") not in (None, False):
        raise _bad("stream=true is not supported: ask without streaming", "stream")
    temperature = body.get("temperature")
    if temperature is None:
        temperature = 1.0
    if not _is_number(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise _bad(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}"[:200], "temperature")
    limit = body.get("max_completion_tokens")
    param = "max_completion_tokens"
    if limit is None:
        limit, param = body.get("max_tokens"), "max_tokens"
    if limit is None:
        limit = min(default_max_tokens, max_tokens_limit)
    if not _is_int(limit) or not 1 <= limit <= max_tokens_limit:
        raise _bad(f"{param} must be an integer from 1 to {max_tokens_limit}, got {limit!r}"[:200], param)
    logprobs = _flag(body, "logprobs")
    top = body.get("top_logprobs")
    if top is not None and (not _is_int(top) or top != 0):
        raise _bad(f"top_logprobs={top!r} is not supported: only 0 (the chosen token's log-prob)"[:200], "top_logprobs")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not 0 <= seed < 2**63):
        raise _bad("seed must be an integer in [0, 2**63)", "seed")
    _check_unsupported(body)
    return ChatRequest(
        model=model,
        messages=messages,
        choices=_choices(body),
        temperature=float(temperature),
        greedy=temperature == 0,
        max_tokens=int(limit),
        logprobs=logprobs,
        return_token_ids=_flag(body, "return_token_ids"),
        tokens_as_ids=_flag(body, "return_tokens_as_token_ids"),
        seed=seed,
    )


def chat_response(
    request: ChatRequest, generation: Generation, *, model: str, decode: Callable[[list[int]], str]
) -> dict[str, Any]:
    """The ``chat.completion`` object answering ``request`` with ``generation`` (see the module
    doc); ``model`` is the name answered under, ``decode`` turns token ids into text."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": generation.text, "tool_calls": []},
        "logprobs": None,
        "finish_reason": generation.finish_reason,
        "stop_reason": None,
    }
    if request.logprobs:
        entries = []
        for token_id, logprob in zip(generation.token_ids, generation.logprobs):
            token = f"token_id:{token_id}" if request.tokens_as_ids else decode([token_id])
            entries.append(
                {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")), "top_logprobs": []}
            )
        choice["logprobs"] = {"content": entries}
    if request.return_token_ids:
        choice["token_ids"] = list(generation.token_ids)
    prompt, completion = len(generation.prompt_ids), len(generation.token_ids)
    answer: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        "system_fingerprint": generation.version,
        "agent_rl_policy_version": generation.version,
    }
    if request.return_token_ids:
        answer["prompt_token_ids"] = list(generation.prompt_ids)
    return answer
