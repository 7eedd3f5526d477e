"""Built-in plugin: mask secrets in captured content, and drop content when capture is off.

Contract:

* :class:`Redactor` masks every match of a set of regular expressions with ``[REDACTED]``; a
  pattern with a group named ``secret`` has only that group masked (``postgres://user:[REDACTED]@
  host``, ``"password": "[REDACTED]"``). It handles text (:meth:`Redactor.redact`), nested
  values (:meth:`Redactor.redact_value`: strings inside lists, tuples and dicts, at any depth;
  JSON held in a string is masked as text) and attribute dicts in place
  (:meth:`Redactor.redact_attributes`). What has nothing to mask comes back as the same object.
  A pattern that does not compile, or that matches the empty string, is logged once and left
  out; the others still apply. Strings shorter than :data:`MIN_LENGTH` characters are never
  changed.
* Fast path: with only default patterns (:data:`~agent_rl_plugin.config.DEFAULT_REDACTION_PATTERNS`,
  or some of them), a few substring tests (:func:`may_match_defaults`, once over an attribute
  dict's strings joined) rule out text where none can match, so the common case (nothing to
  mask) runs no regular expression; where one may, each default pattern runs only if its own
  literal test passes. Added patterns run on every string of at least one character.
* :func:`redactor_for` is the redactor a config asks for: ``redaction_patterns``, then
  ``redact_patterns``, then the patterns returned by ``agent_rl_redaction_patterns`` hooks
  (collected when :func:`redactor_for` is called with ``refresh=True``, as
  :func:`~agent_rl_plugin.transform.make_attribute_transform` does); ``None`` when
  ``config.redact`` is off or there is no pattern. Cached per pattern set.
* The hook :func:`agent_rl_transform_attributes`: with ``config.capture_content=False`` it
  removes message, argument and result attributes (ours and those of GenAI/OpenInference/
  OpenLLMetry instrumentations); with ``config.redact`` (the default) it masks secrets in every
  string attribute value, nested ones included. Span names, status messages, event names,
  link and resource attributes are masked by the store's converter with the same redactor
  (:mod:`agent_rl_plugin.store.rows`).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Iterable, Sequence

from agent_rl_plugin import semconv
from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS, RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.plugins import get_plugin_manager

logger = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
#: Shorter strings are never changed (no default pattern can match fewer characters).
MIN_LENGTH = 7
SECRET_GROUP = "secret"

CONTENT_KEYS = frozenset(
    {
        semconv.GEN_AI_INPUT_MESSAGES,
        semconv.GEN_AI_OUTPUT_MESSAGES,
        semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
        semconv.GEN_AI_TOOL_CALL_RESULT,
        semconv.ROLLOUT_INPUT,
        semconv.ROLLOUT_OUTPUT,
        semconv.REASONING,
        semconv.EVENT_CONTENT,
        "input.value",
        "output.value",
        "traceloop.entity.input",
        "traceloop.entity.output",
    }
)
CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")

_GITHUB = re.compile(r"gh[pousr]_|github_pat_")
_GLOBAL_FLAGS = re.compile(r"^\(\?([imsx]+)\)")
_warned: set[str] = set()
_UNSEEN: Any = object()

Gate = Callable[[str, str], bool]  # (text, text.lower()) -> may the pattern match in text?


def _kv_gate(text: str, low: str) -> bool:
    return ("=" in text or ":" in text) and (
        "passw" in low or "pwd" in low or "secret" in low or "token" in low or "key" in low
    )


#: For each default pattern, in order: a test that is False only when it cannot match.
_DEFAULT_GATES: tuple[Gate, ...] = (
    lambda t, low: "PRIVATE KEY" in t,  # PEM
    lambda t, low: "eyJ" in t,  # JWT
    lambda t, low: "@" in t and "://" in t,  # URL password
    _kv_gate,
    _kv_gate,
    _kv_gate,  # name=value, quoted and bare
    lambda t, low: "secret" in low and "aws" in low,  # AWS secret in prose
    lambda t, low: "authoriz" in low and "basic" in low,  # Authorization: Basic
    lambda t, low: "bearer" in low,  # Bearer
    lambda t, low: "sk-" in t,
    lambda t, low: "AKIA" in t or "ASIA" in t,
    lambda t, low: "_" in t and _GITHUB.search(t) is not None,
    lambda t, low: "github_pat_" in t,
    lambda t, low: "xox" in t,
    lambda t, low: "AIza" in t,
)
assert len(_DEFAULT_GATES) == len(DEFAULT_REDACTION_PATTERNS), "one gate per default pattern"
_GATE_OF: dict[str, Gate] = dict(zip(DEFAULT_REDACTION_PATTERNS, _DEFAULT_GATES))


def may_match_defaults(text: str) -> bool:
    """False only when no default pattern can match in ``text`` (any of their gates would pass).

    Single-character tests (memchr) go first, so most text is ruled out after a few scans; the
    key-value and Authorization patterns also need a ``:`` or ``=``.
    """
    if (
        ("-" in text and ("sk-" in text or "xox" in text))
        or ("K" in text and "AKIA" in text)
        or ("S" in text and "ASIA" in text)
        or ("_" in text and _GITHUB.search(text) is not None)
        or ("z" in text and "AIza" in text)
        or ("J" in text and "eyJ" in text)
        or ("@" in text and "://" in text)
        or ("Y" in text and "PRIVATE KEY" in text)
    ):
        return True
    low = text.lower()
    if "secret" in low or "bearer" in low:  # AWS secrets named in prose, Bearer tokens
        return True
    if ":" not in text and "=" not in text:  # every other pattern has a name, then ':' or '='
        return False
    return "key" in low or "passw" in low or "pwd" in low or "token" in low or ("z" in low and "authoriz" in low)


def _warn_once(pattern: str, why: str) -> None:
    if pattern not in _warned:
        _warned.add(pattern)
        logger.warning("agent-rl: redaction pattern %r %s; it is left out (the others still apply)", pattern, why)


def _replacement(regex: re.Pattern[str]) -> Any:
    """What ``regex.sub`` replaces a match with: ``[REDACTED]``, or a function masking only the
    ``secret`` group when the pattern has one."""
    if SECRET_GROUP not in regex.groupindex:
        return REDACTED

    def replace(match: re.Match[str]) -> str:
        start, end = match.span(SECRET_GROUP)
        if start < 0:
            return REDACTED
        whole, offset = match.group(0), match.start()
        return whole[: start - offset] + REDACTED + whole[end - offset :]

    return replace


class Redactor:
    """Masks matches of ``patterns`` (see the module contract). Thread-safe; its only state after
    construction is the memory of :meth:`redact_name`.

    Each pattern is applied on its own, in order, to the text as the previous ones left it
    (``[REDACTED]`` matches none of the defaults); a default pattern only where its gate says it
    may match, so a text holding one kind of secret runs one or two expressions, not all."""

    def __init__(self, patterns: Iterable[str]) -> None:
        steps: list[tuple[re.Pattern[str], Any, Gate | None]] = []
        kept: list[str] = []
        for pattern in dict.fromkeys(patterns):  # in order, once each
            try:
                compiled = re.compile(pattern)
            except (re.error, TypeError) as exc:
                _warn_once(str(pattern), f"does not compile ({exc})")
                continue
            if compiled.search("") is not None:
                _warn_once(pattern, "matches the empty string")
                continue
            kept.append(pattern)
            steps.append((compiled, _replacement(compiled), _GATE_OF.get(pattern)))
        self.patterns: tuple[str, ...] = tuple(kept)
        self._steps = tuple(steps)
        self.defaults_only = all(gate is not None for _, _, gate in steps)
        self.min_length = MIN_LENGTH if self.defaults_only else 1
        self._names: dict[str, str | None] = {}  # redact_name's memory: None = unchanged

    def __bool__(self) -> bool:
        return bool(self.patterns)

    # --- masking -------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every match masked; ``text`` itself when nothing matched."""
        if len(text) < self.min_length or (self.defaults_only and not may_match_defaults(text)):
            return text
        low = text.lower()
        out = text
        for regex, replacement, gate in self._steps:
            if gate is None or gate(text, low):
                out = regex.sub(replacement, out)
        return text if out == text else out

    def redact_name(self, text: str) -> str:
        """:meth:`redact` for text that repeats (span and event names): results are remembered
        (up to 4096 texts), so a name seen before costs one dict lookup."""
        out = self._names.get(text, _UNSEEN)
        if out is _UNSEEN:
            redacted = self.redact(text)
            if len(self._names) >= 4096:
                self._names.clear()
            out = self._names[text] = None if redacted == text else redacted
        return text if out is None else out

    def redact_value(self, value: Any) -> Any:
        """``value`` with secrets masked in every string it holds (lists, tuples, dicts at any
        depth; dict keys are kept); the same object when nothing changed."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, (list, tuple)):
            items = [self.redact_value(item) for item in value]
            if all(new is old for new, old in zip(items, value)):
                return value
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, dict):
            changed = {k: self.redact_value(v) for k, v in value.items()}
            if all(changed[k] is v for k, v in value.items()):
                return value
            return changed
        return value

    def redact_attributes(self, attributes: dict[str, Any]) -> bool:
        """Mask secrets in ``attributes``' values in place; True when any value changed."""
        if self.defaults_only:
            texts = []
            nested = False
            for value in attributes.values():
                if type(value) is str:
                    if len(value) >= MIN_LENGTH:
                        texts.append(value)
                elif isinstance(value, (list, tuple, dict)):
                    nested = True
            # One scan of the strings joined rules out the common case (no literal, no regex).
            # A literal cannot span the NUL separator, so a miss here is a miss in every string.
            if not nested and (not texts or not may_match_defaults("\x00".join(texts))):
                return False
        changed = False
        for key, value in attributes.items():
            if isinstance(value, (str, list, tuple, dict)):
                new = self.redact_value(value)
                if new is not value:
                    attributes[key] = new
                    changed = True
        return changed


