"""Settings: the :class:`RLConfig` model and how it is read from ``AGENT_RL_*`` variables.

Precedence, highest first: keyword arguments given to :func:`agent_rl_plugin.configure` (or a
mixin's ``rl_config``), then environment variables, then the defaults below.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Names whose value is a secret in ``name=value`` / ``name: value`` / ``"name": "value"`` text
#: (case-insensitive; the name may carry a prefix: ``db_password``, ``GITHUB_TOKEN``, ``x-api-key``).
_SECRET_NAME = (
    r"(?i:(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,40}?"
    r"(?:passw(?:or)?d|pwd|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|client[_\-]?secret))"
    r"\\?[\"']?[ \t]{0,5}[:=][ \t]{0,5}"
)

#: Patterns for secrets that are masked in captured content unless redaction is switched off.
#: A match is replaced by ``[REDACTED]``; where a pattern has a group named ``secret``, only that
#: group is (the scheme, user and host of a URL, a key's name, "Bearer " stay readable).
DEFAULT_REDACTION_PATTERNS: tuple[str, ...] = (
    # PEM private key blocks, to their END line (or to the end of a cut value)
    r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|\Z)",
    # JWTs: three base64url segments, header and payload JSON objects ("eyJ" = '{"')
    r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
    # the password of scheme://user:password@host
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/?#@\"'<>]{0,256}:(?P<secret>[^\s/?#\"'<>]{1,256})@",
    # name=value secrets: double-quoted (JSON, also with escaped quotes), single-quoted, bare
    _SECRET_NAME + r"\\?\"(?P<secret>[^\"\\\r\n]{1,1024})",
    _SECRET_NAME + r"'(?P<secret>[^'\r\n]{1,1024})",
    _SECRET_NAME + r"(?!(?i:bearer|basic|token)[ \t]+\[)(?:(?i:bearer|basic|token)[ \t]+)?"
    r"(?!(?:null|true|false|None)\b)"
    r"(?P<secret>[^\s\"'`\\,;&<>(){}\[\]]{3,1024})",
    # AWS secret access keys named in prose ("aws secret key is ...")
    r"(?i:aws[_\-. ]?secret[A-Za-z0-9_\-. ]{0,30}?)[\s\"':=]{1,5}(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    # Authorization: Basic / Bearer credentials
    r"(?i:\bauthorization\\?[\"']?[ \t]{0,5}[:=][ \t]{0,5}\\?[\"']?basic[ \t]+)(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
    r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)",
    r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic keys (sk-, sk-proj-, sk-ant-)
    r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])",  # AWS access key ids
    r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_)
    r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained tokens
    r"(?<![A-Za-z0-9])xox[baprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
)

DEFAULT_DB_PATH = "agent_rl.duckdb"
#: LLM client SDKs whose calls ``configure()`` can capture (``instrument_clients``).
SUPPORTED_LLM_CLIENTS: tuple[str, ...] = ("openai", "anthropic", "litellm")
ENV_PREFIX = "AGENT_RL_"


class RLConfig(BaseModel):
    """Everything that changes how agents are recorded.

    Every field can also be set with an environment variable ``AGENT_RL_<FIELD NAME IN CAPITALS>``
    (lists as comma-separated values, booleans as ``1/0/true/false``).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    enable_rl: bool = Field(True, description="Master switch. False makes decorators, mixins and helpers no-ops.")
    db_path: str | None = Field(
        DEFAULT_DB_PATH,
        description="DuckDB file the spans are written to; None (or an empty string) writes no file.",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="Also export spans over OTLP/HTTP to this collector or `agent-rl serve` "
        "(e.g. http://127.0.0.1:4318/v1/traces).",
    )
    otlp_headers: dict[str, str] = Field(
        default_factory=dict, description="Extra headers for the OTLP exporter (e.g. a token)."
    )
    capture_content: bool = Field(
        True,
        description="Record message contents, tool arguments and results. False keeps only "
        "names, timings, token counts and status.",
    )
    redact: bool = Field(True, description="Mask secrets matching redaction_patterns in content.")
    redaction_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_REDACTION_PATTERNS),
        description="Regular expressions whose matches are replaced by [REDACTED].",
    )
    redact_patterns: list[str] = Field(
        default_factory=list,
        description="More regular expressions to mask, added to redaction_patterns (a group named "
        "`secret` masks only that group). AGENT_RL_REDACT_PATTERNS: comma-separated, or a JSON "
        "list for patterns that contain commas.",
    )
    max_attribute_size: int = Field(
        32_768,
        ge=64,
        description="Longest attribute value in characters; longer values are cut and marked with their original size.",
    )
    service_name: str = Field("agent-rl", description="OTel resource service.name for our provider.")
    export_batch_size: int = Field(512, ge=1, description="Spans per export batch.")
    export_delay_ms: int = Field(500, ge=1, description="Longest time a finished span waits before being exported.")
    max_queue_size: int = Field(
        4_096,
        ge=1,
        description="Finished spans held in memory waiting for export (about 3 KB each); when "
        "the queue is full, the thread finishing a span waits (see queue_full_wait_ms).",
    )
    queue_full_wait_ms: int = Field(
        10_000,
        ge=0,
        description="When the span queue is full, the thread finishing a span waits for room for "
        "as long as the exporter makes progress (back-pressure: a fast agent is slowed to the "
        "exporter's pace instead of losing spans); a span is dropped only after the exporter made "
        "no progress for this long. 0 drops at once, as the OpenTelemetry SDK does. Drops are "
        "counted (tracing.dropped_spans()).",
    )
    flush_on_sigterm: bool = Field(
        True,
        description="When configure() runs in the main thread, install a SIGTERM handler that "
        "flushes finished spans (at most 10 s) and then does what the previous handler did "
        "(default: the process still dies of SIGTERM; a handler of yours still runs).",
    )
    instrument_clients: list[str] = Field(
        default_factory=lambda: ["auto"],
        description="LLM client SDKs whose calls are recorded as chat spans with no code: 'auto' "
        "(every supported one that is installed: " + ", ".join(SUPPORTED_LLM_CLIENTS) + "), "
        "'none', or a list of names. AGENT_RL_INSTRUMENT_CLIENTS=none switches capture off.",
    )
    rewards: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-reward settings for `agent-rl score`, by reward name: parameters given to "
        'the reward and its weight, e.g. {"efficiency": {"weight": 0.5}} (a [rewards.NAME] '
        "table in the file given to `agent-rl score --config`).",
    )

    @field_validator("db_path", mode="before")
    @classmethod
    def _empty_db_means_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() == "":
            return None
        return value

    @field_validator("instrument_clients", mode="before")
    @classmethod
    def _client_names(cls, value: Any) -> Any:
        names = [value] if isinstance(value, str) else list(value or [])
        flat = [part.strip().lower() for item in names for part in str(item).split(",") if part.strip()]
        allowed = {"auto", "none", "off", *SUPPORTED_LLM_CLIENTS}
        unknown = [name for name in flat if name not in allowed]
        if unknown:
            raise ValueError(
                f"unknown LLM client(s) {', '.join(map(repr, unknown))}: use 'auto', 'none' or some of "
                + ", ".join(SUPPORTED_LLM_CLIENTS)
            )
        return [name for name in flat if name not in ("none", "off")]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> RLConfig:
        """Build a config from ``AGENT_RL_*`` variables, then apply ``overrides`` on top."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is None and name == "db_path":
                raw = environ.get(ENV_PREFIX + "DB")
            if raw is None:
                continue
            values[name] = _parse_env_value(raw, field.annotation)
        values.update({k: v for k, v in overrides.items()})
        return cls(**values)


def _parse_env_value(raw: str, annotation: Any) -> Any:
    text = str(annotation)
    if raw.lstrip().startswith(("{", "[")):
        return json.loads(raw)  # structured values (e.g. AGENT_RL_REWARDS) as JSON
    if "dict" in text:
        pairs = [item.split("=", 1) for item in raw.split(",") if "=" in item]
        return {k.strip(): v.strip() for k, v in pairs}
    if "list" in text:
        return [item for item in raw.split(",") if item]
    return raw


def resolve_db_path(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The database a command works on: ``explicit``, else ``AGENT_RL_DB``, else the default."""
    environ = os.environ if environ is None else environ
    if explicit:
        return explicit
    return environ.get(ENV_PREFIX + "DB") or environ.get(ENV_PREFIX + "DB_PATH") or DEFAULT_DB_PATH
