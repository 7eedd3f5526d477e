"""docs/schema.md is generated from the migrations and must be current."""

from __future__ import annotations

from agent_rl_plugin.store import MIGRATIONS, VIEW_NAMES
from agent_rl_plugin.store.schema_doc import DEFAULT_PATH, main, render


def test_schema_doc_is_current():
    assert DEFAULT_PATH.exists(), "docs/schema.md is missing: run python -m agent_rl_plugin.store.schema_doc"
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render(), (
        "docs/schema.md is stale: run python -m agent_rl_plugin.store.schema_doc"
    )


def test_schema_doc_covers_every_table_view_and_migration():
    text = render()
    for name in ("spans", "rewards", *VIEW_NAMES):
        assert f"### `{name}`" in text
    for migration in MIGRATIONS:
        assert f"`{migration.name}`" in text


def test_every_view_column_is_described():
    undescribed = [line for line in render().splitlines() if line.startswith("| `") and line.endswith("|  |")]
    assert not undescribed, undescribed


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    target = tmp_path / "schema.md"
    assert main(["--output", str(target), "--check"]) == 1
    assert main(["--output", str(target)]) == 0
    assert main(["--output", str(target), "--check"]) == 0
