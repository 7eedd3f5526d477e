"""Finished OTel spans -> columns of the ``spans`` table (and rows of ``rewards``).

Contract:

* :meth:`SpanConverter.convert` never raises: a span that cannot be converted (no context, an
  attribute transform or encoder failure it cannot recover from) is left out and counted in
  :attr:`SpanBatch.failed`, with the first error of each kind passed to ``on_error``.
* Attributes go through the attribute transform (redaction etc., ``fn(attrs, span_name) ->
  attrs``; it also applies to event attributes) and then through every normaliser
  (``fn(attrs, span_name) -> None``, adding keys in place; span attributes only).
* When the transform has a ``redactor`` attribute (a :class:`~agent_rl_plugin.redaction.Redactor`,
  as :func:`~agent_rl_plugin.transform.make_attribute_transform` gives it), the stored span name,
  status message (also one completed from an exception event), event names, link attributes
  and resource attributes (so ``service_name`` too) are masked with it. Transforms and
  normalisers still receive the original span name.
* Each attribute dict (and each span's event list) is encoded with **one** JSON encode call
  (:mod:`agent_rl_plugin.store.encoding`: unencodable values as safe repr, NaN as text, values
  over ``max_attribute_size`` cut with the truncation marker). Text UTF-8 cannot hold (lone
  surrogates) is replaced by U+FFFD.
* Spans are checked first (:mod:`agent_rl_plugin.store.validation`): all-zero ids are refused
  (counted in :attr:`SpanBatch.invalid` and ``failed``), an end before the start is set to the
  start, and attributes beyond ``max_span_attributes_size`` characters per span are capped
  (counted in :attr:`SpanBatch.truncated`).
* Timestamps stay integer nanoseconds here, and the denormalised columns (rollout id, ...) are
  read from the attributes JSON by the SQL insert (vectorised, in the writer thread).
* A span with status ERROR that lacks a status description or ``error.type`` (pydantic-ai
  records the exception only as an event; OpenInference and Traceloop give a description but
  the exception type only in the event) completes them from its last ``exception`` event:
  ``error.type`` = ``exception.type`` (added to the attributes) and the status message
  ``"exception.type: exception.message"``, so the views' ``error_type`` / ``error`` columns show
  them. Present values are kept; other spans pay one comparison.
* ``gen_ai.evaluation.result`` events become ``rewards`` rows (source ``emitted`` unless the
  event says otherwise), whose ``reward_id`` is a uuid5 of trace id, span id and event position,
  so ingesting the same span twice yields the same id.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.serialize import truncate
from agent_rl_plugin.store import arrow_columns
from agent_rl_plugin.store.encoding import c_iterencode, clean_text, encode_attributes, encode_json, fast_encode
from agent_rl_plugin.store.span_parts import REWARD_NAMESPACE, HexIds, reward_row, span_fields, str_or_none
from agent_rl_plugin.store.validation import (
    DROPPED_ATTRIBUTES,
    MAX_SPAN_ATTRIBUTES_SIZE,
    InvalidSpan,
    cap_attributes,
    fix_times,
)

AttributeTransform = Callable[[dict[str, Any], str], dict[str, Any]]
Normalizer = Callable[[dict[str, Any], str], None]
ErrorCallback = Callable[[str, BaseException], None]

#: The OTel exception event (``span.record_exception``) and the attributes read from it.
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"

__all__ = ["REWARD_NAMESPACE", "SPAN_SCHEMA", "REWARD_SCHEMA", "SpanBatch", "SpanConverter", "rewards_to_table"]

#: Arrow schema of a converted batch; the INSERT in :mod:`~agent_rl_plugin.store.batch` maps it
#: onto the ``spans`` table, deriving the timestamps and the denormalised columns (rollout_id,
#: task_id, group_id, is_rollout_root, operation, span_kind) from these in SQL.
SPAN_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("parent_span_id", pa.string()),
        ("name", pa.string()),
        ("kind", pa.string()),
        ("status_code", pa.string()),
        ("status_message", pa.string()),
        ("attributes", pa.string()),
        ("events", pa.string()),
        ("links", pa.string()),
        ("resource", pa.string()),
        ("scope_name", pa.string()),
        ("scope_version", pa.string()),
        ("service_name", pa.string()),
        ("start_unix_nano", pa.int64()),
        ("end_unix_nano", pa.int64()),
    ]
)

REWARD_SCHEMA = pa.schema(
    [
        ("reward_id", pa.string()),
        ("rollout_id", pa.string()),
        ("step_index", pa.int32()),
        ("name", pa.string()),
        ("value", pa.float64()),
        ("label", pa.string()),
        ("reason", pa.string()),
        ("metrics", pa.string()),
        ("source", pa.string()),
        ("created_unix_nano", pa.int64()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
    ]
)


@dataclass
class SpanBatch:
    """Converted spans ready for one INSERT, plus the rewards their events carried."""

    spans: pa.Table
    rewards: pa.Table | None = None
    failed: int = 0  #: spans left out (``invalid`` of them refused by the checks)
    invalid: int = 0
    truncated: int = 0  #: spans whose attributes were capped (kept, with a dropped count)

    @property
    def num_spans(self) -> int:
        return self.spans.num_rows


def _triggers(normalizers: Sequence[tuple[str, Normalizer]]) -> frozenset[str] | None:
    """The keys without any of which no normaliser of ``normalizers`` does anything: the union of
    their ``triggers`` (see :data:`~agent_rl_plugin.store.normalizers.precedence.TRIGGERS_ATTRIBUTE`);
    ``None`` when one has none (it must always run). A span holding none of the keys leaves each
    normaliser in turn without a key to act on, so none would change it."""
    union: set[str] = set()
    for _, normalize in normalizers:
        triggers = getattr(normalize, "triggers", None)
        if not isinstance(triggers, (frozenset, set)):
            return None
        union |= triggers
    return frozenset(union)


class SpanConverter:
    """Turns ``ReadableSpan`` objects into :class:`SpanBatch` es (see the module contract).

    Safe to call from several threads: its only state, a cache of encoded resources, tolerates
    races (at worst a resource is encoded twice)."""

    def __init__(
        self,
        *,
        transform: AttributeTransform | None = None,
        normalizers: Sequence[tuple[str, Normalizer]] = (),
        max_attribute_size: int | None = None,
        on_error: ErrorCallback | None = None,
        max_span_attributes_size: int | None = MAX_SPAN_ATTRIBUTES_SIZE,
    ) -> None:
        self.transform = transform
        self.normalizers = normalizers
        self.max_attribute_size = max_attribute_size
        self.max_span_attributes_size = max_span_attributes_size
        self._truncated = threading.local()
        self._truncated.count = 0
        self.on_error = on_error
        self._resources: dict[int, tuple[Any, str, str | None, Any]] = {}

    @property
    def transform(self) -> AttributeTransform | None:
        """The attribute transform (``None``: attributes stored as they are). When it has an
        ``unchanged(attributes) -> bool`` attribute (see
        :func:`~agent_rl_plugin.transform.make_attribute_transform`), a mapping for which that is
        True is kept as it is instead of going through the transform (which would copy it and
        return an equal mapping)."""
        return self._transform

    @transform.setter
    def transform(self, transform: AttributeTransform | None) -> None:
        self._transform = transform
        self._unchanged: Callable[[Mapping[str, Any]], bool] | None = getattr(transform, "unchanged", None)
        self._unchanged_all: Callable[[Sequence[Mapping[str, Any]]], bool] | None = getattr(
            transform, "unchanged_all", None
        )

    def _transformed(self, attrs: dict[str, Any], span_name: str, known_unchanged: bool = False) -> dict[str, Any]:
        """``attrs`` (the caller's copy) after the transform, which must be set; ``known_unchanged``:
        the batch check (``unchanged_all``) already holds for ``attrs``, so they are kept."""
        if known_unchanged:
            return attrs
        unchanged = self._unchanged
        if unchanged is not None and unchanged(attrs):
            return attrs
        return self._transform(attrs, span_name)  # type: ignore[misc]  # set: see the callers

    @property
    def normalizers(self) -> list[tuple[str, Normalizer]]:
        """The ``(name, normalize)`` pairs applied to each span's attributes, in order."""
        return self._normalizers

    @normalizers.setter
    def normalizers(self, normalizers: Sequence[tuple[str, Normalizer]]) -> None:
        self._normalizers = list(normalizers)
        self._triggers = _triggers(self._normalizers)

    # --- pieces ---------------------------------------------------------------------------
    def _resource(self, resource: Any, redactor: Any = None) -> tuple[str, str | None]:
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource and cached[3] is redactor:
            return cached[1], cached[2]
        attrs = dict(resource.attributes) if resource is not None else {}
        if redactor is not None:
            redactor.redact_attributes(attrs)
        text = encode_json(attrs)
        service = str_or_none(attrs.get("service.name"))
        if len(self._resources) > 64:
            self._resources.clear()
        self._resources[id(resource)] = (resource, text, service, redactor)
        return text, service

    def _normalize(self, attrs: dict[str, Any], name: str) -> None:
        for label, normalize in self.normalizers:
            try:
                normalize(attrs, name)
            except Exception as exc:  # a broken normaliser never loses the span
                if self.on_error is not None:
                    self.on_error(f"normalizer {label}", exc)

    def _events(
        self,
        events: Sequence[Any],
        span_name: str,
        trace_hex: str,
        span_hex: str,
        rollout_id: str,
        rewards: list[dict[str, Any]],
        redactor: Any = None,
        known_unchanged: bool = False,
    ) -> str:
        transform = self.transform
        out = []
        names = [event.name for event in events]
        if redactor is not None:
            names = [redactor.redact_name(n) if isinstance(n, str) else n for n in names]
        for position, event in enumerate(events):
            event_attrs = dict(event.attributes or {})
            if transform is not None:
                event_attrs = self._transformed(event_attrs, span_name, known_unchanged)
            out.append({"name": names[position], "time": event.timestamp, "attributes": event_attrs})
            if event.name == sc.EVENT_EVALUATION_RESULT:
                rewards.append(reward_row(event_attrs, event.timestamp, trace_hex, span_hex, position, rollout_id))
        text = encode_json(out)
        if self.max_attribute_size is not None and len(text) > self.max_attribute_size:
            for item in out:
                item["attributes"] = json.loads(encode_attributes(item["attributes"], self.max_attribute_size))
            text = encode_json(out)
        return text

    def _exception_error(
        self,
        events: Sequence[Any],
        attrs: dict[str, Any],
        span_name: str,
        message: str | None,
        known_unchanged: bool = False,
    ) -> str | None:
        """The status message of a failed span, completed from its last ``exception`` event
        when it lacks a status message or ``error.type``: a missing ``error.type`` in ``attrs``
        becomes ``exception.type``, a missing ``message`` ``"type: message"`` (either alone when
        the other is absent), cut at ``max_attribute_size``. The event's attributes go through
        the attribute transform first, as when stored. Returns ``message`` when there is no
        event."""
        for event in reversed(events):
            if event.name == EXCEPTION_EVENT:
                break
        else:
            return message
        event_attrs = dict(event.attributes or {})
        if self.transform is not None:
            event_attrs = self._transformed(event_attrs, span_name, known_unchanged)
        kind = str_or_none(event_attrs.get(EXCEPTION_TYPE)) or None
        if kind is not None and sc.ERROR_TYPE not in attrs:
            attrs[sc.ERROR_TYPE] = kind
        if message is None:
            text = str_or_none(event_attrs.get(EXCEPTION_MESSAGE)) or None
            message = f"{kind}: {text}" if kind and text else kind or text
            if message is not None and self.max_attribute_size is not None:
                message = truncate(message, self.max_attribute_size)
        return message

    @staticmethod
    def _links(links: Sequence[Any], redactor: Any = None) -> str:
        if not links:
            return "[]"
        out = [
            {
                "trace_id": f"{link.context.trace_id:032x}",
                "span_id": f"{link.context.span_id:016x}",
                "attributes": dict(link.attributes or {}),
            }
            for link in links
        ]
        if redactor is not None:
            for item in out:
                redactor.redact_attributes(item["attributes"])
        return encode_json(out)

    # --- one span -------------------------------------------------------------------------
    def _encode_attributes(self, attrs: dict[str, Any]) -> str:
        # The common case inline (one C encoder call); anything unusual goes the careful way.
        try:
            text = "".join(c_iterencode(attrs, 0)) if c_iterencode is not None else fast_encode(attrs)
        except Exception:
            return encode_attributes(attrs, self.max_attribute_size)
        if self.max_attribute_size is not None and len(text) > self.max_attribute_size:
            return encode_attributes(attrs, self.max_attribute_size)
        return text

    def _encode_capped(self, attrs: dict[str, Any]) -> str:
        """The attributes' JSON (:meth:`_encode_attributes`), capped at ``max_span_attributes_size``
        (counted in the batch's ``truncated``)."""
        text = self._encode_attributes(attrs)
        budget = self.max_span_attributes_size
        if budget is not None and len(text) > budget:
            text = cap_attributes(attrs, budget, self._encode_attributes)
            self._truncated.count += 1
        return text

    def _row(
        self,
        fields: tuple[Any, ...],
        rewards: list[dict[str, Any]],
        known_unchanged: bool = False,
        hexes: HexIds | None = None,
    ) -> tuple[Any, ...]:
        """One row of :data:`SPAN_SCHEMA` from a span's :func:`span_fields` (rewards of its events
        appended to ``rewards``); ``known_unchanged``: the transform's batch check holds for the
        span's and its events' attributes (they are kept as they are); ``hexes``: the batch's
        memory of hex ids."""
        (context, parent, name, attrs, events, links, resource, scope, status, kind, start, end) = fields
        if hexes is None:
            hexes = HexIds()
        trace_id, span_id, trace_hex, span_hex = hexes.ids(context)  # InvalidSpan for all-zero ids
        if start is not None and end is not None and end < start:
            end = fix_times(attrs, start, end)
        redactor = None
        transform = self._transform
        if transform is not None:
            if not known_unchanged:
                attrs = self._transformed(attrs, name)
            redactor = getattr(transform, "redactor", None)
        if self._normalizers and (self._triggers is None or not self._triggers.isdisjoint(attrs)):
            self._normalize(attrs, name)
        if events:
            rollout_id = attrs.get(sc.ROLLOUT_ID)
            rollout_id = trace_hex if rollout_id is None else str(rollout_id)
            events_json = self._events(
                events, name, trace_hex, span_hex, rollout_id, rewards, redactor, known_unchanged
            )
        else:
            events_json = "[]"
        resource_json, service = self._resource(resource, redactor)
        status_code = getattr(status.status_code, "_name_", None) or "UNSET"
        status_message = status.description or None
        if status_code == "ERROR" and events and (status_message is None or sc.ERROR_TYPE not in attrs):
            status_message = self._exception_error(events, attrs, name, status_message, known_unchanged)
        stored_name = name if type(name) is str else name if isinstance(name, str) else str(name)
        if redactor is not None:
            stored_name = redactor.redact_name(stored_name)
            if status_message:
                status_message = redactor.redact(status_message)
        text = self._encode_capped(attrs)
        return (
            trace_hex,
            span_hex,
            hexes.parent(parent),
            stored_name,
            getattr(kind, "_name_", None) or str(kind),
            status_code,
            status_message,
            text,
            events_json,
            self._links(links, redactor) if links else "[]",
            resource_json,
            None if scope is None else scope.name,
            None if scope is None else scope.version,
            service,
            start,
            end,
        )

    # --- a batch --------------------------------------------------------------------------
    def _batch_unchanged(self, fetched: list[Any]) -> bool:
        """True when the transform's ``unchanged_all`` holds for the span and event attributes of
        every span of ``fetched`` (one check for the batch; see :mod:`agent_rl_plugin.transform`);
        False means each mapping is checked on its own, as without the batch check."""
        unchanged_all = self._unchanged_all
        if self._transform is None or unchanged_all is None:
            return False
        mappings: list[Mapping[str, Any]] = []
        add = mappings.append
        for fields in fetched:
            if isinstance(fields, Exception):
                continue
            add(fields[3])
            for event in fields[4]:
                event_attrs = event.attributes
                if event_attrs:
                    add(event_attrs._dict if type(event_attrs) is BoundedAttributes else event_attrs)
        try:
            return bool(unchanged_all(mappings))
        except Exception:  # a transform whose check fails: each span goes the usual way
            return False

    def convert(self, spans: Iterable[ReadableSpan]) -> SpanBatch:
        """Convert ``spans``; failures are counted, never raised (see the module contract)."""
        fetched: list[Any] = []  # per span: its fields, or the exception reading them raised
        for span in spans:
            try:
                fetched.append(span_fields(span))
            except Exception as exc:
                fetched.append(exc)
        return self.convert_fields(fetched)

    def convert_fields(self, fetched: list[Any]) -> SpanBatch:
        """Convert spans given as their :func:`~agent_rl_plugin.store.span_parts.span_fields`
        tuples (an exception in place of one is a span that failed to read, counted as such);
        what :meth:`convert` does after reading each span. The tuples' attribute dicts are the
        converter's to change. A tuple's context may be a ``(trace hex, span hex)`` pair and its
        parent a hex ``str`` (see :class:`~agent_rl_plugin.store.span_parts.HexIds`)."""
        rows: list[tuple[Any, ...]] = []
        rewards: list[dict[str, Any]] = []
        failed = invalid = 0
        row = self._row
        self._truncated.count = 0
        known_unchanged = self._batch_unchanged(fetched)
        hexes = HexIds()
        for fields in fetched:
            n_rewards = len(rewards)
            try:
                if isinstance(fields, Exception):
                    raise fields
                rows.append(row(fields, rewards, known_unchanged, hexes))
            except Exception as exc:
                del rewards[n_rewards:]
                failed += 1
                invalid += isinstance(exc, InvalidSpan)
                if self.on_error is not None:
                    self.on_error("invalid span" if isinstance(exc, InvalidSpan) else "convert", exc)
        truncated = self._truncated.count
        if truncated and self.on_error is not None:
            self.on_error(
                "span size",
                ValueError(
                    f"{truncated} spans had more than {self.max_span_attributes_size} characters of attributes: "
                    f"kept the store's own keys and what fit (the rest counted in {DROPPED_ATTRIBUTES})"
                ),
            )
        try:
            table = rows_to_table(rows)
        except _CONVERT_ERRORS as exc:  # e.g. lone surrogates from os.fsdecode, a time beyond int64
            table, dropped = _table_row_by_row(rows)  # repairs text; drops only rows it cannot
            failed += dropped
            if dropped and self.on_error is not None:
                self.on_error("encode", exc)
            if dropped:
                kept = set(zip(table["trace_id"].to_pylist(), table["span_id"].to_pylist()))
                rewards = [r for r in rewards if (r["trace_id"], r["span_id"]) in kept]
        try:
            reward_table = rewards_to_table(rewards)
        except (UnicodeError, pa.ArrowException):
            reward_table = rewards_to_table([{k: clean_text(v) for k, v in r.items()} for r in rewards])
        return SpanBatch(spans=table, rewards=reward_table, failed=failed, invalid=invalid, truncated=truncated)


def rows_to_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    """An Arrow table with :data:`SPAN_SCHEMA` from row tuples (transposed in one pass)."""
    if not rows:
        return SPAN_SCHEMA.empty_table()
    return arrow_columns.table(zip(*rows), SPAN_SCHEMA)


#: What Arrow raises for a row it cannot hold (bad text, an integer beyond int64, a wrong type).
_CONVERT_ERRORS = (UnicodeError, OverflowError, ValueError, TypeError, pa.ArrowException)


def _table_row_by_row(rows: list[tuple[Any, ...]]) -> tuple[pa.Table, int]:
    """Fallback when the batch does not convert: clean the rows that fail; drop what still fails."""
    kept: list[tuple[Any, ...]] = []
    dropped = 0
    for row in rows:
        try:
            rows_to_table([row])
        except _CONVERT_ERRORS:
            row = tuple(clean_text(v) for v in row)
            try:
                rows_to_table([row])
            except _CONVERT_ERRORS:
                dropped += 1
                continue
        kept.append(row)
    return rows_to_table(kept), dropped


def rewards_to_table(rows: list[dict[str, Any]]) -> pa.Table | None:
    """An Arrow table with :data:`REWARD_SCHEMA`, or ``None`` for no rows."""
    if not rows:
        return None
    return arrow_columns.table(([row.get(f.name) for row in rows] for f in REWARD_SCHEMA), REWARD_SCHEMA)
