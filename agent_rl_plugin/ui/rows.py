"""DuckDB results as the JSON the UI's API answers (``docs/ui.md``, "The HTTP API").

Contract: :func:`fetch_dicts` runs fixed SQL with bound parameters and returns one dict per row;
every value is JSON-safe: timestamps as ISO strings (UTC, no zone), decimals and floats as
numbers (NaN and infinities as ``None``), bytes as ``None``, and the store's JSON columns
(DuckDB type ``JSON``, and the columns of :data:`JSON_NAMES`) **parsed** (text that does not parse stays text). :func:`preview` makes the
one-line text a list shows of an input or output.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

import duckdb

PREVIEW_CHARS = 200
#: Columns of the views that hold JSON text even where their DuckDB type is VARCHAR.
JSON_NAMES = frozenset(
    {
        "input",
        "output",
        "metadata",
        "attributes",
        "events",
        "links",
        "resource",
        "input_messages",
        "output_messages",
        "finish_reasons",
        "arguments",
        "result",
        "parameters",
        "config",
        "final_metrics",
        "details",
        "metrics",
        "seconds",
    }
)


def json_value(value: Any) -> Any:
    """``value`` as something :func:`json.dumps` writes without loss of meaning (see the contract)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None
    return str(value)


def parse_json(text: Any) -> Any:
    """A JSON column's value parsed and made JSON-safe (``NaN``, ``Infinity`` and numbers too big
    for a float become ``None``). Text that is not JSON, or nested too deeply to parse, is
    returned as is."""
    if not isinstance(text, str):
        return json_value(text)
    try:
        return json_value(json.loads(text))
    except (ValueError, RecursionError):
        return text


def fetch_dicts(connection: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict]:
    """Rows of ``sql`` as JSON-safe dicts (see the module contract)."""
    cursor = connection.execute(sql, params or [])
    description = cursor.description or []
    names = [column[0] for column in description]
    is_json = [str(column[1]).upper() == "JSON" or column[0] in JSON_NAMES for column in description]
    return [
        {
            name: parse_json(value) if json_column else json_value(value)
            for name, value, json_column in zip(names, row, is_json)
        }
        for row in cursor.fetchall()
    ]


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str | None:
    """One line of text for a list: the last user message of a ``{"messages": [...]}`` input, a
    string as is, anything else as compact JSON; cut to ``limit`` characters."""
    if value is None:
        return None
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        texts = [
            m.get("content")
            for m in value["messages"]
            if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
        ]
        if texts:
            value = texts[-1]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
