"""The default redaction patterns on a corpus of generated FAKE secrets, the false positives they
must not have, the cheap pre-check's soundness, nested values, and the ways to add patterns
(config field, AGENT_RL_REDACT_PATTERNS, the ``agent_rl_redaction_patterns`` hook).

Every secret here is generated from a seeded RNG: none is, or was ever, a real credential."""

from __future__ import annotations

import json
import random
import string

import pytest

from agent_rl_plugin.config import DEFAULT_REDACTION_PATTERNS, RLConfig
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.redaction import REDACTED, Redactor, may_match_defaults, redactor_for

_rng = random.Random(20261125)
B62 = string.ascii_letters + string.digits
B64URL = B62 + "-_"


def fake(n: int, alphabet: str = B62) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# name -> (text holding the secret, the secret (must vanish), text that must stay readable)
FAKES = {
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ" + fake(30, B64URL) + "." + fake(43, B64URL),
    "openai": "sk-" + fake(48),
    "openai_project": "sk-proj-" + fake(20) + "-" + fake(24) + "_" + fake(20),
    "anthropic": "sk-ant-api03-" + fake(93, B64URL) + "AA",
    "aws_id": "AKIA" + fake(16, string.ascii_uppercase + "234567"),
    "aws_temp_id": "ASIA" + fake(16, string.ascii_uppercase + "234567"),
    "aws_secret": fake(40, B62 + "/+"),
    "github_pat": "ghp_" + fake(36),
    "github_oauth": "gho_" + fake(36),
    "github_user": "ghu_" + fake(36),
    "github_server": "ghs_" + fake(36),
    "github_refresh": "ghr_" + fake(36),
    "github_fine": "github_pat_11" + fake(20, string.ascii_uppercase + string.digits) + "_" + fake(59),
    "slack_bot": "xoxb-" + fake(12, string.digits) + "-" + fake(13, string.digits) + "-" + fake(24),
    "slack_user": "xoxp-" + fake(12, string.digits) + "-" + fake(24),
    "slack_s": "xoxs-" + fake(12, string.digits) + "-" + fake(24),
    "google": "AIza" + fake(35, B64URL),
    "password": "Pw" + fake(10, B62 + "!#%") + "9",
    "bearer": fake(40, B64URL + "."),
    "basic": "dXNlcjpwYXNz" + fake(12, B62),
    "pem_body": fake(64, B62 + "+/"),
}

