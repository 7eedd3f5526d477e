"""Failed and partial rollouts: a rollout that raised, was cancelled or timed out is stored with
its status and error, and advantages and datasets follow one explicit policy for them
(``failed_rollouts``: exclude, zero_reward, keep) and report how many rollouts it touched.

One real store per test, one group ``t/r`` of six rollouts, each with one LLM call:

* ``ok1`` (reward 1.0) and ``ok2`` (reward 0.0) end normally;
* ``err`` emits 0.5, then a ``@trace_agent`` function raises inside ``with rollout()``;
* ``cancel`` emits 0.8 inside ``async with rollout()``, then its asyncio task is cancelled;
* ``kbd`` is interrupted (``KeyboardInterrupt``) before any reward;
* the sixth runs under ``run_rollouts(timeout_s=...)``, emits 0.9 and times out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from score_support import agent_rl, rows

import agent_rl_plugin as arl
from agent_rl_plugin.advantages import FAILED_ROLLOUT_POLICIES, check_failed_rollouts, grpo_advantages
from agent_rl_plugin.advantages.failed import FailedRollouts, FailedRolloutsError
from agent_rl_plugin.data import BuildReport, DatasetError, build_table
from agent_rl_plugin.data.episodes import FAILED
from agent_rl_plugin.rl import AdvantageInputError, compute_advantages, steps_for_gigpo, table_report
from agent_rl_plugin.rl.failed import rollout_outcomes
from agent_rl_plugin.rollouts import run_rollouts

GROUP = "t/r"
PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]
OK_REWARDS = {"ok1": 1.0, "ok2": 0.0}


def _llm(answer: str) -> None:
    arl.record_llm_call("tiny", PROMPT, {"role": "assistant", "content": answer})


def _record_all(db: Path) -> str:
    """Record the six rollouts into ``db``; returns the timed-out rollout's id."""
    for rollout_id, reward in OK_REWARDS.items():
        with arl.rollout(task_id="t", group_id=GROUP, rollout_id=rollout_id):
            _llm(f"answer of {rollout_id}")
            arl.emit_reward(reward, name="correct")

    @arl.trace_agent
    def broken_agent() -> None:
        _llm("answer of err")
        arl.emit_reward(0.5, name="correct")
        raise RuntimeError("the tool server is down")

    with pytest.raises(RuntimeError):
        with arl.rollout(task_id="t", group_id=GROUP, rollout_id="err"):
            broken_agent()

    async def cancelled() -> None:
        async with arl.rollout(task_id="t", group_id=GROUP, rollout_id="cancel"):
            _llm("answer of cancel")
            arl.emit_reward(0.8, name="correct")
            await asyncio.sleep(30)

    async def cancel_it() -> None:
        task = asyncio.ensure_future(cancelled())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())

    with pytest.raises(KeyboardInterrupt):
        with arl.rollout(task_id="t", group_id=GROUP, rollout_id="kbd"):
            _llm("answer of kbd")
            raise KeyboardInterrupt

    async def slow_agent(task: dict) -> str:
        _llm("answer of timeout")
        arl.emit_reward(0.9, name="correct")
        await asyncio.sleep(30)
        return "never"

    outcomes = run_rollouts(
        slow_agent, [{"task_id": "t", "prompt": "What is 2 + 2?"}], group_size=1, timeout_s=0.3, run_id="r", db=db
    )
    assert [o.status for o in outcomes] == ["timeout"]
    assert arl.flush()
    arl.shutdown()
    return outcomes[0].rollout_id


@pytest.fixture
def failed_db(db_path: Path) -> tuple[Path, str]:
    return db_path, _record_all(db_path)


