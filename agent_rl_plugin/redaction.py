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
  mask) runs no regular expression; where one may, each default pattern whose literal test
  passes searches the joined strings once, and only a match there sends each string through
  :meth:`Redactor.redact` (where each default pattern runs only if its own literal test passes
  on that string). Added patterns run on every string of at least one character.
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
from typing import Any, Callable, Iterable, Mapping, Sequence

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

Gate = Callable[[str, str], bool]  # (text, folded(text)) -> may the pattern match in text?

#: Characters other than ASCII letters that a case-insensitive regular expression matches as
#: one (``(?i:s)`` matches ``ſ``, ``(?i:i)`` matches ``ı`` and ``İ``; ``K``, the Kelvin sign, lowers
#: to ``k`` already): the gates' lower-case text must show them as that letter.
_FOLD = str.maketrans({"\u017f": "s", "\u0131": "i", "\u0130": "i"})


def folded(text: str) -> str:
    """``text`` lower-cased for the gates' substring tests: every character a case-insensitive
    default pattern matches as an ASCII letter shows as that letter."""
    return text.lower() if text.isascii() else text.translate(_FOLD).lower()


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
    low = folded(text)
    if "secret" in low or "bearer" in low:  # AWS secrets named in prose, Bearer tokens
        return True
    if ":" not in text and "=" not in text:  # every other pattern has a name, then ':' or '='
        return False
    return "key" in low or "passw" in low or "pwd" in low or "token" in low or ("z" in low and "authoriz" in low)


def default_candidates(text: str) -> list[str]:
    """The default patterns whose gate (see :data:`_DEFAULT_GATES`) passes on ``text``: the
    same answer as asking each gate, in straight-line code (one :func:`folded`, substring tests
    behind single-character ones); tests/test_redaction_patterns.py checks the equivalence."""
    low = folded(text)
    found: list[str] = []  # a list: the caller iterates it once
    add = found.append
    pem, jwt, url, kv1, kv2, kv3, aws, basic, bearer, sk, akia, gh, ghpat, xox, aiza = DEFAULT_REDACTION_PATTERNS
    if "Y" in text and "PRIVATE KEY" in text:
        add(pem)
    if "J" in text and "eyJ" in text:
        add(jwt)
    if "@" in text and "://" in text:
        add(url)
    if ("=" in text or ":" in text) and (
        "passw" in low or "pwd" in low or "secret" in low or "token" in low or "key" in low
    ):
        found += (kv1, kv2, kv3)
    if "secret" in low and "aws" in low:
        add(aws)
    if "authoriz" in low and "basic" in low:
        add(basic)
    if "bearer" in low:
        add(bearer)
    if "-" in text and "sk-" in text:
        add(sk)
    if "x" in text and "xox" in text:
        add(xox)
    if "AKIA" in text or "ASIA" in text:
        add(akia)
    if "_" in text:
        if _GITHUB.search(text) is not None:
            add(gh)
        if "github_pat_" in text:
            add(ghpat)
    if "z" in text and "AIza" in text:
        add(aiza)
    return found


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
        #: For :meth:`_matches_joined`: default pattern -> does it match somewhere in a text?
        self._searches: dict[str, Callable[[str], bool]] = {
            pattern: _search_of(regex) for (regex, _, gate), pattern in zip(steps, kept) if gate is not None
        }

    def __bool__(self) -> bool:
        return bool(self.patterns)

    # --- masking -------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """``text`` with every match masked; ``text`` itself when nothing matched."""
        if len(text) < self.min_length or (self.defaults_only and not may_match_defaults(text)):
            return text
        low = folded(text)
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
        depth; dict keys are kept; UTF-8 bytes as text, masked ones becoming ``str``); the same
        object when nothing changed."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, (bytes, bytearray)):  # the store and OTLP show UTF-8 bytes as text
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                return value  # not text: stored as "<N bytes>"
            redacted = self.redact(text)
            return value if redacted is text else redacted  # masked: as text
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

    def _matches_joined(self, joined: str) -> bool:
        """Whether any pattern (default ones only: see below) matches in ``joined``, strings
        joined with NUL. False means no pattern matches in any of the strings, so none changes.
        This holds because every default pattern is *separator-safe*: one that matches in one
        of the strings also matches in the joined text, where the text it matched is unchanged
        and each assertion at the string's edges (``\\b``, the look-behinds and look-aheads)
        holds next to a NUL as it does at a string's start or end (the PEM pattern's ``\\Z``:
        its lazy tail reaches the joined text's end instead); tests/test_redaction_patterns.py
        checks it. Used when a literal test passed (``task-1`` holds ``sk-``): one search per
        candidate pattern (:func:`default_candidates`) instead of a scan of every string."""
        searches = self._searches
        for pattern in default_candidates(joined):
            found = searches.get(pattern)
            if found is not None and found(joined):
                return True
        return False

    def cannot_change(self, attributes: Mapping[str, Any]) -> bool:
        """True only when :meth:`redact_attributes` would change none of ``attributes``' values
        (it never changes ``attributes``): a redactor of default patterns, values that are plain
        ``str`` (or no text at all: numbers, booleans, ``None``; not bytes), or tuples of those
        (OTel sequences: each item is redacted as a value of its own) and, in their NUL-joined text, no
        literal test nor pattern match. False means "not known": the caller redacts as usual.
        Nested values and ``str`` subclasses always answer False (fail closed)."""
        return self.cannot_change_all((attributes,))

    def cannot_change_all(self, mappings: Iterable[Mapping[str, Any]]) -> bool:
        """:meth:`cannot_change` for many mappings at once (a batch of spans): True only when
        :meth:`redact_attributes` would change none of the values of any of them. The strings of
        every mapping are joined with NUL and tested once, which is sound for the same reason as
        within one mapping (a default pattern that matches in one string matches in the joined
        text; see :meth:`_matches_joined`). Strings shorter than :data:`MIN_LENGTH` (never
        changed) are joined too: more text can only add matches, so this stays sound. False
        means "not known" for at least one mapping: the caller asks per mapping."""
        if not self.defaults_only:
            return False
        values: list[Any] = []
        extend = values.extend
        for attributes in mappings:
            extend(attributes.values())
        kinds = set(map(type, values))
        texts: list[str]
        if kinds <= _NO_TEXT_OR_STR:  # the common case: C loops only
            texts = list(filter(_is_str, values)) if str in kinds else []
        else:
            texts = []
            add = texts.append
            for value in values:
                kind = type(value)
                if kind is str:
                    add(value)
                elif kind is tuple:  # an OTel sequence: redact_value masks each str item as a value
                    item_kinds = set(map(type, value))
                    if not item_kinds <= _NO_TEXT_OR_STR:
                        return False
                    if str in item_kinds:
                        texts.extend(item for item in value if type(item) is str)
                elif kind not in _NO_TEXT:
                    return False
        if not texts:
            return True
        # One scan of the distinct strings joined rules out the common case (no literal, no
        # regex). A literal cannot span the NUL separator, so a miss here is a miss in every
        # string; a string seen twice adds nothing to the scan (values such as model names,
        # rollout and task ids repeat across a batch's spans).
        joined = "\x00".join(set(texts))
        return not may_match_defaults(joined) or not self._matches_joined(joined)

    def redact_attributes(self, attributes: dict[str, Any]) -> bool:
        """Mask secrets in ``attributes``' values in place; True when any value changed."""
        if self.cannot_change(attributes):
            return False
        changed = False
        for key, value in attributes.items():
            if isinstance(value, (str, list, tuple, dict, bytes, bytearray)):
                new = self.redact_value(value)
                if new is not value:
                    attributes[key] = new
                    changed = True
        return changed


