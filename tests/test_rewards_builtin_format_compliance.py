"""format_compliance: a regex or a JSON-schema subset; 1.0 / 0.0 with the failed check."""

from __future__ import annotations

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.format_compliance import FormatCompliance, extract_json, validate

SCHEMA = {
    "type": "object",
    "required": ["name", "age", "tags"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "score": {"type": ["number", "null"]},
    },
    "additionalProperties": False,
}


def answer(text: str | None) -> Rollout:
    return Rollout(rollout_id="r", final_output=text)


def test_pattern_search_and_fullmatch():
    assert FormatCompliance(pattern=r"Answer: \d+").score(answer("So... Answer: 42")).score == 1.0
    full = FormatCompliance(pattern=r"Answer: \d+", match="fullmatch")
    assert full.score(answer("  Answer: 42\n")).score == 1.0
    failed = full.score(answer("So... Answer: 42"))
    assert failed.score == 0.0 and "does not match the whole answer" in failed.reason
    assert FormatCompliance(pattern="answer", flags="i").score(answer("ANSWER")).score == 1.0


def test_json_schema_passes_from_a_fence_or_the_whole_text():
    fenced = 'Here you go:\n```json\n{"name": "Ada", "age": 36, "tags": ["a"], "score": null}\n```\nBye'
    result = FormatCompliance(json_schema=SCHEMA).score(answer(fenced))
    assert result.score == 1.0 and result.metrics == {"check": "json_schema", "passed": True}
    assert FormatCompliance(json_schema=SCHEMA).score(answer('{"name": "Ada", "age": 36.0, "tags": []}')).score == 1.0


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"name": "Ada", "age": 36}, "$: missing required property 'tags'"),
        ({"name": "Ada", "age": "36", "tags": []}, "$.age: expected integer, got string"),
        ({"name": "Ada", "age": 200, "tags": []}, "$.age: 200 is greater than the maximum 150"),
        ({"name": "Ada", "age": -1, "tags": []}, "$.age: -1 is less than the minimum 0"),
        ({"name": "", "age": 1, "tags": []}, "$.name: string shorter than minLength 1"),
        ({"name": "x" * 21, "age": 1, "tags": []}, "$.name: string longer than maxLength 20"),
        ({"name": "Ada", "age": 1, "tags": ["a", "c"]}, "$.tags[1]: 'c' is not one of ['a', 'b']"),
        ({"name": "Ada", "age": True, "tags": []}, "$.age: expected integer, got boolean"),
        ({"name": "Ada", "age": 1, "tags": [], "x": 1}, "$: unexpected property 'x'"),
        ([1], "$: expected object, got array"),
    ],
)
def test_schema_violations_name_the_path_and_rule(value, why):
    assert validate(value, SCHEMA) == why


def test_schema_failure_reason_and_unparsable_json():
    bad = FormatCompliance(json_schema=SCHEMA).score(answer('{"name": "Ada"}'))
    assert bad.score == 0.0 and "missing required property 'age'" in bad.reason
    broken = FormatCompliance(json_schema=SCHEMA).score(answer("```json\n{name: Ada}\n```"))
    assert broken.score == 0.0 and "not valid JSON" in broken.reason
    prose = FormatCompliance(json_schema={"type": "object"}).score(answer("no json here"))
    assert prose.score == 0.0 and "not JSON" in prose.reason


def test_plain_fence_that_parses_is_used():
    assert extract_json("```\n[1, 2]\n```") == ([1, 2], None)


def test_missing_answer_fails():
    assert FormatCompliance(pattern="x").score(answer(None)).score == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of pattern"),
        ({"pattern": "x", "json_schema": {"type": "object"}}, "exactly one of pattern"),
        ({"pattern": "("}, "invalid regular expression"),
        ({"pattern": "x", "match": "prefix"}, "parameter match"),
        ({"pattern": "x", "flags": "q"}, "parameter flags"),
        ({"json_schema": {"type": "thing"}}, "unknown type 'thing'"),
        ({"json_schema": {"pattern": "^a"}}, "unsupported keywords"),
    ],
)
def test_bad_configuration_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FormatCompliance(**kwargs)