# --- the redactor of a config ------------------------------------------------------------
_cache: dict[tuple[tuple[str, ...], ...], Redactor] = {}
_hook_patterns: tuple[str, ...] | None = None


def hook_patterns(refresh: bool = False) -> tuple[str, ...]:
    """The patterns ``agent_rl_redaction_patterns`` implementations return (collected once, and
    again with ``refresh``). A failing implementation is logged and skipped."""
    global _hook_patterns
    if _hook_patterns is None or refresh:
        collected: list[str] = []
        hook = getattr(get_plugin_manager().hook, "agent_rl_redaction_patterns", None)
        for impl in reversed(hook.get_hookimpls()) if hook is not None else ():
            try:
                result = impl.function()
            except Exception:
                logger.warning(
                    "agent-rl: redaction pattern hook %s raised; skipped",
                    getattr(impl.function, "__qualname__", impl.function),
                    exc_info=True,
                )
                continue
            if isinstance(result, str):
                result = [result]
            collected.extend(str(p) for p in result or ())
        _hook_patterns = tuple(collected)
    return _hook_patterns


def redactor_for(config: RLConfig, refresh: bool = False) -> Redactor | None:
    """The redactor ``config`` asks for, or ``None`` (see the module contract)."""
    if not config.redact:
        return None
    key = (tuple(config.redaction_patterns), tuple(config.redact_patterns), hook_patterns(refresh))
    redactor = _cache.get(key)
    if redactor is None:
        if len(_cache) > 32:
            _cache.clear()
        redactor = _cache[key] = Redactor(p for group in key for p in group)
    return redactor if redactor else None


def redact_text(text: str, patterns: Sequence[str]) -> str:
    """``text`` with every match of ``patterns`` masked (``secret`` groups only, where present)."""
    key = ((), tuple(patterns), ())
    redactor = _cache.get(key)
    if redactor is None:
        redactor = _cache[key] = Redactor(patterns)
    return redactor.redact(text)


@hookimpl(trylast=True)
def agent_rl_transform_attributes(attributes: dict[str, Any], span_name: str, config: RLConfig) -> None:
    if not config.capture_content:
        for key in [k for k in attributes if k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES)]:
            del attributes[key]
    if not config.redact:
        return
    redactor = redactor_for(config)
    if redactor is not None:
        redactor.redact_attributes(attributes)
