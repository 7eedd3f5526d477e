"""The HTTP side of the policy server (:mod:`.server`): the threaded ``http.server`` with its
connection cap, and the request handler that checks each request (Host/Origin, API key,
Content-Type, Content-Length, body size, JSON) before handing it to the
:class:`~agent_rl_plugin.policy.server.PolicyServer` that owns it.

Contract: every answer is JSON (or vLLM's ``Success: ...`` text for the adapter endpoints); every
refusal is an :class:`~agent_rl_plugin.policy.protocol.ApiError` turned into OpenAI's error shape;
any other exception is a **500** with a fixed message, logged with its traceback on the
``agent_rl_plugin.policy`` logger and never sent to the client. A refusal sent before the body
was read closes the connection (the unread body would be taken for the next request).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_rl_plugin.policy.client import VERSION_HEADER
from agent_rl_plugin.policy.protocol import ApiError, error_body, parse_chat_request
from agent_rl_plugin.receiver.bounded import BoundedHTTPServer, busy_response
from agent_rl_plugin.receiver.guard import content_length, is_media_type

if TYPE_CHECKING:
    from agent_rl_plugin.policy.server import PolicyServer

__all__ = ["check_name", "inside_root", "serve_http"]

logger = logging.getLogger("agent_rl_plugin.policy")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/-]{0,127}")
_BUSY_BODY = json.dumps(error_body(503, "too many connections: retry later")).encode()
_BUSY = busy_response(_BUSY_BODY)
_INTERNAL = "internal error while answering; the server's log has the details"


class _Server(BoundedHTTPServer):
    def __init__(self, address: tuple[str, int], owner: PolicyServer) -> None:
        self.owner = owner
        super().__init__(address, _Handler, max_connections=owner.max_connections, busy=_BUSY, logger=logger)

    def unexpected_error(self, request: Any, client_address: Any) -> None:
        logger.exception("policy server: error on the connection from %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = 120  # an idle keep-alive connection is closed after two minutes
    disable_nagle_algorithm = True
    _consumed = True  # whether the request body (if any) has been read off the connection

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
        logger.debug("%s " + format, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line or header, an unsupported
        method) in OpenAI's error shape, closing the connection."""
        self.close_connection = True
        body = json.dumps(error_body(code, message or explain or "bad request")).encode()
        self.send_response(code, message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(body)

    # --- responses ------------------------------------------------------------------------
    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(data).encode("utf-8"), "application/json", headers)

    def _error(self, exc: ApiError) -> None:
        if not self._consumed:
            self.close_connection = True  # an unread body would be taken for the next request
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        self._json(exc.status, error_body(exc.status, exc.describe(), exc.param), headers)

    def _run(self, work: Callable[[], None]) -> None:
        """Run one endpoint: its :class:`ApiError` becomes the error answer, anything else a 500
        without details (logged here)."""
        self._consumed = self.command != "POST"
        if self.command != "POST" and (
            self.headers.get("Transfer-Encoding") or (self.headers.get("Content-Length") or "0").strip() != "0"
        ):
            # a body on a GET is never read: it would be parsed as the next request (smuggling)
            self.close_connection = True
        try:
            work()
        except ApiError as exc:
            self._error(exc)
        except ConnectionError:
            raise  # the client went away: nothing to answer (the server logs it at debug level)
        except Exception:
            logger.exception("policy server: %s %s failed", self.command, self.path)
            self._error(ApiError(500, _INTERNAL))

    # --- checks ---------------------------------------------------------------------------
    def _authorize(self) -> None:
        owner = self.server.owner
        refusal = owner.host_policy.refusal(self.headers)
        if refusal is not None:
            raise ApiError(403, refusal)
        if owner.api_key is None:
            return
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), owner.api_key.encode()):
            raise ApiError(401, "missing or wrong API key", hint="send the header 'Authorization: Bearer <api key>'")

    def _read_json(self) -> Any:
        if not is_media_type(self.headers.get("Content-Type"), ("application/json",)):
            raise ApiError(415, "the body must be JSON (Content-Type: application/json)")
        raw = self.headers.get("Content-Length")
        if raw is None or self.headers.get("Transfer-Encoding") is not None:
            raise ApiError(411, "a Content-Length header is required (no Transfer-Encoding)")
        length = content_length(raw)
        if length is None:
            raise ApiError(400, f"bad Content-Length {raw!r}"[:200])
        limit = self.server.owner.max_body_bytes
        if length > limit:
            raise ApiError(413, f"the body has {length} bytes; this server takes at most {limit}")
        body = self.rfile.read(length)
        self._consumed = True
        if len(body) != length:
            self.close_connection = True
            raise ApiError(400, "the body ended before Content-Length bytes")
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the body is not valid JSON: {exc}"[:300]) from None

    # --- routes ---------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._run(lambda: self._json(200, {"status": "ok"}))
        elif path == "/v1/models":
            self._run(self._models)
        elif path in _POST_ROUTES:
            self._run(lambda: _raise(ApiError(405, f"use POST for {path}")))
        else:
            self._run(lambda: _raise(ApiError(404, f"no such path {path}"[:300])))

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        route = _POST_ROUTES.get(path)
        if route is not None:
            self._run(lambda: route(self))
        elif path in ("/health", "/v1/models"):
            self._run(lambda: _raise(ApiError(405, f"use GET for {path}")))
        else:
            self._run(lambda: _raise(ApiError(404, f"no such path {path}"[:300])))

    def _models(self) -> None:
        self._authorize()
        self._json(200, self.server.owner.models())

    def _chat(self) -> None:
        self._authorize()
        body = self._read_json()
        owner = self.server.owner
        request = parse_chat_request(
            body, max_tokens_limit=owner.max_tokens_limit, default_max_tokens=owner.default_max_tokens
        )
        self._json(200, owner.complete(request))

    def _load(self) -> None:
        self._authorize()
        owner = self.server.owner
        root = owner.runtime_root()
        body = self._read_json()
        if not isinstance(body, dict):
            raise ApiError(400, 'expected {"lora_name": "...", "lora_path": "..."}')
        name, given = body.get("lora_name"), body.get("lora_path")
        if not isinstance(given, str) or not given:
            raise ApiError(400, "lora_path must be a non-empty string", "lora_path")
        inplace = body.get("load_inplace", False)
        if not isinstance(inplace, bool):
            raise ApiError(400, "load_inplace must be true or false", "load_inplace")
        name = check_name(name, owner.model_name)
        if name == owner.adapter_name and not inplace:
            raise ApiError(
                400,
                f"The lora adapter '{name}' has already been loaded",
                "lora_name",
                hint="set load_inplace to true to replace its weights",
            )
        version = owner.load_adapter(name, inside_root(root, given))
        self._send(
            200,
            f"Success: LoRA adapter '{name}' added successfully.".encode(),
            "text/plain; charset=utf-8",
            {VERSION_HEADER: version},
        )

    def _unload(self) -> None:
        self._authorize()
        owner = self.server.owner
        owner.runtime_root()
        body = self._read_json()
        name = body.get("lora_name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, "lora_name must be a non-empty string", "lora_name")
        version = owner.unload_adapter(name)
        self._send(
            200,
            f"Success: LoRA adapter '{name}' removed successfully.".encode(),
            "text/plain; charset=utf-8",
            {VERSION_HEADER: version},
        )


_POST_ROUTES: dict[str, Callable[[_Handler], None]] = {
    "/v1/chat/completions": _Handler._chat,
    "/v1/load_lora_adapter": _Handler._load,
    "/v1/unload_lora_adapter": _Handler._unload,
}


def _raise(exc: ApiError) -> None:
    raise exc


def check_name(name: Any, base: str) -> str:
    """``name`` when it may name an adapter (see the load endpoint), else a 400."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ApiError(
            400,
            "lora_name must be 1-128 characters: letters, digits and ._:@+/- (starting with a letter or digit)",
            "lora_name",
        )
    if name == base:
        raise ApiError(400, f"lora_name {name!r} is the base model's name: pick another", "lora_name")
    return name


def inside_root(root: Path, given: str) -> str:
    """``given`` (relative to ``root`` unless absolute) resolved, symlinks followed; 403 unless
    the result is ``root`` or below it."""
    try:
        resolved = Path(os.path.realpath(root / given))
    except (OSError, ValueError) as exc:
        raise ApiError(400, f"bad lora_path: {exc}"[:300], "lora_path") from None
    if resolved != root and root not in resolved.parents:
        raise ApiError(
            403,
            f"lora_path {given!r} is outside the adapter root"[:300],
            "lora_path",
            hint="save adapters under the folder the server was started with (--adapter-root)",
        )
    return str(resolved)


def serve_http(host: str, port: int, owner: PolicyServer) -> ThreadingHTTPServer:
    """A bound (not yet serving) HTTP server answering for ``owner``."""
    return _Server((host, port), owner)
