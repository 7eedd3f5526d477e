"""Fitting a result set into a terminal: how each value is shown, short ids, column widths.

Pure functions with no printing; :func:`agent_rl_plugin.cli.common.print_rows` renders the
:class:`TableLayout` with rich, or, when rich would write plain text anyway
(:func:`plain_stdout`), with :func:`render_plain`, which gives the same text without importing
rich's console (start-up of ``agent-rl query``). The contract of the fitted (default) layout:

* every value is one line of text: ``None`` is empty, newlines show as ``\\n``, floats and
  decimals are rounded to :data:`SIGNIFICANT_DIGITS` significant digits, timestamps to the
  second, lists and objects as compact JSON;
* a column whose values are all ids (32 or 16 hex digits, or a UUID) shows the shortest prefix
  of at least :data:`ID_PREFIX` characters that tells the column's ids apart (a prefix is
  what ``agent-rl traces show`` and friends accept);
* the columns share the terminal width: narrow columns keep their natural width, the widest
  are cut (with an ellipsis) to what is left, none below :data:`MIN_WIDTH` (an id column not
  below its short id, the first column, usually what a row is about, not below
  :data:`KEY_WIDTH`); trailing columns that do not fit even then are left out and named in
  :attr:`TableLayout.hidden`.

The wide layout (``wide=True``) keeps every column and every value in full (ids, digits,
microseconds); only newlines are still shown as ``\\n`` so a row stays one line.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Sequence

SIGNIFICANT_DIGITS = 4
ID_PREFIX = 8
MIN_WIDTH = 14
KEY_WIDTH = 24
# box.MINIMAL_HEAVY_HEAD without edges: one space of padding each side, "│" between columns.
COLUMN_GAP = 3

#: Characters a terminal acts on rather than shows: C0 controls other than tab/newline/CR
#: (handled first), DEL, C1 controls (U+0080-U+009F, ``\\x9b`` is a CSI), and the bidirectional
#: marks, embeddings, overrides and isolates, plus line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{16}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


@dataclass
class TableLayout:
    """What to draw: the shown ``columns`` with their ``widths`` (in terminal cells), the
    ``cells`` of each row (text, one line each, shown columns only), which shown columns are
    ``numeric`` (right-aligned), and the names of the ``hidden`` trailing columns."""

    columns: list[str]
    widths: list[int]
    cells: list[list[str]]
    numeric: list[bool]
    hidden: list[str] = field(default_factory=list)

    @property
    def total_width(self) -> int:
        """The width of a rendered line: the columns plus padding and separators."""
        return table_width(self.widths)


def table_width(widths: Sequence[int]) -> int:
    """The rendered width of a table with these column widths (0 for no columns)."""
    return sum(widths) + COLUMN_GAP * len(widths) - 1 if widths else 0


def round_float(value: float, digits: int = SIGNIFICANT_DIGITS) -> str:
    """``value`` with ``digits`` significant digits: ``0.1235``, ``12.35``, ``1235``; whole
    numbers keep one decimal (``1.0``); ``123457`` from 1e4 up (no exponent for durations or
    token counts); an exponent only below 1e-4 or from 1e15 up; ``nan``/``inf`` as is."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if value.is_integer() and magnitude < 1e15:
        return f"{value:.1f}"
    if magnitude >= 1e15 or magnitude < 1e-4:
        return f"{value:.{digits - 1}e}"
    if magnitude >= 10**digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def display_value(value: Any, wide: bool = False) -> str:
    """One line of text for a table cell (see the module docstring); ``wide`` keeps full
    precision. Never raises: anything else is shown with ``str``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal) and value.is_finite() and value.as_tuple().exponent == 0:
        return str(int(value))  # an integer DuckDB returns as DECIMAL(38,0), e.g. sum() of a count
    if isinstance(value, (float, Decimal)) and not wide:
        return round_float(float(value))
    if isinstance(value, datetime):
        text = value.isoformat(sep=" ", timespec="auto" if wide else "seconds")
    elif isinstance(value, (date, time)):
        text = value.isoformat()
    elif isinstance(value, (bytes, bytearray)):
        text = value.hex()
    elif isinstance(value, (dict, list, tuple)):
        text = _compact_json(value)
    else:
        text = str(value)
    return _one_line(text)


def _compact_json(value: Any) -> str:
    def default(item: Any) -> Any:
        return item.isoformat() if isinstance(item, (datetime, date, time)) else str(item)

    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default)
    except ValueError:  # a circular structure: not from a database, but never fail a listing
        return str(value)


def _one_line(text: str) -> str:
    if "\n" in text or "\r" in text or "\t" in text:
        text = text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r").replace("\t", " ")
    return _UNSAFE.sub(_escape_char, text)


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible_text(text: str) -> str:
    """``text`` as one line that is safe to print on a terminal: newlines as ``\\n``, ``\\r``,
    tabs as a space, and every other control character (C0, DEL, C1: ESC starting colour,
    cursor, clear-screen or OSC 8 hyperlink sequences) and bidirectional override written out as
    ``\\x1b`` / ``\\u202e``, so stored values cannot move the cursor, recolour, retitle or
    reorder what the terminal shows. Every table cell and column name goes through it."""
    return _one_line(text)


def is_id(value: Any) -> bool:
    """Whether ``value`` looks like an id: 32 or 16 hex digits, or a UUID."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def short_id_length(ids: Sequence[str], minimum: int = ID_PREFIX) -> int:
    """The shortest prefix length, at least ``minimum``, at which the distinct ``ids`` stay
    distinct (the full length when they never do)."""
    distinct = set(ids)
    longest = max((len(i) for i in distinct), default=0)
    length = min(minimum, longest)
    while length < longest and len({i[:length] for i in distinct}) < len(distinct):
        length += 1
    return length


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def layout_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None, wide: bool = False
) -> TableLayout:
    """Lay ``rows`` out for a terminal ``width`` cells wide (see the module docstring).

    ``width=None`` or ``wide=True``: every column at its natural width, values in full.
    Otherwise the rendered width (:attr:`TableLayout.total_width`) is at most ``width``
    whenever the first column fits at all; a first column wider than the terminal is still
    shown, cut to what fits (at least one cell)."""
    names = [visible_text(str(c)) for c in columns]
    values = [[row[i] if i < len(row) else None for row in rows] for i in range(len(names))]
    texts = [[display_value(v, wide) for v in column] for column in values]
    is_id_column = [False] * len(names)
    if not wide:
        for i, column in enumerate(values):
            present = [v for v in column if v is not None]
            if present and all(is_id(v) for v in present):
                length = short_id_length(present)
                texts[i] = [t[:length] for t in texts[i]]
                is_id_column[i] = True
    numeric = [
        any(v is not None for v in column) and all(v is None or _is_number(v) for v in column) for column in values
    ]
    natural = [max([cell_len(name)] + [cell_len(t) for t in column]) for name, column in zip(names, texts)]
    if wide or width is None or table_width(natural) <= width:
        return TableLayout(names, natural, _transpose(texts, len(rows)), numeric)
    minimum = [n if is_id_column[i] else min(n, KEY_WIDTH if i == 0 else MIN_WIDTH) for i, n in enumerate(natural)]
    shown = 1
    while shown < len(names) and table_width(minimum[: shown + 1]) <= width:
        shown += 1
    available = max(width - table_width([0] * shown), shown)
    widths = _share(natural[:shown], minimum[:shown], available)
    return TableLayout(names[:shown], widths, _transpose(texts[:shown], len(rows)), numeric[:shown], names[shown:])


