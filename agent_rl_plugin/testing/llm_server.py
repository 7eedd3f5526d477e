"""A scripted LLM server on 127.0.0.1 that speaks the OpenAI (chat completions, responses) and
Anthropic (messages) HTTP APIs, streaming included: test an agent that uses the real SDKs with
no network and no API key.

    with ScriptedLLMServer(["Paris.", Reply(tool_calls=[("search", {"q": "x"})])]) as server:
        client = openai.OpenAI(base_url=server.openai_url, api_key="test")
        client.chat.completions.create(model="m", messages=[...])   # -> "Paris."

Contract:

* Replies are served in order, one per request, whatever the endpoint; when they run out the
  last one repeats. Each request body is kept in :attr:`ScriptedLLMServer.requests`.
* A :class:`Reply` may carry ``token_ids``, ``logprobs`` and ``prompt_token_ids``. Chat
  completions return them as vLLM does: ``choices[i].token_ids`` and ``prompt_token_ids`` when
  the request asks ``return_token_ids`` (also per streamed chunk), and
  ``choices[i].logprobs.content`` when it asks ``logprobs``. Without them, a reply's tokens are
  its whitespace-separated words (ids are their positions), so usage counts are exact.
* ``stream: true`` answers with server-sent events in each API's own event format.
* Only 127.0.0.1; :meth:`close` (or leaving the ``with`` block) stops it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Iterator, Sequence


@dataclass
class Reply:
    """One scripted answer: text and/or tool calls ``(name, arguments)``, and optional tokens."""

    text: str = ""
    tool_calls: Sequence[tuple[str, dict[str, Any]]] = ()
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_token_ids: list[int] | None = None
    finish_reason: str | None = None
    model: str = "scripted-1"
    pieces: list[str] = field(default_factory=list)
    #: Chat completions answer with this many identical choices (indexes 0..n-1), whatever the
    #: request's ``n``: a misbehaving server, for tests.
    copies: int = 1

    def tokens(self) -> list[str]:
        """The reply's text cut into stream pieces (words with their spaces)."""
        if self.pieces:
            return list(self.pieces)
        words = self.text.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)] if self.text else []

    def ids(self) -> list[int]:
        return list(self.token_ids) if self.token_ids is not None else list(range(len(self.tokens())))

    def lps(self) -> list[float]:
        return list(self.logprobs) if self.logprobs is not None else [-0.5] * len(self.ids())


def _as_reply(value: str | Reply) -> Reply:
    return value if isinstance(value, Reply) else Reply(text=value)


def _words(messages: Any) -> int:
    return max(1, len(json.dumps(messages).split()))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        owner = self.server.owner
        reply = owner.next_reply(self.path, body)
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            events = _chat_events(reply, body) if body.get("stream") else None
            self._answer(events, lambda: _chat_body(reply, body), openai_done=True)
        elif path.endswith("/responses"):
            events = _responses_events(reply, body) if body.get("stream") else None
            self._answer(events, lambda: _response_body(reply, body))
        elif path.endswith("/messages"):
            events = _anthropic_events(reply, body) if body.get("stream") else None
            self._answer(events, lambda: _message_body(reply, body))
        else:
            self._json(404, {"error": {"message": f"no endpoint {self.path}"}})

    def _answer(
        self, events: Iterable[tuple[str | None, dict[str, Any]]] | None, whole: Any, openai_done: bool = False
    ) -> None:
        if events is None:
            self._json(200, whole())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            self.wfile.write(f"{prefix}data: {json.dumps(data)}\n\n".encode())
        if openai_done:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedLLMServer


class ScriptedLLMServer:
    """See the module docstring."""

    def __init__(self, replies: Sequence[str | Reply]) -> None:
        if not replies:
            raise ValueError("ScriptedLLMServer needs at least one reply")
        self.replies = [_as_reply(r) for r in replies]
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Anthropic's SDK ``base_url``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (OpenAI's SDK ``base_url``, LiteLLM's ``api_base``)."""
        return self.base_url + "/v1"

    def next_reply(self, path: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append({"path": path, **body})
            index = min(len(self.requests) - 1, len(self.replies) - 1)
            return self.replies[index]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedLLMServer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


# --- OpenAI chat completions ---------------------------------------------------------------------
def _openai_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(reply.tool_calls)
    ]


