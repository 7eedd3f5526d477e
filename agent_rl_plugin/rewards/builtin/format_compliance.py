"""``format_compliance``: does the final answer match a regex or a (small) JSON schema?"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.builtin._util import check_choice
from agent_rl_plugin.rewards.result import EvaluateResult
from agent_rl_plugin.rewards.rollout import Rollout

_FENCE = re.compile(r"```[ \t]*(json)?[ \t]*\n(.*?)```", re.S | re.I)
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "additionalProperties",
        "title",
        "description",
        "$schema",
    }
)
_FLAGS = {"i": re.I, "m": re.M, "s": re.S, "x": re.X}


def _type_name(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``; ``1`` equals ``1.0``."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def check_schema(schema: Any, path: str = "$") -> None:
    """Raise ``ValueError`` when ``schema`` uses something outside the supported subset."""
    if not isinstance(schema, dict):
        raise ValueError(f"schema at {path} must be an object, got {type(schema).__name__}")
    unknown = set(schema) - SUPPORTED_KEYWORDS
    if unknown:
        raise ValueError(
            f"schema at {path} uses unsupported keywords {sorted(unknown)}; supported: {sorted(SUPPORTED_KEYWORDS)}"
        )
    types = schema.get("type", [])
    for name in [types] if isinstance(types, str) else types:
        if name not in _TYPES:
            raise ValueError(f"schema at {path}: unknown type {name!r}")
    for key, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{path}.{key}")
    if "items" in schema:
        check_schema(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        check_schema(schema["additionalProperties"], f"{path}.*")


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """The first violation of ``schema`` by ``value`` as ``"$.a[0].b: why"``, or ``None``.

    Supports: type (a name or a list), properties, required, items, enum, minimum, maximum,
    minLength, maxLength, additionalProperties (false or a schema)."""
    if "type" in schema:
        types = [schema["type"]] if isinstance(schema["type"], str) else list(schema["type"])
        if not any(_TYPES[t](value) for t in types):
            return f"{path}: expected {' or '.join(types)}, got {_type_name(value)}"
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        return f"{path}: {value!r} is not one of {schema['enum']!r}"
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: {value} is less than the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: {value} is greater than the maximum {schema['maximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{path}: string shorter than minLength {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: string longer than maxLength {schema['maxLength']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{path}: missing required property {key!r}"
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                problem = validate(item, properties[key], f"{path}.{key}")
            elif extra is False:
                problem = f"{path}: unexpected property {key!r}"
            elif isinstance(extra, dict):
                problem = validate(item, extra, f"{path}.{key}")
            else:
                problem = None
            if problem:
                return problem
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            problem = validate(item, schema["items"], f"{path}[{position}]")
            if problem:
                return problem
    return None


def extract_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` from the first fenced JSON block (```json, or a bare ``` block that
    parses), else from the whole text; ``(None, why)`` when nothing parses."""
    for match in _FENCE.finditer(text):
        try:
            return json.loads(match.group(2)), None
        except ValueError as exc:
            if match.group(1):
                return None, f"the ```json block is not valid JSON: {exc}"
    try:
        return json.loads(text.strip()), None
    except ValueError as exc:
        return None, f"the answer is not JSON (no ```json block and the text does not parse: {exc})"


class FormatCompliance(RewardPlugin):
    """1.0 when the final answer matches the required format, else 0.0 with the failed check.

    Give exactly one of:

    * ``pattern``: a regular expression; ``match="search"`` (default: found anywhere) or
      ``"fullmatch"`` (the whole answer, surrounding whitespace stripped); ``flags`` letters
      ``i`` (ignore case), ``m`` (multiline), ``s`` (dot matches newline), ``x`` (verbose).
    * ``json_schema``: a dict in a JSON-schema subset (type, properties, required, items, enum,
      minimum, maximum, minLength, maxLength, additionalProperties). The JSON is taken from the
      first fenced block (```json, or a plain ``` block that parses), else the whole answer.

    A missing or empty answer scores 0.0. ``metrics`` hold ``check`` ("pattern" or
    "json_schema") and ``passed``; ``reason`` names the failed check (for schemas: the JSON path
    and the rule). Construction fails with a clear error when both or neither are given, the
    regex does not compile, or the schema uses unsupported keywords or types.

    Parameters: ``pattern=None``, ``match="search"``, ``flags=""``, ``json_schema=None``.
    """

    name = "format_compliance"
    version = "1"
    weight = 1.0
    description = "1.0 when the final answer matches a regex or a JSON schema, else 0.0."

    def __init__(
        self,
        pattern: str | None = None,
        match: str = "search",
        flags: str = "",
        json_schema: dict[str, Any] | None = None,
        weight: float | None = None,
    ) -> None:
        if (pattern is None) == (json_schema is None):
            raise ValueError(f"{self.name}: give exactly one of pattern= (a regex) or json_schema= (a dict)")
        check_choice(self.name, "match", match, ("search", "fullmatch"))
        if not isinstance(flags, str) or set(flags) - set(_FLAGS):
            raise ValueError(f"{self.name}: parameter flags must be letters from 'imsx', got {flags!r}")
        self._regex: re.Pattern[str] | None = None
        if pattern is not None:
            if not isinstance(pattern, str):
                raise ValueError(f"{self.name}: parameter pattern must be a string, got {type(pattern).__name__}")
            compiled_flags = 0
            for letter in flags:
                compiled_flags |= _FLAGS[letter]
            try:
                self._regex = re.compile(pattern, compiled_flags)
            except re.error as exc:
                raise ValueError(f"{self.name}: invalid regular expression {pattern!r}: {exc}") from None
        else:
            try:
                check_schema(json_schema)
            except ValueError as exc:
                raise ValueError(f"{self.name}: invalid json_schema: {exc}") from None
        super().__init__(weight=weight, pattern=pattern, match=match, flags=flags, json_schema=json_schema)

    def check(self, text: str) -> str | None:
        """Why ``text`` fails the format, or ``None`` when it complies."""
        if self._regex is not None:
            if self.params["match"] == "fullmatch":
                ok = self._regex.fullmatch(text.strip()) is not None
            else:
                ok = self._regex.search(text) is not None
            how = "match the whole answer" if self.params["match"] == "fullmatch" else "occur in the answer"
            return None if ok else f"pattern {self.params['pattern']!r} does not {how}"
        value, problem = extract_json(text)
        if problem:
            return problem
        return validate(value, self.params["json_schema"])

    def score(self, rollout: Rollout) -> EvaluateResult:
        kind = "pattern" if self._regex is not None else "json_schema"
        text = rollout.final_output
        if text is None or not text.strip():
            return EvaluateResult(
                score=0.0, reason="no final answer to check", metrics={"check": kind, "passed": False}
            )
        problem = self.check(text)
        return EvaluateResult(
            score=0.0 if problem else 1.0,
            reason=problem or f"the answer complies with the {kind.replace('_', ' ')}",
            metrics={"check": kind, "passed": problem is None},
        )
