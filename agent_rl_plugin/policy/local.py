"""A local policy: a causal LM (transformers) plus an optional LoRA adapter (PEFT) that answers
chat messages with the token ids and behaviour log-probs a trainer needs, and takes a new
adapter without a restart.

    policy = LocalPolicy("path/to/model")
    answer = policy.generate([{"role": "user", "content": "..."}], choices=["up", "down"])
    answer.text, answer.token_ids, answer.logprobs      # "up", [ids], [log-probs]
    policy.load_adapter("run/round-1/adapter")          # the next call uses the new weights

Contract:

* The prompt is ``tokenizer.apply_chat_template(messages, add_generation_prompt=True)``; the
  answer is the tokens generated after it, up to and including the end-of-sequence token.
* ``logprobs[i]`` is the log-prob of ``token_ids[i]`` at **temperature 1** (the number the
  offline trainer computes for the importance ratio, whatever temperature sampled it). With
  ``choices`` it is the constrained log-prob of :mod:`agent_rl_plugin.train.choices` (softmax over
  the allowed tokens; 0.0 on forced tokens), exactly what the trainer computes with the same
  ``choices``.
* ``greedy`` takes the most likely (allowed) token; otherwise tokens are sampled at
  ``temperature`` with the policy's own ``torch.Generator`` (``seed``), so a run is repeatable.
* ``version`` names the weights: ``"base"``, then the adapter's directory name and a counter
  (``"round-3/adapter#3"``); every :class:`Generation` carries the version that produced it.
* Calls are serialised by a lock (safe from many threads; one forward pass at a time), and
  :meth:`load_adapter` waits for the call in progress.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.train.choices import ChoiceSet

__all__ = ["CHOICE_SETS_KEPT", "Generation", "LocalPolicy", "PolicyError"]

_CACHE_ARGUMENT = ""  # set on first use (importing this module does not import transformers)

#: How many distinct choice sets a policy keeps tokenised (least recently used dropped first).
CHOICE_SETS_KEPT = 64


class PolicyError(AgentRLError, ValueError):
    """The policy cannot answer: bad messages or settings, or an adapter that does not load."""


@dataclass(frozen=True)
class Generation:
    """One answer: its ``text`` (special tokens removed), the generated ``token_ids`` (end
    token included when generated), their temperature-1 ``logprobs``, the ``prompt_ids``,
    ``finish_reason`` (``"stop"``: the end token; ``"length"``: ``max_new_tokens`` reached) and
    the policy ``version`` that produced it."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_ids: list[int] = field(repr=False)
    finish_reason: str
    version: str


def _cache_argument() -> str:
    """The name transformers gives the key/value cache (``cache`` from 5.x, ``past_key_values`` before)."""
    import transformers

    return "cache" if int(transformers.__version__.split(".")[0]) >= 5 else "past_key_values"


#: LoraConfig fields that do not change what an adapter computes.
_IRRELEVANT_LORA_FIELDS = ("inference_mode", "base_model_name_or_path", "revision", "task_type")


def _same_lora(live: Any, new: Any) -> bool:
    """Whether two LoRA configs compute the same function given the same weights (rank, alpha,
    patterns, rsLoRA, targets, dropout ...: every field but the bookkeeping ones)."""

    def settings(config: Any) -> dict[str, Any]:
        data = config.to_dict()
        for name in _IRRELEVANT_LORA_FIELDS:
            data.pop(name, None)
        if isinstance(data.get("target_modules"), (list, set, tuple)):
            data["target_modules"] = sorted(data["target_modules"])
        return data

    return settings(live) == settings(new)


def _key(name: str) -> str:
    """A LoRA weight's name with the adapter name and PEFT's prefix removed, so the names in a
    saved file and in the live model compare."""
    name = name.replace(".policy.", ".").replace("base_model.model.", "", 1)
    return name


