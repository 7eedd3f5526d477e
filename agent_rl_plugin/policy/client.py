"""A tiny standard-library client of the policy server (:mod:`.server`) or of vLLM's OpenAI
server: a chat answer comes back as a :class:`~agent_rl_plugin.policy.local.Generation`, with the
token ids and log-probs a trainer needs.

    client = PolicyClient("http://127.0.0.1:8000", api_key=None)
    answer = client.chat([{"role": "user", "content": "..."}], choices=["up", "down"])
    answer.text, answer.token_ids, answer.logprobs, answer.version
    client.load_adapter("policy", "runs/round-1/adapter")   # the next answers use it

Contract:

* :meth:`PolicyClient.chat` posts ``/v1/chat/completions`` with ``logprobs: true``,
  ``return_token_ids: true``, ``temperature`` (``0`` when ``greedy``) and, with ``choices``,
  ``structured_outputs: {"choice": [...]}``; the :class:`Generation` holds the answer's text, its
  token ids (``choices[0].token_ids``), their log-probs (``logprobs.content[*].logprob``), the
  prompt's ids (``prompt_token_ids``), the finish reason and the version
  (``agent_rl_policy_version``, else ``system_fingerprint``, else the answering model's name,
  which is what vLLM gives).
* ``model=None`` names no model: the policy server answers with the weights it holds now (vLLM
  needs a model name).
* Every failure raises :class:`PolicyClientError`: ``status`` is the HTTP status (``None`` when
  the server could not be reached) and the message is the server's error message. Proxies from
  the environment are not used (the server is normally on loopback).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from agent_rl_plugin.policy.local import Generation, PolicyError

__all__ = ["PolicyClient", "PolicyClientError"]

VERSION_HEADER = "X-Agent-RL-Policy-Version"


class PolicyClientError(PolicyError):
    """The policy server refused a request or could not be reached; ``status`` is the HTTP
    status, ``None`` when there was no answer."""

    def __init__(self, message: str, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


class PolicyClient:
    """Talk to the server at ``base_url`` (``http://host:port``, with or without ``/v1``);
    ``api_key``: sent as ``Authorization: Bearer``; ``timeout_s``: per request."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = 300.0) -> None:
        url = base_url.rstrip("/")
        self.base_url = url[: -len("/v1")] if url.endswith("/v1") else url
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _request(self, method: str, path: str, body: Any = None) -> tuple[bytes, Mapping[str, str]]:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return response.read(), response.headers
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode("utf-8", "replace")[:500] or exc.reason
            raise PolicyClientError(f"{method} {path}: {exc.code} {message}", status=exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PolicyClientError(
                f"no policy server answers at {self.base_url} ({reason})",
                hint="start one with `agent-rl policy serve --model PATH` and pass the URL it prints",
            ) from None

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        choices: Sequence[str] | None = None,
        temperature: float = 1.0,
        greedy: bool = False,
        max_tokens: int = 32,
        model: str | None = None,
    ) -> Generation:
        """One answer to ``messages`` (see the module doc); raises :class:`PolicyClientError`."""
        if not greedy and not temperature > 0:
            raise PolicyClientError(f"temperature must be > 0 (or greedy=True), got {temperature!r}")
        body: dict[str, Any] = {
            "messages": list(messages),
            "temperature": 0 if greedy else temperature,
            "max_tokens": max_tokens,
            "logprobs": True,
            "return_token_ids": True,
        }
        if model is not None:
            body["model"] = model
        if choices is not None:
            body["structured_outputs"] = {"choice": list(choices)}
        raw, _ = self._request("POST", "/v1/chat/completions", body)
        try:
            answer = json.loads(raw)
            choice = answer["choices"][0]
            content = choice["logprobs"]["content"] if choice.get("logprobs") else []
            version = answer.get("agent_rl_policy_version") or answer.get("system_fingerprint") or answer["model"]
            return Generation(
                text=choice["message"]["content"] or "",
                token_ids=[int(token) for token in choice["token_ids"]],
                logprobs=[float(entry["logprob"]) for entry in content],
                prompt_ids=[int(token) for token in answer.get("prompt_token_ids") or []],
                finish_reason=str(choice["finish_reason"]),
                version=str(version),
            )
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise PolicyClientError(
                f"the server's answer is not a chat completion with token ids: {type(exc).__name__}: {exc}",
                hint="the server must support return_token_ids (the policy server, or vLLM >= 0.10.2)",
            ) from None

    def load_adapter(self, name: str, path: str) -> str:
        """Serve the adapter saved at ``path`` (on the server's machine, under its adapter root)
        as model ``name``, replacing the loaded one; returns the new policy version (the policy
        server's header; ``name`` from vLLM)."""
        _, headers = self._request(
            "POST", "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path, "load_inplace": True}
        )
        return headers.get(VERSION_HEADER) or name

    def unload_adapter(self, name: str) -> str:
        """Unload the adapter ``name``; returns the new version (``"base"`` from the policy server)."""
        _, headers = self._request("POST", "/v1/unload_lora_adapter", {"lora_name": name})
        return headers.get(VERSION_HEADER) or "base"

    def models(self) -> list[dict[str, Any]]:
        """The ``data`` of ``GET /v1/models``: the base model and the loaded adapter."""
        raw, _ = self._request("GET", "/v1/models")
        try:
            return list(json.loads(raw)["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise PolicyClientError(f"the server's model list is malformed: {exc}") from None


class RemotePolicy:
    """A policy server used where a :class:`~agent_rl_plugin.policy.LocalPolicy` is expected
    (``train_loop(config, policy=RemotePolicy(client))``): :meth:`generate` answers through the
    server, :meth:`load_adapter` loads a saved adapter under ``adapter_name`` (the path must be
    readable by the server, under its ``--adapter-root``) and routes later calls to it.
    ``version`` is the version the server reports."""

    def __init__(self, client: PolicyClient, *, adapter_name: str = "policy", max_tokens: int = 32) -> None:
        self.client = client
        self.adapter_name = adapter_name
        self.max_tokens = max_tokens
        self.version = "base"
        self._model: str | None = None

    def generate(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        choices: Sequence[str] | None = None,
        temperature: float = 1.0,
        greedy: bool = False,
    ) -> Generation:
        return self.client.chat(
            messages, choices, temperature=temperature, greedy=greedy, max_tokens=self.max_tokens, model=self._model
        )

    def load_adapter(self, path: str | None) -> str:
        if path is None:
            self.version = self.client.unload_adapter(self.adapter_name)
            self._model = None
        else:
            # absolute: a relative path would be resolved under the server's adapter root, where
            # a stale adapter of the same name could load without an error
            self.version = self.client.load_adapter(self.adapter_name, os.path.abspath(path))
            self._model = self.adapter_name
        return self.version
