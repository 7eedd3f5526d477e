"""The dataset benchmark's plain-Python baseline builds the same rows as the store builder (so
the timed comparison in bench/dataset_build.py compares like with like)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import dataset_build  # noqa: E402


def test_baseline_and_store_build_equal_rows(tmp_path):
    store, folder = tmp_path / "store.duckdb", tmp_path / "traces"
    dataset_build.make_store(store, 40)
    dataset_build.export_files(store, folder)
    assert len(list(folder.iterdir())) == 40
    _, ours = dataset_build.time_store(store)
    _, _, baseline = dataset_build.time_baseline(folder)
    dataset_build.check(ours, baseline)
    assert ours.num_rows == 40
