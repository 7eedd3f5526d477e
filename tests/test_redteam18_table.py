"""Red team (issue 18): stored values must not reach the terminal as control sequences.

Before the fix a value (or a column name, or a rollout id in ``score --explain``'s title) with
ESC sequences (clear screen, colours, OSC 8 hyperlinks), C1 controls or bidi overrides was
printed raw by the fitted tables; ``COLUMNS=0`` laid every table out one cell wide.
Real rich rendering through ``print_rows`` and the real command line on a real store.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len
from score_support import agent_rl

import agent_rl_plugin as arl
from agent_rl_plugin.cli.common import print_rows, terminal_width
from agent_rl_plugin.cli.table_layout import display_value, layout_table, visible_text

EVIL = [
    "\x1b[2J\x1b[31mred",
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "\u202egnp.exe",
    "\x07bell\x08back\x9b31m",
    "\x00nul\x7fdel\u2066iso\u2069",
]
FORBIDDEN = set("\x1b\x9b\x07\x08\x00\x7f\u202e\u2066\u2069")


def forbidden_in(text: str) -> set[str]:
    return FORBIDDEN & set(text)


@pytest.mark.parametrize("value", EVIL)
def test_display_value_writes_control_characters_out(value):
    for wide in (False, True):
        shown = display_value(value, wide)
        assert not forbidden_in(shown)
        assert "\n" not in shown and "\r" not in shown
    assert visible_text("\x1b[31m") == "\\x1b[31m" and visible_text("\u202e") == "\\u202e"


@pytest.mark.parametrize("wide", [False, True])
def test_print_rows_never_prints_a_control_sequence(wide, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    print_rows(["value\x1b[5m", "n"], [[v, i] for i, v in enumerate(EVIL)], wide=wide)
    out = capsys.readouterr().out
    assert not forbidden_in(out)
    assert "\\x1b]8;;http://evil.example" in out or wide is False  # shown, as text
    if not wide:
        assert max(cell_len(line) for line in out.splitlines()) <= 80


def test_column_names_are_written_out_too():
    layout = layout_table(["a\x1b[2Jb"], [["x"]], 80)
    assert layout.columns == ["a\\x1b[2Jb"]


def test_a_zero_width_terminal_falls_back_to_80(monkeypatch):
    import agent_rl_plugin.cli.common as common
    from rich.console import Console

    common.console  # noqa: B018 - made on first use: made now, with this process's own COLUMNS, for the tests after
    monkeypatch.setenv("COLUMNS", "0")
    monkeypatch.setattr(common, "console", Console(width=0))
    assert terminal_width() == 80


def test_explain_does_not_print_a_stored_rollout_id_or_name_raw(db_path: Path, plugin_manager):
    rollout_id = "rx-\x1b]8;;http://evil.example\x1b\\id\x1b[2J"
    arl.configure(db=str(db_path), export_delay_ms=50)
    with arl.rollout(task_id="t", rollout_id=rollout_id):
        arl.record_llm_call("m", [{"role": "user", "content": "?"}], "x")
        arl.emit_reward(0.25, name="fb\x1b[31m[red]x")
    assert arl.flush()
    arl.shutdown()
    result = agent_rl("score", "--db", str(db_path), "--explain", "rx-")
    assert result.exit_code == 0, result.output
    assert not forbidden_in(result.output)
    assert "\\x1b]8;;http://evil.example" in result.output and "fb\\x1b[31m[red]x" in result.output
