"""Tables printed without rich's console are the tables rich prints (issue 19, cli_startup row).

When stdout is not a terminal, :func:`~agent_rl_plugin.cli.common.print_rows` writes
:func:`~agent_rl_plugin.cli.table_layout.render_plain`'s text instead of drawing with rich.
These tests draw the same tables both ways (random ones: wide characters, combining marks,
emoji, cut cells, empty cells, titles that fit or not, narrow and wide terminals; and the real
``query`` / ``traces list`` output) and require the same bytes, and check that a short command
printing a table does not import rich's console.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import datetime

import pytest

from agent_rl_plugin.cli import common, table_layout
from agent_rl_plugin.data.synthetic import synthesize_store
from tests.cli_output import cli_output

ALPHABETS = [
    "abcdefghij",
    "ABC xyz 0123456789-_.",
    "漢字かなカナ한국",  # two cells each
    "e\u0301a\u0308",  # combining marks
    "😀🚀✓→…",
    "[bold]:smile:",  # markup and emoji codes, shown as text in cells
]


def _text(rng: random.Random, longest: int) -> str:
    alphabet = rng.choice(ALPHABETS)
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest))).strip()


def _value(rng: random.Random) -> object:
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.35:
        return rng.randint(-(10**6), 10**9)
    if kind < 0.5:
        return rng.uniform(-1e4, 1e4)
    if kind < 0.55:
        return datetime(2026, 1, rng.randint(1, 28), rng.randint(0, 23), 5, 7, 123456)
    if kind < 0.6:
        return "%032x" % rng.getrandbits(128)
    return _text(rng, rng.choice([3, 12, 60]))


def _both_ways(capsys, monkeypatch, columns, rows, fmt_title, wide, formats) -> tuple[str, str, bool]:
    """(rich's output, the output of print_rows as it runs, whether the plain text was used)."""
    used: list[bool] = []
    real = table_layout.render_plain

    def spy(*args, **kwargs):
        text = real(*args, **kwargs)
        used.append(text is not None)
        return text

    capsys.readouterr()
    monkeypatch.setattr(table_layout, "render_plain", spy)
    common.print_rows(columns, rows, "table", title=fmt_title, wide=wide, formats=formats)
    plain = capsys.readouterr().out
    monkeypatch.setattr(table_layout, "plain_stdout", lambda: False)
    common.print_rows(columns, rows, "table", title=fmt_title, wide=wide, formats=formats)
    drawn = capsys.readouterr().out
    monkeypatch.undo()
    return drawn, plain, bool(used and used[0])


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_match_rich(capsys, monkeypatch, seed):
    rng = random.Random(seed)
    plain_used = 0
    for _ in range(40):
        monkeypatch.setenv("COLUMNS", str(rng.choice([12, 30, 80, 120, 200])))
        n_columns = rng.randint(0, 7)
        columns = [_text(rng, 10) or f"c{i}" for i in range(n_columns)]
        rows = [[_value(rng) for _ in columns] for _ in range(rng.randint(0, 6))]
        title = rng.choice([None, "rollouts", "a much longer title than most tables are wide", "[red]x", "漢字"])
        wide = rng.random() < 0.2
        formats = rng.choice([None, ("table", "json", "csv"), ("table", "json")])
        drawn, plain, used = _both_ways(capsys, monkeypatch, columns, rows, title, wide, formats)
        assert plain == drawn, (columns, rows, title, wide)
        plain_used += used
    assert plain_used >= 10  # the plain text was really compared, not rich against itself


def test_plain_only_where_rich_writes_plain_text(monkeypatch):
    assert table_layout.plain_stdout()  # pytest's captured stdout: not a terminal, UTF-8
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not table_layout.plain_stdout()
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert not table_layout.plain_stdout()


def test_what_render_plain_leaves_to_rich():
    layout = table_layout.layout_table(["a", "b"], [["x", 1]], 80)
    assert table_layout.render_plain(layout, "t", "1 row", 80) is not None
    assert table_layout.render_plain(layout, "a title wider than the table", "1 row", 80) is None
    assert table_layout.render_plain(layout, "[b]t", "1 row", 80) is None
    assert table_layout.render_plain(layout, "t", "a note with a word wider than the console", 5) is None
    assert table_layout.render_plain(layout, "t", "two  spaces in a wrapped note", 10) is None
    tabbed = table_layout.TableLayout(["a"], [3], [["x\ty"]], [False])
    assert table_layout.render_plain(tabbed, None, "1 row", 80) is None
    spaced = table_layout.TableLayout(["a"], [3], [[" x"]], [False])
    assert table_layout.render_plain(spaced, None, "1 row", 80) is None


@pytest.mark.parametrize(
    "args",
    [
        ["query", "select count(*) from spans"],
        ["query", "select * from rollouts order by start_time limit 7"],
        ["query", "select name, attributes from spans order by start_time limit 5", "--wide"],
        ["traces", "list"],
        ["traces", "list", "-n", "3", "--wide"],
        ["traces", "list", "--task", "task-1"],
    ],
)
@pytest.mark.parametrize("columns", ["40", "120"])
def test_commands_print_what_rich_prints(tmp_path, capsys, monkeypatch, args, columns):
    path = tmp_path / "store.duckdb"
    synthesize_store(path, rollouts=12, llm_calls=2, group_size=3, n_tasks=3)
    monkeypatch.setenv("COLUMNS", columns)
    plain = cli_output(capsys, *args, "--db", str(path))
    monkeypatch.setattr(table_layout, "plain_stdout", lambda: False)
    drawn = cli_output(capsys, *args, "--db", str(path))
    assert plain == drawn and "row" in plain


def _rich_modules_of_typer_itself() -> set[str]:
    """What ``import typer`` loads of rich (typer 0.2x: nothing; older typers import rich's
    console themselves, which the lowest dependency set installs)."""
    code = "import sys, json, typer, typer.main\nprint(json.dumps([m for m in sys.modules if m.startswith('rich')]))"
    return set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout))


