"""How ``agent-rl serve`` converts spans into rows: the one definition its serving process and its
decode workers (:mod:`.workers`) both use, and the fingerprint that shows two processes agree.

This module loads no DuckDB (a decode worker imports it)."""

from __future__ import annotations

from typing import Any, Callable

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.redaction import Redactor
from agent_rl_plugin.store.exporter import collect_normalizers
from agent_rl_plugin.store.rows import Normalizer, SpanConverter
from agent_rl_plugin.transform import make_attribute_transform


def receiver_converter(max_attribute_size: int | None, report: Callable[[str, BaseException], None]) -> SpanConverter:
    """The converter of a receiver that was given no ``transform`` or ``normalizers``: the
    ``agent_rl_transform_attributes`` transform of the ``AGENT_RL_*`` config (with its redactor)
    and every registered normaliser, as the in-process exporter has them. A bad variable or a
    broken plugin is reported (``report(kind, exc)``) and never switches redaction off: the
    defaults (redaction on) or the config's own patterns are used instead."""
    return SpanConverter(
        transform=config_transform(report),
        normalizers=registered_normalizers(report),
        max_attribute_size=max_attribute_size,
        on_error=report,
    )


def registered_normalizers(report: Callable[[str, BaseException], None]) -> list[tuple[str, Normalizer]]:
    """Every ``agent_rl_register_normalizers`` normaliser; none when the hooks fail (reported)."""
    try:
        return collect_normalizers()
    except Exception as exc:  # a broken plugin must not stop the receiver
        report("normalizers", exc)
        return []


def config_transform(report: Callable[[str, BaseException], None]) -> Any:
    """The attribute transform (with its redactor) of the ``AGENT_RL_*`` config; with
    unreadable variables, of the defaults (redaction on), never none at all."""
    try:
        config = RLConfig.from_env()
    except Exception as exc:  # a bad variable must not switch redaction off
        report("config", exc)
        config = RLConfig()
    try:
        return make_attribute_transform(config)
    except Exception as exc:  # a broken plugin manager: still redact with the config's patterns
        report("transform", exc)
    redactor = Redactor([*config.redaction_patterns, *config.redact_patterns]) if config.redact else None

    def redact_only(attributes: dict[str, Any], span_name: str) -> dict[str, Any]:
        copy = dict(attributes)
        if redactor is not None:
            redactor.redact_attributes(copy)
        return copy

    redact_only.redactor = redactor  # type: ignore[attr-defined]
    return redact_only


def converter_fingerprint(converter: SpanConverter) -> dict[str, Any]:
    """What decides how ``converter`` turns spans into rows, as JSON-ready values: its
    normalisers (names and functions), attribute transform functions, redaction patterns and
    attribute size limit. Two processes whose converters have equal fingerprints store a span as
    the same row (how the receiver checks its decode workers, see :mod:`.workers`)."""

    def name(function: Any) -> str:
        return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', repr(function))}"

    transform = converter.transform
    redactor = getattr(transform, "redactor", None)
    return {
        "normalizers": [[label, name(function)] for label, function in converter.normalizers],
        "transform": name(transform) if transform is not None else None,
        "transform_functions": [name(f) for f in getattr(transform, "functions", ())],
        "redaction": list(redactor.patterns) if redactor is not None else None,
        "max_attribute_size": converter.max_attribute_size,
    }