# name -> (text, secret, kept)
CASES = {
    "jwt": (f"Authorization header was {FAKES['jwt']} (expired)", FAKES["jwt"], "(expired)"),
    "url_password": (f"connect to postgres://app_user:{FAKES['password']}@db.internal:5432/prod now",
                     FAKES["password"], "postgres://app_user:[REDACTED]@db.internal:5432/prod"),
    "url_no_user": (f"redis://:{FAKES['password']}@cache:6379/0", FAKES["password"], "redis://:[REDACTED]@cache:6379/0"),
    "password_eq": (f"PGPASSWORD={FAKES['password']} psql -h db", FAKES["password"], "PGPASSWORD=[REDACTED] psql -h db"),
    "password_json": (json.dumps({"user": "bob", "password": FAKES["password"] + " with spaces"}),
                      FAKES["password"], '"password": "[REDACTED]"'),
    "password_escaped_json": (json.dumps(json.dumps({"db_password": FAKES["password"]})), FAKES["password"],
                              '\\"db_password\\": \\"[REDACTED]\\"'),
    "passwd_colon": (f"passwd: {FAKES['password']}\nuser: root", FAKES["password"], "user: root"),
    "pwd_single_quoted": (f"pwd='{FAKES['password']}'", FAKES["password"], "pwd='[REDACTED]'"),
    "secret_yaml": (f"secret: {FAKES['password']}", FAKES["password"], "secret: [REDACTED]"),
    "api_key_query": (f"GET /v1/items?api_key={FAKES['password']}&page=2", FAKES["password"], "&page=2"),
    "apikey_header": (f"x-apikey: {FAKES['password']}", FAKES["password"], "x-apikey: [REDACTED]"),
    "access_key_env": (f"MY_ACCESS_KEY={FAKES['password']}", FAKES["password"], "MY_ACCESS_KEY=[REDACTED]"),
    "client_secret": (f'{{"client_id": "abc", "client_secret": "{FAKES["password"]}"}}', FAKES["password"],
                      '"client_id": "abc"'),
    "private_key_kv": (f"private_key = {FAKES['password']}", FAKES["password"], "private_key = [REDACTED]"),
    "token_kv": (f"GITHUB_TOKEN={FAKES['password']}", FAKES["password"], "GITHUB_TOKEN=[REDACTED]"),
    "token_then_bearer": (f"token: Bearer {FAKES['bearer']}", FAKES["bearer"], "token: "),
    "aws_secret_env": (f"aws_secret_access_key = {FAKES['aws_secret']}", FAKES["aws_secret"],
                       "aws_secret_access_key = [REDACTED]"),
    "aws_secret_camel": (json.dumps({"SecretAccessKey": FAKES["aws_secret"]}), FAKES["aws_secret"], "SecretAccessKey"),
    "aws_secret_prose": (f"the AWS secret key is {FAKES['aws_secret']} for now", FAKES["aws_secret"], "for now"),
    "aws_id": (f"user {FAKES['aws_id']} created", FAKES["aws_id"], "user [REDACTED] created"),
    "aws_temp_id": (f"id={FAKES['aws_temp_id']}", FAKES["aws_temp_id"], "id=[REDACTED]"),
    **{name: (f"use {FAKES[name]} to push", FAKES[name], "to push")
       for name in ("github_pat", "github_oauth", "github_user", "github_server", "github_refresh", "github_fine",
                    "openai", "openai_project", "anthropic", "slack_bot", "slack_user", "slack_s", "google")},
    "pem": (f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{FAKES['pem_body']}\n{FAKES['pem_body'][::-1]}\n"
            "-----END RSA PRIVATE KEY-----\nthanks", FAKES["pem_body"][10:40], "thanks"),
    "pem_cut": (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{FAKES['pem_body']}...[truncated 900 bytes]",
                FAKES["pem_body"][10:40], ""),
    "bearer": (f"Authorization: Bearer {FAKES['bearer']}", FAKES["bearer"], "Authorization: Bearer [REDACTED]"),
    "basic": (f"Authorization: Basic {FAKES['basic']}", FAKES["basic"], "Authorization: Basic [REDACTED]"),
}