def _logprobs_content(reply: Reply) -> list[dict[str, Any]]:
    pieces = reply.tokens() or [""] * len(reply.ids())
    return [
        {"token": piece, "logprob": lp, "bytes": None, "top_logprobs": []} for piece, lp in zip(pieces, reply.lps())
    ]


def _chat_body(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _openai_calls(reply)
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
        "logprobs": {"content": _logprobs_content(reply)} if body.get("logprobs") else None,
    }
    answer: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": reply.model,
        "choices": [{**choice, "index": i} for i in range(reply.copies)],
        "usage": {
            "prompt_tokens": _words(body.get("messages")),
            "completion_tokens": len(reply.ids()),
            "total_tokens": _words(body.get("messages")) + len(reply.ids()),
        },
    }
    if body.get("return_token_ids"):
        for each in answer["choices"]:
            each["token_ids"] = reply.ids()
        answer["prompt_token_ids"] = reply.prompt_token_ids or list(range(_words(body.get("messages"))))
    return answer


def _chat_events(reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    def chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": None, **extra}
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": reply.model,
            "choices": [choice],
        }

    first = chunk({"role": "assistant", "content": ""})
    if body.get("return_token_ids"):
        first["prompt_token_ids"] = reply.prompt_token_ids or list(range(_words(body.get("messages"))))
    yield None, first
    ids, lps = reply.ids(), reply.lps()
    for i, piece in enumerate(reply.tokens()):
        extra: dict[str, Any] = {}
        if body.get("return_token_ids") and i < len(ids):
            extra["token_ids"] = [ids[i]]
        if body.get("logprobs") and i < len(lps):
            extra["logprobs"] = {"content": [{"token": piece, "logprob": lps[i], "bytes": None, "top_logprobs": []}]}
        yield None, chunk({"content": piece}, **extra)
    for i, call in enumerate(_openai_calls(reply)):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        yield (
            None,
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
                        }
                    ]
                }
            ),
        )
        yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments[half:]}}]})
    last = chunk({})
    last["choices"][0]["finish_reason"] = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    yield None, last
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = _chat_body(reply, body)["usage"]
        yield (
            None,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": reply.model,
                "choices": [],
                "usage": usage,
            },
        )


# --- OpenAI responses ----------------------------------------------------------------------------
def _response_body(reply: Reply, body: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text:
        output.append(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, (name, args) in enumerate(reply.tool_calls):
        output.append(
            {
                "id": f"fc_{i}",
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    prompt = _words(body.get("input"))
    return {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "output_tokens": len(reply.ids()),
            "total_tokens": prompt + len(reply.ids()),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _responses_events(reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    created = _response_body(reply, body, status="in_progress") | {"output": []}
    yield "response.created", {"type": "response.created", "sequence_number": 0, "response": created}
    for n, piece in enumerate(reply.tokens(), start=1):
        yield (
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "sequence_number": n,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            },
        )
    done = _response_body(reply, body)
    yield "response.completed", {"type": "response.completed", "sequence_number": 999, "response": done}


# --- Anthropic messages --------------------------------------------------------------------------
def _anthropic_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(reply.tool_calls)
    ]
    return blocks


def _message_body(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _anthropic_blocks(reply),
        "stop_reason": reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": _words(body.get("messages")), "output_tokens": len(reply.ids())},
    }


def _anthropic_events(reply: Reply, body: dict[str, Any]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    start = _message_body(reply, body) | {"content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": start["usage"]["input_tokens"], "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    index = 0
    if reply.text:
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        for piece in reply.tokens():
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for i, (name, args) in enumerate(reply.tool_calls):
        text = json.dumps(args)
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index + i,
                "content_block": {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}},
            },
        )
        for part in (text[: len(text) // 2], text[len(text) // 2 :]):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index + i,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index + i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _message_body(reply, body)["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": len(reply.ids())},
        },
    )
    yield "message_stop", {"type": "message_stop"}


__all__ = ["Reply", "ScriptedLLMServer"]
