"""Row ``peers_mlflow``: ``@trace_agent`` + DuckDB against MLflow's ``@mlflow.trace`` + a local
SQLite tracking store, in the same run.

Every sample is a fresh interpreter running ``bench/peers/decorator_worker.py`` (ours with the
bench's python, MLflow with its environment's), rounds interleaved (ours, MLflow default,
MLflow lose-nothing; rotated each round). Per call: the agent's loop time (what the agent's
thread pays) and the time until everything is stored (loop + flush), over the calls made;
traces persisted vs sent for each side. MLflow's default logs traces through an asynchronous
queue that drops them when full; ``MLFLOW_ENABLE_ASYNC_TRACE_LOGGING=false`` logs each trace
before the call returns and loses nothing (fewer calls per sample: it is slow).

    python -m bench --only peers_mlflow [--quick]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness import Context, Measure, Row, median, ratio
from bench.peers.common import HERE, PYTHON, guarded, ours_env, peer_env, run_json, share
from bench.peers.envs import offline_env

WORKER = HERE / "decorator_worker.py"


def _sample(python: str, side: str, calls: int, db: str, env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    """One sample in a fresh interpreter, run in the store's folder (MLflow writes its trace
    artifacts under ``./mlruns``: they stay in the row's scratch folder)."""
    db = str(Path(db).resolve())  # the worker runs in the store's folder
    folder = Path(db).parent
    return run_json(
        [python, str(WORKER), "--side", side, "--calls", str(calls), "--db", db], env, timeout_s, cwd=folder
    )


def run_peers_mlflow(ctx: Context) -> Row:
    calls = ctx.size(2000, 100)
    sync_calls = ctx.size(50, 10)
    rounds = ctx.size(3, 2)
    row = Row(id="peers_mlflow", sizes={"calls": calls, "calls_lose_nothing": sync_calls, "rounds": rounds})
    env = peer_env("mlflow", ctx, row)
    if row.skipped:
        return row
    assert env.python is not None
    folder = ctx.folder("peers_mlflow")
    peer = offline_env()
    sides: dict[str, tuple[str, str, int, dict[str, str], str]] = {
        "ours": (PYTHON, "ours", calls, ours_env(), ".duckdb"),
        "mlflow": (str(env.python), "mlflow", calls, peer, ".sqlite"),
        "mlflow-sync": (str(env.python), "mlflow-sync", sync_calls, peer, ".sqlite"),
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(rounds):
        shift = r % len(order)
        for name in order[shift:] + order[:shift]:
            python, side, n, side_env, suffix = sides[name]
            db = str(folder / f"{name}-{r}{suffix}")
            if name == "ours":  # ours is not guarded: a failure of ours is an error of the row
                out = _sample(python, side, n, db, side_env, 600)
            else:
                out = guarded(row, name, _sample, python, side, n, db, side_env, 900)
            if out is not None:
                results[name].append(out)
                ctx.log(
                    f"peers_mlflow: round {r + 1}/{rounds} {name}: {out['loop_s'] / n * 1e6:,.0f} us/call, "
                    f"{share(out['persisted'], out['sent'])}"
                )
    ours = results["ours"]
    row.value = Measure(
        "@trace_agent + DuckDB, per call",
        "us",
        [o["loop_s"] / o["calls"] * 1e6 for o in ours],
        note=share(sum(o["persisted"] for o in ours), sum(o["sent"] for o in ours)),
    )
    version = env.version
    labels = {
        "mlflow": f"MLflow {version} @mlflow.trace + SQLite, defaults",
        "mlflow-sync": f"MLflow {version}, lose-nothing (synchronous logging)",
    }
    for name, label in labels.items():
        outs = results[name]
        persisted = sum(o["persisted"] or 0 for o in outs)
        sent = sum(o["sent"] for o in outs)
        spans = sum(o["spans"] or 0 for o in outs)
        stored = f"{share(persisted, sent)}, {spans:,} with their span" if outs else "failed"
        row.baselines.append(
            Measure(
                f"{label}: {stored}",
                "us",
                [o["loop_s"] / o["calls"] * 1e6 for o in outs],
            )
        )
        row.info[f"{name}_persisted"], row.info[f"{name}_sent"] = persisted, sent
        row.info[f"{name}_spans"] = sum(o["spans"] or 0 for o in outs)
        row.info[f"{name}_until_stored_us"] = median([o["stored_s"] / o["calls"] * 1e6 for o in outs])
    row.info["ours_until_stored_us"] = median([o["stored_s"] / o["calls"] * 1e6 for o in ours])
    row.info["peer_version"] = version
    row.info["settings"] = {name: outs[0]["setting"] for name, outs in results.items() if outs}
    row.ratios["MLflow defaults / ours (per call)"] = ratio(row.baselines[0].median, row.value.median)
    row.ratios["MLflow lose-nothing / ours (per call)"] = ratio(row.baselines[1].median, row.value.median)
    row.ratios["MLflow defaults / ours (until stored)"] = ratio(
        row.info["mlflow_until_stored_us"], row.info["ours_until_stored_us"]
    )
    sent = sum(o["sent"] for o in ours)
    row.check(
        f"ours: every call stored ({sent:,})",
        all(o["persisted"] == o["sent"] and o["spans"] == o["sent"] for o in ours),
        "; ".join(f"{o['persisted']} traces, {o['spans']} spans of {o['sent']}" for o in ours),
    )
    return row