@pytest.fixture(scope="module")
def defaults() -> Redactor:
    return Redactor(DEFAULT_REDACTION_PATTERNS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_fake_secret_is_masked_and_its_context_kept(defaults, name):
    text, secret, kept = CASES[name]
    out = defaults.redact(text)
    assert secret not in out, out
    assert REDACTED in out and kept in out, out
    assert may_match_defaults(text)  # the pre-check never rules out a secret
    assert defaults.redact(out) == out  # masking twice changes nothing


ORDINARY = [
    "The user asked about the weather in Paris; it is 18 degrees, with light wind and high clouds.",
    "span 00f067aa0ba902b7 in trace 4bf92f3577b34da6a3ce929d0e0e4736, parent b7ad6b7169203331",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 and sha256 "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "request 123e4567-e89b-12d3-a456-426614174000 took 1234.5 ms, 98765 tokens, cost $0.0042",
    '{"max_tokens": 1000, "input_tokens": 512, "prompt_tokens": 48213, "temperature": 0.7}',
    "task-management-system-design-document and risk-assessment-framework-v2 and desk-organizer",
    "model gpt-4o-mini-2024-07-18 via https://api.example.com:8443/v1/chat?x=1 and git@github.com:org/repo.git",
    "mail alice@example.com, see https://example.com/path@v2 and ftp://files.example.com/pub",
    "Each token: a unit of text. The password field is required. Keep your secret safe.",
    "def check(password):\n    return len(password) > 8",
    "numbers 3.14159 2718281828 1e-9 -42 0xDEADBEEF",
    "the highway through Ghent was bright tonight; ghosts, laughs and thoughts",
    "AKIA is not a key here, nor AIza alone, nor sk- alone, nor eyJ alone.",
    json.dumps({"token": None, "password": True, "secret": False}),
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_ids_and_numbers_are_not_masked(defaults, text):
    assert defaults.redact(text) is text


def test_the_pre_check_rules_out_plain_prose():
    assert not may_match_defaults(ORDINARY[0])
    assert not may_match_defaults(ORDINARY[1])


def test_nested_values_lists_tuples_dicts(defaults):
    secret = FAKES["openai_project"]
    value = {"a": [f"k {secret}", ("x", {"deep": f"Bearer {FAKES['bearer']}"})], "n": 3, "ok": "plain text here"}
    out = defaults.redact_value(value)
    assert secret not in str(out) and FAKES["bearer"] not in str(out)
    assert isinstance(out["a"][1], tuple) and out["n"] == 3 and out["ok"] is value["ok"]
    attributes = {"tags": (f"tag {FAKES['github_pat']}", "ordinary"), "count": 2, "plain": "nothing to see here"}
    assert defaults.redact_attributes(attributes)
    assert attributes["tags"] == ("tag [REDACTED]", "ordinary") and attributes["plain"] == "nothing to see here"
    untouched = {"tags": ("a", "b"), "plain": "nothing to see here"}
    assert not defaults.redact_attributes(untouched) and untouched == {"tags": ("a", "b"), "plain": "nothing to see here"}


def test_extra_patterns_from_config_env_and_hook(plugin_manager, monkeypatch):
    config = RLConfig(db_path=None, redact_patterns=[r"ACME-[0-9]{6}", r"pin (?P<secret>\d{4})"])
    redactor = redactor_for(config, refresh=True)
    assert redactor.redact("id ACME-123456 and pin 1234 ok") == "id [REDACTED] and pin [REDACTED] ok"
    assert redactor.redact(CASES["openai"][0]) != CASES["openai"][0]  # the defaults still apply

    monkeypatch.setenv("AGENT_RL_REDACT_PATTERNS", '["ZED-[a-z]{3,5}", "QQ[0-9]+"]')  # JSON: commas allowed
    from_env = RLConfig.from_env()
    assert from_env.redact_patterns == ["ZED-[a-z]{3,5}", "QQ[0-9]+"]
    assert redactor_for(from_env).redact("a ZED-abcd b QQ77") == "a [REDACTED] b [REDACTED]"
    monkeypatch.setenv("AGENT_RL_REDACT_PATTERNS", "ZED-[a-z]+,QQ[0-9]+")
    assert RLConfig.from_env().redact_patterns == ["ZED-[a-z]+", "QQ[0-9]+"]

    class Corp:
        @hookimpl
        def agent_rl_redaction_patterns(self):
            return [r"CORP_[A-Z]{8}", "(unbalanced"]  # a broken pattern is left out, the rest apply

    plugin_manager.register(Corp())
    hooked = redactor_for(RLConfig(db_path=None), refresh=True)
    assert hooked.redact("code CORP_ABCDEFGH here") == "code [REDACTED] here"
    assert hooked.redact(CASES["bearer"][0]) == CASES["bearer"][2]
    assert redactor_for(RLConfig(db_path=None, redact=False)) is None


def test_replacing_the_defaults_and_a_pattern_with_global_flags(defaults):
    only = Redactor(["(?i)internal-[0-9]+"])
    assert only.redact("see INTERNAL-42 and " + FAKES["openai"]) == "see [REDACTED] and " + FAKES["openai"]
    assert Redactor(["a*"]).patterns == ()  # matches the empty string: left out
    backref = Redactor([r"(['\"])tok-\w+\1", DEFAULT_REDACTION_PATTERNS[0]])  # cannot share one expression
    assert backref.redact("x 'tok-abc' y") == "x [REDACTED] y"


def test_names_are_remembered_and_still_masked_the_second_time(defaults):
    name = f"agent {FAKES['openai']}"
    first, second = defaults.redact_name(name), defaults.redact_name(name)
    assert first == second == "agent [REDACTED]"
    plain = "invoke_agent planner"
    assert defaults.redact_name(plain) is plain and defaults.redact_name(plain) is plain


# Neighbours a string may have in the joined text of redact_attributes' fast path: what could
# turn an assertion at a string's edge, or extend a match, if the NUL separator were not neutral.
EDGES = ["", "a", "x" * 8, "null", "true", "=", ":", "'", '"', "[", " ", "\n", "task-1", "-----END RSA PRIVATE KEY-----",
         "==", "/+", "AKIA", "_", "\x00", "Bearer"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_default_pattern_is_separator_safe(name):
    """A default pattern that matches in one string matches in that string joined with NUL to its
    neighbours: what makes a miss on the joined strings (Redactor._matches_joined) a miss in each."""
    import re

    text, secret, _ = CASES[name]
    pieces = {text, secret, text.strip(), text[: len(text) // 2 + 8]}
    for pattern in DEFAULT_REDACTION_PATTERNS:
        regex = re.compile(pattern)
        for piece in pieces:
            if regex.search(piece) is None:
                continue
            for before in EDGES:
                for after in EDGES:
                    joined = "\x00".join(p for p in (before, piece, after) if p)
                    assert regex.search(joined) is not None, (pattern, before, piece, after)


@pytest.mark.parametrize("name", sorted(CASES))
def test_attribute_dicts_mask_as_each_string_alone(defaults, name):
    """redact_attributes (joined-text fast path) gives what redact gives each string on its own,
    next to strings that pass the cheap literal test but hold no secret."""
    text, secret, _ = CASES[name]
    for neighbours in (["task-1", "group-9"], ["x" * 8], ["null", "token=[REDACTED]"], []):
        attributes = {f"k{i}": value for i, value in enumerate([*neighbours, text, *neighbours])}
        expected = {key: defaults.redact(value) for key, value in attributes.items()}
        assert defaults.redact_attributes(attributes)
        assert attributes == expected and secret not in json.dumps(attributes)


def test_literal_hits_without_a_secret_cost_one_search_not_one_per_string(defaults, monkeypatch):
    """'task-1' holds 'sk-' (the OpenAI key's literal): the joined strings are searched once and
    no string goes through redact on its own."""
    attributes = {"gen_ai.task.id": "task-000123", "group": "group-000004", "model": "tiny-model",
                  "messages": '[{"role":"user","content":"What is 17 * 23? Use the calculator tool."}]'}
    before = dict(attributes)

    def no_per_string_scan(text):
        raise AssertionError(f"scanned {text!r} alone")

    monkeypatch.setattr(defaults, "redact", no_per_string_scan)
    assert not defaults.redact_attributes(attributes)
    assert attributes == before


def test_redactor_for_follows_patterns_changed_in_place(plugin_manager):
    """redactor_for remembers its last answer; a pattern list changed in place, a new config with
    other patterns, or refreshed hooks still get the redactor their patterns ask for."""
    config = RLConfig(db_path=None)
    first = redactor_for(config, refresh=True)
    assert redactor_for(config) is first and redactor_for(RLConfig(db_path=None)) is first
    config.redact_patterns.append(r"ZZQ-[0-9]{4}")  # in place: same list object
    second = redactor_for(config)
    assert second is not first and second.redact("id ZZQ-1234 here") == "id [REDACTED] here"
    assert redactor_for(RLConfig(db_path=None)) is first  # the defaults again

    class Corp:
        @hookimpl
        def agent_rl_redaction_patterns(self):
            return [r"CORQ_[A-Z]{6}"]

    plugin_manager.register(Corp())
    assert redactor_for(RLConfig(db_path=None)) is first  # hooks are collected on refresh only
    assert redactor_for(RLConfig(db_path=None), refresh=True).redact("x CORQ_ABCDEF") == "x [REDACTED]"
    assert redactor_for(RLConfig(db_path=None, redact=False)) is None
    assert redactor_for(RLConfig(db_path=None, redaction_patterns=[])) is not first