def test_failed_rollouts_are_stored_with_their_status_and_error(failed_db):
    db, timeout_id = failed_db
    stored = {r["rollout_id"]: r for r in rows(db, "select rollout_id, group_id, status, error from rollouts")}
    assert set(stored) == {"ok1", "ok2", "err", "cancel", "kbd", timeout_id}
    assert {r["group_id"] for r in stored.values()} == {GROUP}
    assert stored["ok1"]["status"] == stored["ok2"]["status"] == "ok" and stored["ok1"]["error"] is None
    assert stored["err"]["status"] == "error" and stored["err"]["error"] == "RuntimeError: the tool server is down"
    assert stored["cancel"]["status"] == "cancelled" and "CancelledError" in stored["cancel"]["error"]
    assert stored["kbd"]["status"] == "error" and stored["kbd"]["error"] == "KeyboardInterrupt"
    assert stored[timeout_id]["status"] == "error"
    assert stored[timeout_id]["error"] == "TimeoutError: rollout timed out after 0.3 s"
    # the rewards emitted before the failure are kept too
    kept = {r["rollout_id"]: r["value"] for r in rows(db, "select rollout_id, value from episode_rewards")}
    assert kept == {**OK_REWARDS, "err": 0.5, "cancel": 0.8, timeout_id: 0.9}

    # the outcome that the policy reads: the view's status, with timeouts and interrupts told apart
    connection = duckdb.connect(str(db), read_only=True)
    try:
        connection.register("ids", pa.table({"rollout_id": list(stored)}))
        table = rollout_outcomes(connection, "ids")
        outcomes = dict(zip(table.column("rollout_id").to_pylist(), table.column("outcome").to_pylist()))
    finally:
        connection.close()
    assert outcomes == {
        "ok1": "ok",
        "ok2": "ok",
        "err": "error",
        "cancel": "cancelled",
        "kbd": "cancelled",
        timeout_id: "timeout",
    }
    # agrees with the view: ok exactly where the view says ok, cancelled wherever the view does
    for rollout_id, row in stored.items():
        assert (outcomes[rollout_id] == "ok") == (row["status"] == "ok")
        if row["status"] == "cancelled":
            assert outcomes[rollout_id] == "cancelled"


def _grpo(db: Path, policy: FailedRollouts):
    return compute_advantages(db, "grpo", failed_rollouts=policy, write=False)


def test_each_policy_sets_which_rollouts_get_advantages_and_with_what_reward(failed_db):
    db, timeout_id = failed_db
    runs = {policy: _grpo(db, policy) for policy in FAILED_ROLLOUT_POLICIES}
    expected_rewards = {
        "exclude": dict(OK_REWARDS),
        "zero_reward": {**OK_REWARDS, "err": 0.0, "cancel": 0.0, "kbd": 0.0, timeout_id: 0.0},
        "keep": {**OK_REWARDS, "err": 0.5, "cancel": 0.8, timeout_id: 0.9},  # kbd has no reward
    }
    counts = {"exclude": (4, 0, 0), "zero_reward": (0, 4, 0), "keep": (0, 0, 4)}
    for policy, run in runs.items():
        failed = run.report["failed_rollouts"]
        assert failed["policy"] == policy and failed["failed"] == 4
        assert failed["by_outcome"] == {"error": 1, "timeout": 1, "cancelled": 2}
        assert (failed["excluded"], failed["zeroed"], failed["kept"]) == counts[policy]
        assert sorted(failed["examples"]) == sorted(["err", "cancel", "kbd", timeout_id])
        assert run.report["selected"] == 6
        assert run.parameters["failed_rollouts"] == policy
        assert run.summary["rollouts"] == len(expected_rewards[policy])
    assert runs["keep"].report["unscored"] == {"count": 1, "examples": ["kbd"]}
    assert runs["exclude"].report["unscored"]["count"] == 0 == runs["zero_reward"].report["unscored"]["count"]

    # the values: GRPO over exactly the rewards the policy gives (written rows read back)
    for policy, rewards in expected_rewards.items():
        run = compute_advantages(db, "grpo", failed_rollouts=policy)
        got = {
            r["rollout_id"]: (r["reward"], r["value"])
            for r in rows(db, "select rollout_id, reward, value from advantages where run_id = ?", [run.run_id])
        }
        assert {k: v[0] for k, v in got.items()} == rewards
        ids = sorted(rewards)
        want = grpo_advantages([rewards[i] for i in ids], [GROUP] * len(ids))
        assert np.allclose([got[i][1] for i in ids], want, atol=1e-12)
    # exclude: the two ok rollouts alone, +-0.5 / (std + eps)
    exclude = {
        r["rollout_id"]: r["value"]
        for r in rows(db, "select rollout_id, value from advantages where parameters like '%\"exclude\"%'")
    }
    assert exclude["ok1"] == pytest.approx(0.5 / (np.sqrt(0.5) + 1e-4)) and exclude["ok2"] == -exclude["ok1"]