def _share(natural: list[int], minimum: list[int], available: int) -> list[int]:
    """Widths summing to at most ``available``: columns narrower than a common cap keep their
    natural width, the others get the cap (never below their minimum), and cells left over go
    one each to the cut columns, first ones first."""
    if sum(natural) <= available:
        return list(natural)
    if sum(minimum) >= available:
        if len(natural) == 1:
            return [max(1, available)]
        return list(minimum)

    def used(cap: int) -> int:
        return sum(min(n, max(m, cap)) for n, m in zip(natural, minimum))

    low, high = 0, max(natural)
    while low < high:  # the largest cap that fits
        middle = (low + high + 1) // 2
        if used(middle) <= available:
            low = middle
        else:
            high = middle - 1
    widths = [min(n, max(m, low)) for n, m in zip(natural, minimum)]
    spare = available - sum(widths)
    for i, n in enumerate(natural):
        if spare <= 0:
            break
        if widths[i] < n:
            widths[i] += 1
            spare -= 1
    return widths


def _one_cell_each(text: str) -> bool:
    """Whether every character of ``text`` takes one cell in rich: printable ASCII, and the
    ellipsis the layout cuts values with."""
    return text.isprintable() and text.replace("\u2026", "").isascii()


def cell_len(text: str) -> int:
    """The cells ``text`` takes as rich counts them (:func:`rich.cells.cell_len`): its length
    when each character takes one cell (:func:`_one_cell_each`, what rich's own shortcut
    gives), else rich's answer (rich's character-width table is imported only then)."""
    if _one_cell_each(text):
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def set_cell_size(text: str, total: int) -> str:
    """``text`` cut or padded to ``total`` cells as rich does (:func:`rich.cells.set_cell_size`),
    without rich when each character takes one cell."""
    if _one_cell_each(text):
        return text[:total] if len(text) >= total else text + " " * (total - len(text))
    from rich.cells import set_cell_size as rich_set_cell_size

    return rich_set_cell_size(text, total)