def test_a_piped_table_does_not_import_richs_console(tmp_path):
    typer_loads = _rich_modules_of_typer_itself()
    path = tmp_path / "store.duckdb"
    synthesize_store(path, rollouts=5, llm_calls=1, group_size=1, n_tasks=1)
    code = (
        "import sys, json\n"
        "from agent_rl_plugin.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(m for m in sys.modules if m.startswith('rich'))))\n"
    )
    for args in (["query", "select count(*) from spans"], ["traces", "list"]):
        env = {**os.environ, "COLUMNS": "100"}
        env.pop("FORCE_COLOR", None)
        env.pop("TTY_COMPATIBLE", None)
        proc = subprocess.run(
            [sys.executable, "-c", code, *args, "--db", str(path)], capture_output=True, text=True, env=env, timeout=120
        )
        modules = json.loads(proc.stderr.strip().splitlines()[-1])
        assert "row" in proc.stdout
        ours = set(modules) - typer_loads
        assert "rich.console" not in ours and "rich.table" not in ours, modules


def _rich_prints(text: str, width: int) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, force_terminal=False, color_system=None).print(text, highlight=False)
    return buffer.getvalue()


@pytest.mark.parametrize("seed", range(4))
def test_notes_wrap_as_rich_wraps_them(seed):
    rng = random.Random(seed)
    wrapped = 0
    for _ in range(500):
        words = [
            "".join(rng.choice("abcxyz019,;()-.") for _ in range(rng.randint(1, 14))) for _ in range(rng.randint(1, 25))
        ]
        text, width = " ".join(words), rng.randint(1, 120)
        lines = table_layout.wrap_like_rich(text, width)
        if lines is None:
            assert max(map(len, words)) > width  # left to rich only for a word wider than the console
            continue
        assert "\n".join(lines) + "\n" == _rich_prints(text, width), (text, width)
        wrapped += len(lines) > 1
    assert wrapped > 100


def test_a_listing_whose_note_wraps_is_printed_plain(tmp_path, capsys, monkeypatch):
    columns = ["rollout", "task", "group", "status", "reward", "llm", "tools", "errors", "ms", "started"]
    rows = [["r%d" % i, "task-%d" % i, "g", "ok", 0.5, 3, 2, 0, 12.5, datetime(2026, 1, 2, 3, 4, 5)] for i in range(3)]
    monkeypatch.setenv("COLUMNS", "40")
    drawn, plain, used = _both_ways(capsys, monkeypatch, columns, rows, "rollouts", False, ("table", "json", "csv"))
    assert used and plain == drawn
    assert len(plain.splitlines()[-1]) <= 40 and "more columns" in plain