def test_gigpo_steps_follow_the_policy(failed_db):
    db, timeout_id = failed_db
    connection = duckdb.connect(str(db), read_only=True)
    try:
        tables = {p: steps_for_gigpo(connection, failed_rollouts=p) for p in FAILED_ROLLOUT_POLICIES}
        # a failed rollout without any reward row: zero_reward gives it R = 0, keep has nothing to use
        alone = steps_for_gigpo(connection, where="rollout_id = 'kbd'", failed_rollouts="zero_reward")
        assert alone.column("episode_reward").to_pylist() == [0.0]
        with pytest.raises(AdvantageInputError, match="no usable reward"):
            steps_for_gigpo(connection, where="rollout_id = 'kbd'", failed_rollouts="keep")
    finally:
        connection.close()
    episode = {
        p: dict(zip(t.column("trajectory_id").to_pylist(), t.column("episode_reward").to_pylist()))
        for p, t in tables.items()
    }
    assert episode["exclude"] == OK_REWARDS
    assert episode["zero_reward"] == {**OK_REWARDS, "err": 0.0, "cancel": 0.0, "kbd": 0.0, timeout_id: 0.0}
    assert episode["keep"] == {**OK_REWARDS, "err": 0.5, "cancel": 0.8, timeout_id: 0.9}
    assert table_report(tables["exclude"])["failed_rollouts"]["excluded"] == 4
    assert table_report(tables["exclude"])["without_actions"] == 0
    run = compute_advantages(db, "gigpo", write=False)  # the default is exclude
    assert run.summary["rollouts"] == 2 and run.report["failed_rollouts"]["excluded"] == 4


def _dataset(db: Path, kind: str, policy: str | None, **options):
    report = BuildReport()
    table = build_table(kind, db, failed_rollouts=policy, report=report, **options)  # type: ignore[arg-type]
    return table, report.to_dict()


def test_datasets_follow_the_policy_and_report_it(failed_db):
    db, timeout_id = failed_db
    grpo = {p: _dataset(db, "grpo", p) for p in FAILED_ROLLOUT_POLICIES}
    for policy, (table, report) in grpo.items():
        assert table.num_rows == 1 and report["rollouts"] == 6
        failed = report["failed_rollouts"]
        assert failed["policy"] == policy and failed["failed"] == 4
        assert failed["by_outcome"] == {"error": 1, "timeout": 1, "cancelled": 2}
    rewards = {
        p: dict(zip(t.column("rollout_ids")[0].as_py(), t.column("rewards")[0].as_py())) for p, (t, _) in grpo.items()
    }
    assert rewards["exclude"] == OK_REWARDS
    assert rewards["zero_reward"] == {**OK_REWARDS, "err": 0.0, "cancel": 0.0, "kbd": 0.0, timeout_id: 0.0}
    assert rewards["keep"] == {**OK_REWARDS, "err": 0.5, "cancel": 0.8, timeout_id: 0.9}
    assert grpo["exclude"][1]["left_out"] == {FAILED: 4}
    assert grpo["exclude"][1]["failed_rollouts"]["excluded"] == 4
    assert grpo["zero_reward"][1]["left_out"] == {} and grpo["zero_reward"][1]["failed_rollouts"]["zeroed"] == 4
    assert grpo["keep"][1]["failed_rollouts"]["kept"] == 4 and sum(grpo["keep"][1]["left_out"].values()) == 1
    # the dataset's advantages are GRPO's over the same rewards as `advantages compute`
    run = _grpo(db, "zero_reward")
    table = grpo["zero_reward"][0]
    by_id = dict(zip(table.column("rollout_ids")[0].as_py(), table.column("advantages")[0].as_py()))
    stored = compute_advantages(db, "grpo", failed_rollouts="zero_reward")
    values = {
        r["rollout_id"]: r["value"] for r in rows(db, "select * from advantages where run_id = ?", [stored.run_id])
    }
    assert run.summary["rollouts"] == 6 and by_id == pytest.approx(values)

    kto = {
        p: _dataset(db, "kto", p, label_rule={"method": "threshold", "threshold": 0.5}) for p in FAILED_ROLLOUT_POLICIES
    }
    assert {p: t.num_rows for p, (t, _) in kto.items()} == {"exclude": 2, "zero_reward": 6, "keep": 5}
    assert kto["zero_reward"][1]["labels"] == {"desirable": 1, "undesirable": 5}
    assert kto["keep"][1]["labels"] == {"desirable": 4, "undesirable": 1}

    # steps: GiGPO's default leaves the failed rollouts' steps out, and says so
    steps, report = _dataset(db, "steps", None)
    assert set(steps.column("rollout_id").to_pylist()) == set(OK_REWARDS)
    assert report["failed_rollouts"]["excluded"] == 4
    with pytest.raises(DatasetError, match="not applied by the steps dataset"):
        _dataset(db, "steps", "keep")
    with pytest.raises(DatasetError, match="unknown failed_rollouts policy"):
        _dataset(db, "grpo", "drop")