def _transpose(columns: list[list[str]], n_rows: int) -> list[list[str]]:
    return [[column[r] for column in columns] for r in range(n_rows)]


# What rich draws for box.MINIMAL_HEAVY_HEAD without edges: columns apart, the rule under the head.
_BAR, _RULE, _CROSS = "\u2502", "\u2501", "\u253f"
_MARKUP_OR_EMOJI = re.compile(r"[\[\]:]")


def plain_stdout() -> bool:
    """Whether rich, asked to print on ``sys.stdout`` with its defaults, would write plain text
    (no colour or style codes, Unicode box characters, nothing but text): stdout is not a
    terminal (``isatty()`` false), writes UTF-8, and none of what makes rich decide otherwise
    is in play (``FORCE_COLOR``, ``TTY_COMPATIBLE``, ``TTY_INTERACTIVE``, Jupyter, Windows).
    Errs towards ``False``: rich then prints as always."""
    environ = os.environ
    if os.name == "nt" or hasattr(builtins, "get_ipython"):
        return False
    if any(name in environ for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")):
        return False
    stream = sys.stdout
    encoding = getattr(stream, "encoding", None) or ""
    if not encoding.lower().startswith("utf"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:  # a closed stream: let rich decide
        return False


def _plain_text(text: str) -> bool:
    """Whether rich prints ``text`` as it is: printable characters only (no tab it would expand)
    and no leading or trailing whitespace (which rich strips in places)."""
    return text.isprintable() and text == text.strip()


def _plain_cell(text: str, width: int, right: bool) -> str:
    """A cell as rich draws it: cut to ``width`` cells with an ellipsis, padded to ``width``."""
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1) + "\u2026"
    pad = " " * (width - cell_len(text))
    return pad + text if right else text + pad


def wrap_like_rich(text: str, width: int) -> list[str] | None:
    """The lines rich's console prints ``text`` as on a console ``width`` cells wide (its word
    wrap: a word that does not fit starts a line, a wrapped line keeps the space after its last
    word when it fits), or ``None`` for what this does not reproduce: text that is not ASCII,
    whitespace other than single spaces, a word wider than the console. ``text`` is stripped."""
    if width < 1 or not text.isascii() or "  " in text or not all(c == " " or not c.isspace() for c in text):
        return None
    words = [word + " " for word in text.split(" ")]
    words[-1] = words[-1][:-1]
    lines: list[str] = []
    line, position = "", 0
    for word in words:
        if len(word.rstrip(" ")) > width:
            return None
        if position and position + len(word.rstrip(" ")) > width:
            lines.append(line[:width])
            line, position = "", 0
        line += word
        position += len(word)
    lines.append(line)
    return lines


def render_plain(layout: TableLayout, title: str | None, notes: str, width: int) -> str | None:
    """The text rich prints for ``layout`` (as :func:`agent_rl_plugin.cli.common.print_rows`
    draws it: ``box.MINIMAL_HEAVY_HEAD`` without edges, numeric columns right-aligned, ``title``
    centred above) followed by the ``notes`` (wrapped as rich wraps them: :func:`wrap_like_rich`)
    on a console ``width`` cells wide, when rich writes plain text (:func:`plain_stdout`).
    ``None`` for what it does not reproduce (rich then draws it): a title rich would wrap, notes
    :func:`wrap_like_rich` does not wrap, markup or emoji codes in the title, text rich would
    change (control characters, tabs, leading or trailing spaces), a zero width."""
    texts = [*layout.columns, *(t for row in layout.cells for t in row)]
    note_lines = wrap_like_rich(notes, width) if _plain_text(notes) else None
    if not all(_plain_text(t) for t in texts if t) or note_lines is None:
        return None
    if any(w < 1 for w in layout.widths) or any(len(row) != len(layout.widths) for row in layout.cells):
        return None
    lines: list[str] = []
    if layout.columns:
        total = layout.total_width
        if title:
            size = cell_len(title)
            if _MARKUP_OR_EMOJI.search(title) or not _plain_text(title) or size > total:
                return None
            left = (total - size) // 2
            lines.append(" " * left + title + " " * (total - size - left))
        for row in [layout.columns, *layout.cells]:
            cells = (_plain_cell(t, w, right) for t, w, right in zip(row, layout.widths, layout.numeric))
            lines.append(_BAR.join(f" {cell} " for cell in cells))
            if row is layout.columns:
                lines.append(_CROSS.join(_RULE * (w + 2) for w in layout.widths))
    lines.extend(note_lines)
    return "\n".join(lines) + "\n"
