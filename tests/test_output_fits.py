"""Listings fit the terminal (issue 18, "output that fits").

At 80 columns ``query``, ``traces list``, ``tasks list`` and ``plugins`` print one line per row,
no line wider than the terminal, short ids that ``traces show`` accepts, rounded floats and a
note naming the columns left out; ``--wide``, ``--json`` and ``--csv`` carry every value in full.
Real stores (the demo agent recorded into DuckDB), the real command line, rich's real renderer.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from pathlib import Path

import duckdb
import pytest
from rich.cells import cell_len

import agent_rl_plugin as arl
from agent_rl_plugin.cli.main import main
from agent_rl_plugin.demo.calculator import demo_tasks
from agent_rl_plugin.demo.run import run_groups

REWARD_COLUMNS = [
    "reward_id", "rollout_id", "step_index", "name", "value", "label", "reason", "metrics", "plugin",
    "plugin_version", "source", "input_hash", "created_at", "error", "trace_id", "span_id",
]  # fmt: skip


def agent_rl(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``agent-rl ARGS`` in this process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


@pytest.fixture
def store(db_path: Path, monkeypatch) -> Path:
    """2 tasks x 3 rollouts of the demo agent (one ``correct`` reward row each), 80 columns."""
    asyncio.run(run_groups(demo_tasks(2), group_size=3, seed=1))
    assert arl.flush()
    arl.shutdown()
    monkeypatch.setenv("COLUMNS", "80")
    return db_path


def db_rows(path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return connection.execute(sql).fetchall()


def assert_fits(out: str, width: int = 80) -> list[str]:
    lines = out.splitlines()
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[:2]}"
    return lines


def note_of(out: str) -> str:
    """The row-count line and its note, joined back if the terminal wrapped it."""
    text = " ".join(out.split())
    return text[text.index(" rows") :]


def test_query_select_star_from_rewards_fits_80_columns(store, capsys):
    code, out, err = agent_rl(capsys, "query", "--db", str(store), "select * from rewards")
    assert code == 0, err
    lines = assert_fits(out)
    rewards = db_rows(store, "select reward_id, rollout_id, value, reason from rewards")
    assert len(rewards) == 6
    for reward_id, rollout_id, value, reason in rewards:
        # one line per row: the short reward id, the rollout id, the name and the value together
        (line,) = [line for line in lines if reward_id[:8] in line]
        assert rollout_id[:8] in line and rollout_id not in line  # shortened
        assert "correct" in line and f" {value:.1f} " in line and reason[:10] in line
    header = next(line for line in lines if "reward_id" in line)
    shown = re.findall(r"\w+", header)
    note = note_of(out)
    match = re.search(r"(\d+) more columns: ([\w, ]+) \(use --wide, --json or --csv\)", note)
    assert match, note
    hidden = match.group(2).split(", ")
    assert int(match.group(1)) == len(hidden) > 0
    assert shown + hidden == REWARD_COLUMNS  # leading columns shown, the trailing ones named
    assert any("…" in line for line in lines if "correct" in line)  # the reason is cut, not wrapped


def test_traces_list_fits_with_short_ids_that_traces_show_accepts(store, capsys):
    code, out, err = agent_rl(capsys, "traces", "list", "--db", str(store))
    assert code == 0, err
    lines = assert_fits(out)
    rollouts = db_rows(store, "select rollout_id, task_id, status, total_reward from rollouts")
    assert len(rollouts) == 6
    for rollout_id, task_id, status, reward in rollouts:
        (line,) = [line for line in lines if line.split() and rollout_id.startswith(line.split()[0].ljust(8, "?"))]
        short = line.split()[0]
        assert 8 <= len(short) < len(rollout_id)
        assert task_id in line and status in line and f"{reward:.1f}" in line
        code, shown, err = agent_rl(capsys, "traces", "show", short, "--db", str(store))
        assert code == 0, err
        assert f"rollout {rollout_id}" in shown
    # narrower still: fewer columns, still one line per rollout
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "50")
        code, out, _ = agent_rl(capsys, "traces", "list", "--db", str(store))
    assert code == 0
    lines = assert_fits(out, 50)
    assert sum(1 for line in lines if any(line.strip().startswith(r[0][:8]) for r in rollouts)) == 6
    assert "more columns:" in note_of(out)


def test_floats_are_rounded_in_tables_and_full_in_json_and_csv(store, capsys):
    sql = "select rollout_id, duration_ms / 3 as third, 1.0 / 3 as ratio, start_time from rollouts order by rollout_id"
    code, out, _ = agent_rl(capsys, "query", "--db", str(store), sql)
    assert code == 0
    assert "0.3333 " in out and "0.33333" not in out
    assert not re.search(r"\d\.\d{5,}", out)  # no float shown with more than 4 significant digits
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( |$)", out, re.M)  # timestamps to the second
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", out)
    full = db_rows(store, sql)
    code, out, _ = agent_rl(capsys, "query", "--db", str(store), "--json", sql)
    assert code == 0
    shown = json.loads(out)
    assert [r["third"] for r in shown] == [r[1] for r in full]
    assert shown[0]["ratio"] == pytest.approx(1 / 3, abs=1e-12)
    code, out, _ = agent_rl(capsys, "query", "--db", str(store), "--csv", sql)
    assert code == 0
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert [float(r["third"]) for r in parsed] == [r[1] for r in full]
    assert [r["rollout_id"] for r in parsed] == [r[0] for r in full]


def test_wide_json_and_csv_give_every_column_in_full(store, capsys):
    full = db_rows(store, "select rollout_id, reason from rewards")
    code, out, _ = agent_rl(capsys, "query", "--db", str(store), "--wide", "select * from rewards")
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if "reward_id" in line)
    assert re.findall(r"\w+", header) == REWARD_COLUMNS
    for rollout_id, reason in full:
        (line,) = [line for line in lines if rollout_id in line]  # the full id, the full reason, one line
        assert reason in line
    assert "more columns" not in out and max(cell_len(line) for line in lines) > 80

    code, out, _ = agent_rl(capsys, "query", "--db", str(store), "--json", "select * from rewards")
    assert code == 0
    rows = json.loads(out)
    assert list(rows[0]) == REWARD_COLUMNS
    assert sorted((r["rollout_id"], r["reason"]) for r in rows) == sorted(full)

    code, out, _ = agent_rl(capsys, "query", "--db", str(store), "-f", "csv", "select * from rewards")
    assert code == 0
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert list(parsed[0]) == REWARD_COLUMNS
    assert sorted((r["rollout_id"], r["reason"]) for r in parsed) == sorted(full)

    code, out, _ = agent_rl(capsys, "traces", "list", "--db", str(store), "--csv")
    assert code == 0
    listed = {r["rollout_id"] for r in csv.DictReader(io.StringIO(out))}
    assert listed == {r[0] for r in full}


def test_conflicting_or_unoffered_formats_are_clear_errors(store, capsys):
    code, _, err = agent_rl(capsys, "query", "--db", str(store), "--json", "--csv", "select 1")
    assert code == 1 and "--csv and --json ask for different outputs" in err and "fix:" in err
    code, _, err = agent_rl(capsys, "query", "--db", str(store), "-f", "csv", "--json", "select 1")
    assert code == 1 and "different outputs" in err
    code, _, err = agent_rl(capsys, "traces", "show", "x", "--db", str(store), "-f", "csv")
    assert code == 2 and "csv" in err  # show prints a tree: table or json only


def test_traces_show_rewards_table_fits_and_wide_keeps_the_reason(store, capsys):
    (rollout_id, reason), *_ = db_rows(store, "select rollout_id, reason from rewards order by rollout_id")
    code, out, _ = agent_rl(capsys, "traces", "show", rollout_id[:10], "--db", str(store))
    assert code == 0
    rewards_part = out[out.index("rewards") :]
    assert_fits(rewards_part)
    (line,) = [line for line in rewards_part.splitlines() if "correct" in line]
    assert reason not in line and "…" in line
    code, out, _ = agent_rl(capsys, "traces", "show", rollout_id[:10], "--db", str(store), "--wide")
    assert code == 0
    (line,) = [line for line in out[out.index("rewards") :].splitlines() if "correct" in line]
    assert reason in line


def test_tasks_list_and_plugins_fit(store, tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    long_prompt = "What is the total price of " + ", ".join(f"{n} notebooks" for n in range(1, 30)) + "?"
    tasks.write_text(
        "\n".join(
            json.dumps({"task_id": f"task-{i}", "prompt": long_prompt, "ground_truth": i * 2.5, "level": "x" * 60})
            for i in range(3)
        )
        + "\n"
    )
    assert agent_rl(capsys, "tasks", "import", str(tasks), "--db", str(store))[0] == 0
    code, out, _ = agent_rl(capsys, "tasks", "list", "--db", str(store))
    assert code == 0
    lines = assert_fits(out)
    for i in range(3):
        (line,) = [line for line in lines if f"task-{i}" in line]
        assert "What is the total" in line and "…" in line
    code, out, _ = agent_rl(capsys, "tasks", "list", "--db", str(store), "--json")
    assert [t["prompt"] for t in json.loads(out)] == [long_prompt] * 3

    code, out, _ = agent_rl(capsys, "plugins")
    assert code == 0
    lines = assert_fits(out)
    for name in ("task_completion", "tool_success", "efficiency"):
        assert len([line for line in lines if line.strip().startswith(name + " ")]) == 1
    assert "(use --wide or --json)" in note_of(out[out.index("reward ") :])  # plugins has no --csv


@pytest.mark.parametrize("width", [20, 33, 47, 64, 80, 101, 140])
def test_rendered_tables_never_exceed_the_width(width, monkeypatch, capsys):
    from agent_rl_plugin.cli.common import print_rows

    columns = ["id", "note", "name", "a rather long header", "value", "when", "n"]
    rows = [
        ("0123456789abcdef0123456789abcdef", "multi\nline\ttext", "x" * 40, "short", 1 / 7, None, 10**6),
        ("0123456789abcdef0123456789abcde0", "[bold]not markup[/]", "y", "z" * 90, 123456.789, None, -3),
    ]
    monkeypatch.setenv("COLUMNS", str(width))
    print_rows(columns, rows, title="t")
    out = capsys.readouterr().out
    lines = assert_fits(out, width)
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("2 rows"))]
    assert len(table) == 5  # title, header, rule and one line per row: nothing wraps
    from agent_rl_plugin.cli.table_layout import layout_table

    if "more column" in out:  # print_rows called without the command's formats: no option is suggested
        assert "use --" not in note_of(out)
    # the layout's width arithmetic is rich's: every line is exactly as wide as planned
    assert {cell_len(line) for line in table} == {layout_table(columns, rows, width).total_width}
    # the ids differ only at their last digit: the shown prefix (cut or not) tells them apart
    shown_ids = [line.split()[0] for line in table[3:]]
    assert len(shown_ids) == 2 and all(i.startswith("01234567") for i in shown_ids)
    assert shown_ids[0] != shown_ids[1] or shown_ids[0].endswith("…")
    if "note" in table[1].split():
        assert "[bold]not" in out  # values are text, never read as markup
    assert sum(1 for line in lines if "\\n" in line or "multi" in line) <= 2


def test_layout_rounding_and_short_ids():
    from agent_rl_plugin.cli.table_layout import display_value, layout_table, round_float, short_id_length

    assert [round_float(v) for v in (1 / 3, 2.0, 12.3456, 123456.7, 1.5e-7, 0.0)] == [
        "0.3333", "2.0", "12.35", "123457", "1.500e-07", "0.0",
    ]  # fmt: skip
    assert display_value(1 / 3, wide=True) == str(1 / 3)
    from decimal import Decimal

    assert [display_value(Decimal(v)) for v in ("5", "1.50", "-7")] == ["5", "1.5", "-7"]  # sum() of a count is 5
    assert short_id_length(["abcdef0123456789", "abcdef01ffffffff"]) == 9
    layout = layout_table(["a", "b", "c"], [("x" * 50, "y" * 50, "z" * 50)], width=50)
    assert layout.total_width == 50 and layout.columns == ["a", "b"] and layout.hidden == ["c"]
    assert layout.cells == [["x" * 50, "y" * 50]] and layout.widths == [24, 21]  # the first column keeps more
    spare = layout_table(["a", "b", "c"], [("x" * 50, "y" * 50, "z" * 50)], width=71)
    assert spare.widths == [25, 19, 19] and spare.total_width == 71  # the cell left over goes to the first
    wide = layout_table(["a", "b", "c"], [("x" * 50, "y" * 50, "z" * 50)], width=50, wide=True)
    assert wide.hidden == [] and wide.cells == [["x" * 50, "y" * 50, "z" * 50]]