class LocalPolicy:
    """``model``: a local directory or a cached hub name (loaded offline unless
    ``allow_download`` or ``AGENT_RL_ALLOW_DOWNLOAD=1``, see :mod:`agent_rl_plugin.train.loading`);
    ``adapter``: a LoRA adapter directory to start from; ``seed``: the sampling generator's
    seed; ``threads``: torch threads (``None``: leave)."""

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        adapter: str | os.PathLike[str] | None = None,
        seed: int = 0,
        threads: int | None = None,
        allow_download: bool | None = None,
    ) -> None:
        from agent_rl_plugin.train.loading import ModelNotFoundError, load_causal_lm, load_tokenizer, resolve_model

        self.model_name = os.fspath(model)
        self.allow_download = allow_download
        try:
            resolve_model(self.model_name, allow_download=allow_download)  # before torch loads: fails at once
        except ModelNotFoundError as exc:
            raise PolicyError(f"cannot load model {self.model_name!r}: {exc}", hint=exc.hint) from None
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        try:
            self.tokenizer = load_tokenizer(self.model_name, allow_download=allow_download, pad=False)
            self._base = load_causal_lm(self.model_name, allow_download=allow_download)
        except (OSError, ValueError) as exc:
            raise PolicyError(
                f"cannot load model {self.model_name!r}: {exc}",
                hint=getattr(exc, "hint", None)
                or "give a local model directory (build one with agent_rl_plugin.train.tiny.build_tiny_model)",
            ) from None
        if self.tokenizer.eos_token_id is None:
            raise PolicyError(f"the tokenizer of {self.model_name!r} has no end-of-sequence token")
        self._base.eval()
        self._model: Any = self._base
        self._lock = threading.Lock()
        self._generator = torch.Generator().manual_seed(seed)
        self._choice_sets: dict[tuple[str, ...], ChoiceSet] = {}
        self._loads = 0
        self.adapter_path: str | None = None
        self.version = "base"
        if adapter is not None:
            self.load_adapter(adapter)

    def reseed(self, seed: int) -> None:
        """Restart the sampling generator from ``seed`` (a loop reseeds every round)."""
        self._generator.manual_seed(seed)

    # -- weights -------------------------------------------------------------------------------
    def load_adapter(self, path: str | os.PathLike[str] | None) -> str:
        """Answer with the LoRA adapter saved at ``path`` from the next call on (``None``: the
        base model); returns the new :attr:`version`. The base weights are never changed: a new
        adapter replaces the previous one. Raises :class:`PolicyError` when it does not load (the
        policy is then the base model, ``version`` ``"base"``)."""
        with self._lock:
            if path is None:
                if self._model is not self._base:
                    self._base = self._model.unload()
                self._model, self.adapter_path, self.version = self._base, None, "base"
                return self.version
            where = os.fspath(path)
            if not Path(where, "adapter_config.json").is_file():
                raise PolicyError(
                    f"no LoRA adapter at {where} (no adapter_config.json)",
                    hint="give the <output_dir>/adapter directory a training run saved",
                )
            try:
                self._swap(where)
            except Exception as exc:  # PEFT raises many kinds for a bad adapter: all fail closed
                # never half-swapped: back to the base model, and the version says so
                if self._model is not self._base and hasattr(self._model, "unload"):
                    self._base = self._model.unload()
                self._model, self.adapter_path, self.version = self._base, None, "base"
                raise PolicyError(
                    f"cannot load the adapter at {where}: {exc}",
                    hint="the policy is back on the base model; load a valid adapter",
                ) from None
            self._model.eval()
            self._loads += 1
            self.adapter_path = where
            self.version = f"{Path(where).parent.name}/{Path(where).name}#{self._loads}"
            return self.version

    def _swap(self, where: str) -> None:
        """Load the adapter at ``where``: into the live adapter's weights when it has the same
        shape (no new modules), else onto the base model afresh."""
        from peft import LoraConfig, PeftModel
        from peft.utils import set_peft_model_state_dict
        from safetensors.torch import load_file

        if self._model is not self._base:
            live = self._model.peft_config["policy"]
            new = LoraConfig.from_pretrained(where)
            weights = Path(where, "adapter_model.safetensors")
            if _same_lora(live, new) and weights.is_file():
                incoming = load_file(str(weights))
                expected = {_key(name) for name in self._model.state_dict() if "lora_" in name}
                if {_key(name) for name in incoming} == expected:  # every LoRA weight replaced, none extra
                    set_peft_model_state_dict(self._model, incoming, adapter_name="policy")
                    return
            self._base = self._model.unload()
        self._model = PeftModel.from_pretrained(self._base, where, adapter_name="policy")

    # -- answering -----------------------------------------------------------------------------
    def choice_set(self, choices: Sequence[str]) -> ChoiceSet:
        """The (cached) :class:`~agent_rl_plugin.train.choices.ChoiceSet` of ``choices``."""
        key = tuple(choices)
        found = self._choice_sets.pop(key, None) or ChoiceSet(self.tokenizer, key)
        self._choice_sets[key] = found  # most recently used last
        while len(self._choice_sets) > CHOICE_SETS_KEPT:
            del self._choice_sets[next(iter(self._choice_sets))]
        return found

    def prompt_ids(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """The token ids of ``messages`` rendered with the chat template and a generation prompt."""
        if isinstance(messages, str) or not messages:
            raise PolicyError("messages must be a non-empty list of chat messages")
        conversation: Any = [dict(message) for message in messages]
        rendered = self.tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
        return list(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def generate(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        choices: Sequence[str] | None = None,
        temperature: float = 1.0,
        greedy: bool = False,
        max_new_tokens: int = 32,
    ) -> Generation:
        """Answer ``messages`` (see the module doc). ``choices``: the answer must be one of
        these strings (constrained decoding). Raises :class:`PolicyError` for bad settings."""
        if not greedy and not temperature > 0:
            raise PolicyError(f"temperature must be > 0 (or greedy=True), got {temperature!r}")
        if max_new_tokens < 1:
            raise PolicyError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}")
        with self._lock:  # the tokenizer is not shared between threads either
            constraint = self.choice_set(choices) if choices is not None else None
            prompt = self.prompt_ids(messages)
            token_ids, logprobs, reason = self._decode(prompt, constraint, temperature, greedy, max_new_tokens)
            version = self.version
        text = str(self.tokenizer.decode(token_ids, skip_special_tokens=True))
        return Generation(text, token_ids, logprobs, prompt, reason, version)

    def _decode(
        self, prompt: list[int], constraint: ChoiceSet | None, temperature: float, greedy: bool, limit: int
    ) -> tuple[list[int], list[float], str]:
        import torch

        global _CACHE_ARGUMENT
        if _CACHE_ARGUMENT == "":
            _CACHE_ARGUMENT = _cache_argument()
        end = self.tokenizer.eos_token_id
        generated: list[int] = []
        logprobs: list[float] = []
        past = None
        feed = torch.tensor([prompt])
        with torch.no_grad():
            for _ in range(limit):
                if constraint is not None and constraint.allowed(generated) == (end,):
                    # a forced end token: no forward pass needed (its constrained log-prob is 0)
                    generated.append(int(end))
                    logprobs.append(0.0)
                    return generated, logprobs, "stop"
                out = self._model(input_ids=feed, **{_CACHE_ARGUMENT: past}, use_cache=True)
                past = out[_CACHE_ARGUMENT]
                logits = out.logits[0, -1].float()
                if constraint is not None:
                    allowed = constraint.allowed(generated)
                    index = torch.tensor(allowed)
                    subset = torch.log_softmax(logits.index_select(0, index), dim=0)
                    pick = self._pick(subset, temperature, greedy)
                    token, logprob = allowed[pick], (0.0 if len(allowed) == 1 else float(subset[pick]))
                else:
                    full = torch.log_softmax(logits, dim=0)
                    token = self._pick(full, temperature, greedy)
                    logprob = float(full[token])
                generated.append(int(token))
                logprobs.append(logprob)
                if token == end:
                    return generated, logprobs, "stop"
                feed = torch.tensor([[token]])
        return generated, logprobs, "length"

    def _pick(self, logprobs: Any, temperature: float, greedy: bool) -> int:
        import torch

        if greedy:
            return int(torch.argmax(logprobs))
        weights = torch.softmax(logprobs / temperature, dim=0)
        return int(torch.multinomial(weights, 1, generator=self._generator))
