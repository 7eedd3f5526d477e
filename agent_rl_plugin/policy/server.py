"""An OpenAI-compatible chat-completions server over a :class:`~agent_rl_plugin.policy.local.LocalPolicy`,
so an agent calls the policy being trained like any LLM, and the same agent code runs against
vLLM's OpenAI server (``vllm serve BASE --enable-lora``) on a GPU.

    policy = LocalPolicy("path/to/model")
    with PolicyServer(policy, adapter_root="runs/") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        client.chat.completions.create(model=server.model_name, messages=[...], logprobs=True,
                                       extra_body={"structured_outputs": {"choice": ["up", "down"]}})

Endpoints (``http.server.ThreadingHTTPServer``: one thread per connection, at most
``max_connections`` at once, more get **503**; the policy answers one request at a time):

* ``POST /v1/chat/completions``: see :mod:`.protocol` for the fields. ``model`` names the base
  model (:attr:`PolicyServer.model_name`) or the loaded adapter; no ``model``: whatever weights the
  server holds now. Answers carry ``agent_rl_policy_version`` (and ``system_fingerprint``): the
  policy version that produced them. **404** for an unknown model; **409** for the base model
  while an adapter is loaded (one set of weights at a time: unload it first), or when the weights
  changed during the request (retry).
* ``GET /v1/models``: the base model and the loaded adapter (``parent``: the base), as vLLM lists them.
* ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path", "load_inplace"}`` (vLLM's runtime
  LoRA endpoint): the adapter at ``lora_path`` (relative paths are under the adapter root) is
  served under ``lora_name`` from the next request on; it replaces the adapter loaded before (one
  at a time). Loading a name that is already loaded needs ``load_inplace: true`` (vLLM's rule;
  the loop's new round). Answers ``Success: ...`` (text) and the new version in the
  ``X-Agent-RL-Policy-Version`` header. ``POST /v1/unload_lora_adapter`` ``{"lora_name"}``: back
  to the base model (**404** for a name that is not loaded).
* ``GET /health``: 200 (no key needed).

Security (fail closed): binds ``127.0.0.1`` by default; a host beyond loopback is refused
(:class:`PolicyServerConfigError`) unless an ``api_key`` is set. With an ``api_key`` every request
but ``/health`` needs ``Authorization: Bearer KEY`` (compared in constant time; **401**). Host and
Origin headers that show a web page sent the request get **403** (DNS rebinding, cross-site posts:
:class:`~agent_rl_plugin.receiver.guard.HostPolicy`). Runtime adapter loading is off without
``adapter_root`` (**403** with a hint); with it, ``lora_path`` must resolve (symlinks followed)
inside the root (**403** otherwise). POST bodies must be ``application/json`` (**415**) with a
plain ``Content-Length`` (**411**) of at most ``max_body_bytes`` (**413**, read no further). Every
error is OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``; an unexpected failure
is **500** with a fixed message (the traceback goes to the ``agent_rl_plugin.policy`` logger,
never to the client), and the server keeps serving.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.policy.client import VERSION_HEADER
from agent_rl_plugin.policy.handler import check_name, serve_http
from agent_rl_plugin.policy.local import LocalPolicy
from agent_rl_plugin.policy.protocol import ApiError, ChatRequest, chat_response
from agent_rl_plugin.receiver.client import is_loopback
from agent_rl_plugin.receiver.guard import HostPolicy
from agent_rl_plugin.store.announcements import base_url

__all__ = ["PolicyServer", "PolicyServerConfigError", "VERSION_HEADER"]

logger = logging.getLogger("agent_rl_plugin.policy")

DEFAULT_MAX_BODY = 8 << 20


class PolicyServerConfigError(AgentRLError, ValueError):
    """The policy server cannot start as configured (a public host without a key, a missing
    adapter root); the message names the fix."""


class PolicyServer:
    """Serve ``policy`` over OpenAI's chat-completions API (see the module doc).

    ``host``/``port``: where to listen (port 0 picks a free one: :attr:`port`, :attr:`url`);
    ``api_key``: the bearer key required on every request but ``/health`` (``None``/``""``: none,
    loopback only); ``adapter_root``: the folder runtime adapter loads must come from (``None``:
    runtime loading refused); ``model_name``: the base model's name in requests and
    ``/v1/models`` (default: the policy's ``model_name``, as vLLM names it after ``--model``);
    ``adapter_name``: the name of the adapter the policy already holds, if any;
    ``max_tokens_limit``/``default_max_tokens``: the largest and the default ``max_tokens``;
    ``max_context``: prompt plus answer tokens allowed (default: the model's
    ``max_position_embeddings``); ``allowed_hosts``: more Host names to answer (a proxy's).
    Raises :class:`PolicyServerConfigError` for a host beyond loopback without a key or an
    adapter root that is not a folder.
    """

    def __init__(
        self,
        policy: LocalPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        adapter_root: str | os.PathLike[str] | None = None,
        model_name: str | None = None,
        adapter_name: str = "adapter",
        max_body_bytes: int = DEFAULT_MAX_BODY,
        max_tokens_limit: int = 4096,
        default_max_tokens: int = 256,
        max_context: int | None = None,
        max_connections: int = 32,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.policy = policy
        self.host = host
        self._requested_port = port
        self.api_key = api_key or None
        if not is_loopback(host) and self.api_key is None:
            raise PolicyServerConfigError(
                f"refusing to serve the policy on {host!r} (beyond loopback) without an API key: anyone who can "
                "reach the port could use the model and swap its adapter",
                hint="set an API key (agent-rl policy serve --api-key-env VAR), ideally behind a TLS terminator",
            )
        self.adapter_root: Path | None = None
        if adapter_root is not None:
            root = Path(os.path.realpath(adapter_root))
            if not root.is_dir():
                raise PolicyServerConfigError(
                    f"the adapter root {os.fspath(adapter_root)} is not a folder",
                    hint="create it, or give the folder the trainer saves adapters under",
                )
            self.adapter_root = root
        self.model_name = model_name or policy.model_name
        try:
            check_name(adapter_name, self.model_name)
        except ApiError as exc:
            raise PolicyServerConfigError(f"adapter_name {adapter_name!r}: {exc}") from None
        self.max_body_bytes = max_body_bytes
        self.max_tokens_limit = max_tokens_limit
        self.default_max_tokens = default_max_tokens
        self.max_context = max_context if max_context is not None else _context_of(policy)
        self.max_connections = max_connections
        self.host_policy = HostPolicy(host, tuple(allowed_hosts))
        self.created = int(time.time())
        self._state = threading.Lock()
        self._answering = threading.Lock()
        # (name, version) of the adapter the policy holds, or None for the base model.
        self._adapter: tuple[str, str] | None = (
            (adapter_name, policy.version) if policy.adapter_path is not None else None
        )
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port served on (the real one once started with port 0)."""
        return self._requested_port if self._server is None else int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port``; OpenAI clients take ``url + "/v1"`` as their ``base_url``."""
        return base_url(self.host, self.port)

    def start(self) -> PolicyServer:
        """Bind and serve in a background thread; returns self (idempotent)."""
        if self._server is None:
            self._server = serve_http(self.host, self._requested_port, self)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.2},
                name=f"agent-rl policy :{self.port}",
                daemon=True,
            )
            self._thread.start()
            logger.info("agent-rl policy server: %s serving %s", self.url, self.model_name)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent); a request in progress finishes."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- weights --------------------------------------------------------------------------
    @property
    def adapter_name(self) -> str | None:
        """The name the loaded adapter is served under, or ``None`` (the base model)."""
        adapter = self._adapter
        return adapter[0] if adapter else None

    def runtime_root(self) -> Path:
        """The adapter root; raises :class:`~.protocol.ApiError` (403) when runtime loading is off."""
        if self.adapter_root is None:
            raise ApiError(
                403,
                "runtime LoRA loading is disabled on this server",
                hint="start it with --adapter-root DIR (adapter_root=) to allow loading adapters saved under DIR",
            )
        return self.adapter_root

    def load_adapter(self, name: str, path: str | os.PathLike[str]) -> str:
        """Serve the LoRA adapter at ``path`` under ``name`` from the next request on, replacing
        the adapter loaded before; returns the policy's new version. In-process callers (the
        training loop) are trusted: no adapter-root check here. Raises :class:`~.protocol.ApiError`
        (400) when the name is bad or the adapter does not load."""
        check_name(name, self.model_name)
        with self._state:
            try:
                version = self.policy.load_adapter(path)
            except AgentRLError as exc:
                # the policy kept its previous weights, unless it had to unload them first
                self._adapter = self._current_after_failure()
                raise ApiError(400, str(exc), "lora_path", hint=exc.hint) from None
            self._adapter = (name, version)
            return version

    def unload_adapter(self, name: str) -> str:
        """Go back to the base model; ``name`` must be the loaded adapter's (404 otherwise).
        Returns the new version (``"base"``)."""
        with self._state:
            if self._adapter is None or self._adapter[0] != name:
                raise ApiError(404, f"The lora adapter '{name}' cannot be found.", "lora_name")
            version = self.policy.load_adapter(None)
            self._adapter = None
            return version

    def _current_after_failure(self) -> tuple[str, str] | None:
        if self._adapter is not None and self.policy.version == self._adapter[1]:
            return self._adapter
        return None

    def models(self) -> dict[str, Any]:
        """The ``/v1/models`` answer: the base model, then the loaded adapter (if any)."""
        adapter = self._adapter
        base: dict[str, Any] = {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "agent-rl",
            "root": self.policy.model_name,
            "parent": None,
            "max_model_len": self.max_context,
            "agent_rl_policy_version": "base",
        }
        data = [base]
        if adapter is not None:
            data.append(
                {
                    **base,
                    "id": adapter[0],
                    "root": self.policy.adapter_path,
                    "parent": self.model_name,
                    "agent_rl_policy_version": adapter[1],
                }
            )
        return {"object": "list", "data": data}

    # --- answering ------------------------------------------------------------------------
    def _expected(self, model: str | None) -> tuple[str, str]:
        """(name answered under, policy version that must answer) for the requested ``model``."""
        adapter = self._adapter
        if model is None:
            return adapter if adapter is not None else (self.model_name, "base")
        if adapter is not None and model == adapter[0]:
            return adapter
        if model == self.model_name:
            if adapter is not None:
                raise ApiError(
                    409,
                    f"the base model is not served while the adapter '{adapter[0]}' is loaded "
                    "(this server holds one set of weights at a time)",
                    "model",
                    hint=f"ask for model '{adapter[0]}', or POST /v1/unload_lora_adapter first",
                )
            return self.model_name, "base"
        raise ApiError(404, f"The model `{model}` does not exist."[:300], "model")

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        """Answer a checked chat request (the ``chat.completion`` object); raises
        :class:`~.protocol.ApiError` for requests the policy cannot answer."""
        name, version = self._expected(request.model)
        try:
            # one request at a time: a seed and the answer it seeds stay together, and the
            # tokenizer (not safe to share between threads) is used by one request only
            with self._answering:
                prompt = self.policy.prompt_ids(request.messages)
                if self.max_context is not None and len(prompt) + request.max_tokens > self.max_context:
                    raise ApiError(
                        400,
                        f"the prompt ({len(prompt)} tokens) plus max_tokens ({request.max_tokens}) exceeds "
                        f"the model's context of {self.max_context} tokens",
                        "max_tokens",
                    )
                if request.seed is not None:
                    self.policy.reseed(request.seed)
                generation = self.policy.generate(
                    request.messages,
                    choices=request.choices,
                    temperature=request.temperature if not request.greedy else 1.0,
                    greedy=request.greedy,
                    max_new_tokens=request.max_tokens,
                )
        except AgentRLError as exc:
            if isinstance(exc, ApiError):
                raise
            raise ApiError(400, str(exc), hint=exc.hint) from None
        except Exception as exc:
            if _is_template_error(exc):
                raise ApiError(400, f"the chat template cannot render these messages: {exc}"[:300]) from None
            raise
        if generation.version != version:
            raise ApiError(
                409,
                f"model '{name}' is version {version}, but the policy answered with {generation.version}: "
                "the weights changed during the request",
                hint="retry; change adapters through the server (POST /v1/load_lora_adapter or "
                "PolicyServer.load_adapter), not on the policy directly",
            )
        return chat_response(request, generation, model=name, decode=self._decode)

    def _decode(self, token_ids: list[int]) -> str:
        return str(self.policy.tokenizer.decode(token_ids))


def _is_template_error(exc: Exception) -> bool:
    try:
        from jinja2 import TemplateError
    except ImportError:  # pragma: no cover - transformers depends on jinja2
        return False
    return isinstance(exc, TemplateError)


def _context_of(policy: LocalPolicy) -> int | None:
    """The model's ``max_position_embeddings`` from its config, or ``None`` when unknown."""
    try:
        from agent_rl_plugin.train.loading import load_model_config

        config = load_model_config(policy.model_name, allow_download=getattr(policy, "allow_download", None))
        value = getattr(config, "max_position_embeddings", None)
    except Exception:  # an unreadable config only loses the length check
        return None
    return int(value) if isinstance(value, int) else None