_LOOKBEHIND = re.compile(r"\(\?<!\[[^\]()]*\]\)")


def _search_of(regex: re.Pattern[str]) -> Callable[[str], bool]:
    """Whether ``regex`` matches somewhere in a text. A pattern that starts with a negative
    look-behind on a character class (``(?<![A-Za-z0-9])sk-...``) defeats the regex engine's
    literal-prefix scan (~10x slower); it is first searched without the look-behind, which
    matches wherever the full pattern does, so a miss there is a miss (nearly every text)."""
    lead = _LOOKBEHIND.match(regex.pattern)
    if lead is None:
        return lambda text: regex.search(text) is not None
    relaxed = re.compile(regex.pattern[lead.end() :], regex.flags)
    return lambda text: relaxed.search(text) is not None and regex.search(text) is not None


#: Value types that hold no text :meth:`Redactor.redact_value` could change.
_NO_TEXT = frozenset({int, float, bool, type(None)})  # not bytes: UTF-8 bytes are text to the store
_NO_TEXT_OR_STR = _NO_TEXT | {str}
_is_str = str.__instancecheck__  # among values of the types above: True only for str


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


#: The last answer of :func:`redactor_for`: (redaction_patterns, redact_patterns, hook patterns,
#: answer). The attribute hook asks once per span, nearly always about the same patterns: equal
#: lists and the same hook tuple give the same answer without building and hashing the key.
_last: tuple[list[str], list[str], tuple[str, ...], Redactor | None] | None = None


def redactor_for(config: RLConfig, refresh: bool = False) -> Redactor | None:
    """The redactor ``config`` asks for, or ``None`` (see the module contract)."""
    global _last
    if not config.redact:
        return None
    hooks = hook_patterns(refresh)
    last = _last
    if (
        last is not None
        and last[2] is hooks
        and config.redaction_patterns == last[0]
        and config.redact_patterns == last[1]
    ):
        return last[3]
    key = (tuple(config.redaction_patterns), tuple(config.redact_patterns), hooks)
    redactor = _cache.get(key)
    if redactor is None:
        if len(_cache) > 32:
            _cache.clear()
        redactor = _cache[key] = Redactor(p for group in key for p in group)
    answer = redactor if redactor else None
    _last = (list(key[0]), list(key[1]), hooks, answer)
    return answer


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