def test_cli_flag_on_advantages_and_dataset(failed_db, tmp_path):
    db, _ = failed_db
    result = agent_rl(
        "advantages",
        "compute",
        "--db",
        str(db),
        "--method",
        "grpo",
        "--failed-rollouts",
        "zero_reward",
        "--json",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert run["report"]["failed_rollouts"]["zeroed"] == 4 and run["summary"]["rollouts"] == 6
    assert run["parameters"]["failed_rollouts"] == "zero_reward"
    assert any("4 failed rollout(s)" in note and "zero_reward" in note for note in run["notes"])

    text = agent_rl("advantages", "compute", "--db", str(db), "--method", "rloo", "--dry-run")  # default: exclude
    assert text.exit_code == 0, text.output
    assert "4 failed rollout(s) (1 error, 1 timeout, 2 cancelled) excluded (--failed-rollouts exclude)" in text.output

    bad = agent_rl("advantages", "compute", "--db", str(db), "--method", "grpo", "--failed-rollouts", "drop")
    flat = " ".join(bad.output.replace("│", " ").split())
    assert bad.exit_code == 2 and "'drop' is not one of exclude, zero_reward, keep" in flat

    out = tmp_path / "grpo.jsonl"
    built = agent_rl("dataset", "build", "grpo", "--db", str(db), "-o", str(out), "--failed-rollouts", "keep", "--json")
    assert built.exit_code == 0, built.output
    summary = json.loads(built.stdout)
    assert summary["failed_rollouts"]["kept"] == 4 and summary["failed_rollouts"]["policy"] == "keep"
    line = json.loads(out.read_text().splitlines()[0])
    assert len(line["completions"]) == 5

    printed = agent_rl("dataset", "build", "kto", "--db", str(db), "-o", str(tmp_path / "kto.jsonl"))
    assert printed.exit_code == 0, printed.output
    assert "failed rollouts: 4 failed rollout(s)" in printed.output and "excluded" in printed.output
    bad = agent_rl("dataset", "build", "kto", "--db", str(db), "-o", str(out), "--failed-rollouts", "zero")
    assert bad.exit_code == 2


def test_the_policy_is_checked_once_for_everyone():
    assert FAILED_ROLLOUT_POLICIES == ("exclude", "zero_reward", "keep")
    assert check_failed_rollouts(None) == "exclude"
    with pytest.raises(FailedRolloutsError) as info:
        check_failed_rollouts("Exclude")
    assert info.value.hint and "zero_reward" in info.value.hint
