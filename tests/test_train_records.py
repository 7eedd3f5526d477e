"""record_training_run: one training_runs row, one training_metrics row per (step, numeric metric)."""

from __future__ import annotations

import json

import duckdb

from agent_rl_plugin.train import KTOTrainConfig, TrainResult, record_training_run


def _result(tmp_path) -> TrainResult:
    return TrainResult(
        output_dir=str(tmp_path / "out"),
        adapter_path=str(tmp_path / "out" / "adapter"),
        metrics={"loss": 0.4, "train_runtime": 1.5},
        n_rows=8,
        n_desirable=4,
        n_undesirable=4,
        desirable_weight=1.0,
        undesirable_weight=1.0,
        global_step=2,
        seconds=1.5,
        log_history=[
            {"loss": 0.5, "learning_rate": 1e-4, "epoch": 0.5, "step": 1, "note": "text"},
            {"loss": 0.4, "learning_rate": 5e-5, "rewards/chosen_sum": float("nan"), "epoch": 1.0, "step": 2},
            {"train_runtime": 1.5, "train_loss": 0.45, "epoch": 1.0, "step": 2},
        ],
    )


def test_record_training_run_writes_run_and_metrics(tmp_path):
    db = tmp_path / "store.duckdb"
    config = KTOTrainConfig(model="some/model", output_dir=str(tmp_path / "out"), max_steps=2, batch_size=4)
    run_id = record_training_run(db, _result(tmp_path), config, "task_id = 'a'")
    con = duckdb.connect(str(db), read_only=True)
    run = con.execute(
        "select method, model, adapter_path, dataset_sql, n_rows, status, error, config, final_metrics, "
        "started_at <= finished_at from training_runs where run_id = ?",
        [run_id],
    ).fetchone()
    assert run[0:7] == ("kto", "some/model", str(tmp_path / "out" / "adapter"), "task_id = 'a'", 8, "ok", None)
    assert json.loads(run[7])["batch_size"] == 4
    assert json.loads(run[8]) == {"loss": 0.4, "train_runtime": 1.5}
    assert run[9] is True
    rows = con.execute("select step, epoch, name, value from training_metrics where run_id = ? order by step, name", [run_id]).fetchall()
    assert rows == [
        (1, 0.5, "learning_rate", 1e-4),
        (1, 0.5, "loss", 0.5),
        (2, 1.0, "learning_rate", 5e-5),
        (2, 1.0, "loss", 0.4),
        (2, 1.0, "train_loss", 0.45),
        (2, 1.0, "train_runtime", 1.5),
    ]
    con.close()


def test_record_failed_run_without_result(tmp_path):
    db = tmp_path / "store.duckdb"
    config = KTOTrainConfig(model="m", output_dir=str(tmp_path / "out"), batch_size=2)
    run_id = record_training_run(db, None, config, None, status="error", error="boom", n_rows=3)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("select status, error, n_rows, adapter_path, output_dir from training_runs").fetchall() == [
        ("error", "boom", 3, None, str(tmp_path / "out"))
    ]
    assert con.execute("select count(*) from training_metrics where run_id = ?", [run_id]).fetchone() == (0,)
    con.close()
