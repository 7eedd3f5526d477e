"""The benchmark harness (``bench/harness.py``, ``python -m bench``): medians, ratios, targets,
row status, the JSON report, and a quick run of the two fast rows with their correctness
checks. Nothing here asserts on speed: the machine may be slow or busy."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402
from bench.harness import Measure, Row, Target  # noqa: E402


def test_median_and_ratio():
    assert harness.median([3.0, 1.0, 2.0]) == 2.0
    assert harness.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert harness.median([1.0, float("nan"), 3.0]) == 2.0  # NaN samples are ignored
    assert math.isnan(harness.median([]))
    assert harness.ratio(6.0, 3.0) == 2.0
    assert math.isnan(harness.ratio(1.0, 0.0))
    assert math.isnan(harness.ratio(float("nan"), 1.0))
    m = Measure("x", "s", [0.3, 0.1, 0.2])
    assert m.median == 0.2
    assert m.to_dict() == {"name": "x", "unit": "s", "median": 0.2, "samples": [0.3, 0.1, 0.2], "n": 3, "note": ""}


def test_targets():
    assert Target("t", 1.2, "<=", 1.25).passed
    assert not Target("t", 1.3, "<=", 1.25).passed
    assert Target("t", 20.0, ">=", 20).passed
    assert not Target("t", 19.9, ">=", 20).passed
    assert not Target("t", float("nan"), ">=", 1).passed  # an unmeasured value never passes
    with pytest.raises(ValueError):
        Target("t", 1.0, "=>", 1.0)


def test_row_status_order():
    row = Row(id="r")
    assert row.status == "PASS"  # nothing to miss
    row.target("speed", 2.0, "<=", 1.0)
    assert row.status == "MISS"
    row.check("equal", True)
    assert row.status == "MISS"
    row.check("counts", False, "3 != 4")
    assert row.status == "FAIL"  # a wrong result outranks a missed target
    assert row.check_details == {"counts": "3 != 4"}
    row.skipped = "no GPU"
    assert row.status == "SKIP"
    row.error = "boom"
    assert row.status == "ERROR"


def test_interleave_rotates_and_drops_warmup():
    calls: list[str] = []

    def make(name: str, value: float):
        def fn() -> float:
            calls.append(name)
            return value
        return fn

    samples = harness.interleave({"a": make("a", 1.0), "b": make("b", 2.0), "c": make("c", 3.0)}, repeats=3, warmup=1)
    assert samples == {"a": [1.0] * 3, "b": [2.0] * 3, "c": [3.0] * 3}
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]


def test_row_round_trip_and_report_shape(tmp_path):
    row = Row(id="gigpo", value=Measure("ours", "s", [1.0, 2.0, 3.0]),
              baselines=[Measure("base", "s", [30.0, 40.0])])
    row.ratios["base / ours"] = harness.ratio(row.baselines[0].median, row.value.median)
    row.target("speed-up", row.ratios["base / ours"], ">=", 20)
    row.check("equal to 1e-6", True)
    row.info["nan"] = float("nan")
    again = Row.from_dict(json.loads(json.dumps(row.to_dict())))
    assert again.to_dict() == row.to_dict()
    assert again.status == "MISS" and again.ratios["base / ours"] == 17.5
    skipped = Row(id="gpu_kto", skipped="no GPU")
    machine = harness.machine_info()
    assert machine["cpus"] >= 1 and machine["python"] and "duckdb" in machine["packages"]
    report = harness.report_dict([row, skipped], machine, "quick", "python -m bench --quick", 1.5, "2026-01-01T00:00:00")
    path = tmp_path / "out" / "report.json"
    harness.write_json(path, report)
    data = json.loads(path.read_text())
    assert data["schema"] == harness.SCHEMA_VERSION and data["mode"] == "quick"
    assert data["summary"] == {"MISS": 1, "SKIP": 1}
    first = data["rows"][0]
    assert first["info"]["nan"] is None  # NaN becomes null: strict JSON
    assert first["targets"] == [{"label": "speed-up", "value": 17.5, "op": ">=", "limit": 20, "passed": False}]
    assert data["rows"][1]["status"] == "SKIP" and data["rows"][1]["skipped"] == "no GPU"
    cells = harness.table_rows([row, skipped])
    assert cells[0][5] == "MISS" and cells[1][1] == "skipped: no GPU"
    assert "| gpu_kto | skipped: no GPU |" in harness.markdown_table([row, skipped])


def test_rows_are_registered():
    assert harness.ROW_IDS == ("overhead", "capture", "ingest", "startup", "cli_startup", "spool", "receiver", "dataset",
                               "gigpo", "train", "memory", "learning", "growth", "gpu_kto", "gpu_grpo",
                               "peers_mlflow", "peers_phoenix", "peers_agentlightning")
    with pytest.raises(KeyError):
        harness.row_spec("nope")


def test_quick_run_of_the_fast_rows(tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "gigpo,dataset", "--json", str(out), "--quiet"],
        cwd=str(ROOT), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["mode"] == "quick" and [r["id"] for r in data["rows"]] == ["dataset", "gigpo"]
    assert data["machine"]["cpus"] >= 1
    for row in data["rows"]:
        assert row["status"] in ("PASS", "MISS"), row  # measured, and every correctness check passed
        assert row["checks"] and all(row["checks"].values()), row["check_details"]
        assert row["value"]["n"] >= 3 and row["value"]["median"] > 0
        assert row["baselines"][0]["median"] > 0
        assert len(row["targets"]) == 1 and row["targets"][0]["op"] == ">="
    gigpo = data["rows"][1]
    assert gigpo["info"]["max_abs_difference"] < 1e-6
    assert gigpo["sizes"]["steps"] > 10_000
    dataset = data["rows"][0]
    assert dataset["info"]["kto_rows"] == dataset["sizes"]["rollouts"]
    assert dataset["info"]["grpo_groups"] == dataset["sizes"]["rollouts"] // 4
    assert "gigpo" in proc.stdout and "dataset" in proc.stdout  # the table


def test_unknown_row_is_an_error():
    proc = subprocess.run([sys.executable, "-m", "bench", "--only", "nope"], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and "unknown row" in proc.stderr
