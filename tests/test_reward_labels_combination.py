"""One combination rule: the weights scoring applies are the weights the combined reward uses.

Issue 18 ("wrong labels by default"): the combined episode reward mixed in ``answer_quality``
and ignored the weights ``agent-rl plugins`` displays. Now ``agent-rl score`` records the
weight of every reward it runs in ``reward_weights``; ``episode_rewards.weight`` and
``rollouts.total_reward`` apply it, every reader (advantages, datasets, the report) agrees, and
``agent-rl score --explain ROLLOUT`` shows each component, its weight and the sum.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from score_support import agent_rl, rows

import agent_rl_plugin as arl
from agent_rl_plugin.data import build_kto_dataset
from agent_rl_plugin.report import queries
from agent_rl_plugin.rewards.runner import score
from agent_rl_plugin.rewards.weights import ExplainError, explain
from agent_rl_plugin.rl import episode_rewards

ANSWERS = {
    "rl-sentence": "The capital of France is Paris.",
    "rl-wrong": "The capital of France is Lyon.",
    "rl-bare": "Paris",
}
DEFAULTS = ["task_completion", "answer_quality", "llm_judge"]


@pytest.fixture
def db(db_path: Path, plugin_manager) -> Path:
    arl.configure(db=str(db_path), export_delay_ms=50)
    for rollout_id, answer in ANSWERS.items():
        with arl.rollout(task_id="capital", group_id="g", rollout_id=rollout_id, metadata={"ground_truth": "Paris"}):
            arl.record_llm_call("m", [{"role": "user", "content": "Capital of France?"}], answer)
    assert arl.flush()
    arl.shutdown()
    return db_path


def totals(db: Path) -> dict[str, float | None]:
    return {r["rollout_id"]: r["total_reward"] for r in rows(db, "select rollout_id, total_reward from rollouts")}


def values(db: Path, name: str) -> dict[str, float]:
    return {
        r["rollout_id"]: r["value"]
        for r in rows(db, "select rollout_id, value from episode_rewards where name = ?", [name])
    }


def test_heuristics_are_scored_but_not_counted_by_default(db: Path):
    report = score(str(db), rewards=DEFAULTS, workers=0)
    assert report.ok
    assert report.weights == {"task_completion": 1.5, "answer_quality": 0.0, "llm_judge_heuristic": 0.0}
    quality = values(db, "answer_quality")
    assert set(quality) == set(ANSWERS) and any(0.0 < v < 1.0 for v in quality.values())  # scored, shown
    # the combined reward is the task's verdict alone: the heuristics weigh 0
    assert totals(db) == {"rl-sentence": 1.0, "rl-wrong": 0.0, "rl-bare": 1.0}
    recorded = rows(db, "select name, weight, set_by from reward_weights order by name")
    assert [(r["name"], r["weight"]) for r in recorded] == [
        ("answer_quality", 0.0),
        ("llm_judge_heuristic", 0.0),
        ("task_completion", 1.5),
    ]
    assert {r["set_by"] for r in recorded} == {"agent-rl score"}


def test_configured_weights_are_the_weights_every_reader_applies(db: Path, tmp_path: Path):
    config = tmp_path / "rewards.toml"
    config.write_text("[rewards.task_completion]\nweight = 3\n[rewards.answer_quality]\nweight = 1\n")
    result = agent_rl(
        "score",
        "--db",
        str(db),
        "-r",
        "task_completion",
        "-r",
        "answer_quality",
        "-c",
        str(config),
        "-j",
        "0",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["weights"] == {"task_completion": 3.0, "answer_quality": 1.0}
    task, quality = values(db, "task_completion"), values(db, "answer_quality")
    expected = {r: (3 * task[r] + 1 * quality[r]) / 4 for r in ANSWERS}
    assert totals(db) == pytest.approx(expected)

    # -r NAME=W overrides the configured weight and is recorded too (scores are not redone)
    again = agent_rl("score", "--db", str(db), "-r", "task_completion=1", "-r", "answer_quality=2", "-j", "0", "--json")
    assert again.exit_code == 0, again.output
    assert all(s["scored"] == 0 for s in json.loads(again.stdout)["rewards"])
    expected = {r: (task[r] + 2 * quality[r]) / 3 for r in ANSWERS}
    assert totals(db) == pytest.approx(expected)

    with duckdb.connect(str(db), read_only=True) as connection:
        advantages_input = episode_rewards(connection)
        assert dict(
            zip(advantages_input.column("rollout_id").to_pylist(), advantages_input.column("reward").to_pylist())
        ) == pytest.approx(expected)
        kto = build_kto_dataset(connection)
        assert dict(zip(kto["rollout_id"], kto["reward"])) == pytest.approx(expected)
        connection.register("sel", queries.select(connection, None))
        assert {r["rollout_id"]: r["reward"] for r in queries.combined(connection, "sel")} == pytest.approx(expected)


def test_explain_lists_each_component_and_sums_to_total_reward(db: Path):
    assert score(str(db), rewards=DEFAULTS, workers=0, weights={"answer_quality": 0.5}).ok
    view = totals(db)
    with duckdb.connect(str(db), read_only=True) as connection:
        for rollout_id in ANSWERS:
            result = explain(connection, rollout_id)
            assert result.total_reward == view[rollout_id]  # exactly the view's number
            by_name = {c.name: c for c in result.components}
            assert set(by_name) == {"task_completion", "answer_quality", "llm_judge_heuristic"}
            assert (by_name["task_completion"].weight, by_name["answer_quality"].weight) == (1.5, 0.5)
            assert by_name["llm_judge_heuristic"].source == "heuristic" and by_name["llm_judge_heuristic"].weight == 0
            assert result.weight_sum == 2.0
            assert sum(c.contribution for c in result.components) == pytest.approx(result.total_reward)
        with pytest.raises(ExplainError, match="matches several"):
            explain(connection, "rl-")
        with pytest.raises(ExplainError, match="no rollout id starts with"):
            explain(connection, "zz")

    shown = agent_rl("score", "--db", str(db), "--explain", "rl-wr", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["rollout_id"] == "rl-wrong" and data["total_reward"] == view["rl-wrong"]
    assert {c["name"]: c["weight"] for c in data["components"]}["answer_quality"] == 0.5
    table = agent_rl("score", "--db", str(db), "--explain", "rl-sentence")
    assert table.exit_code == 0, table.output
    assert "task_completion" in table.stdout and f"= {view['rl-sentence']:.6g}" in table.stdout
    ambiguous = agent_rl("score", "--db", str(db), "--explain", "rl-")
    assert ambiguous.exit_code == 1 and "matches several" in ambiguous.output


def test_a_name_without_a_recorded_weight_counts_with_weight_one(db: Path):
    # an emitted reward (never scored by a plugin) has no row in reward_weights: weight 1
    arl.configure(db=str(db), export_delay_ms=50)
    with arl.rollout(task_id="capital", rollout_id="rl-emitted"):
        arl.record_llm_call("m", [{"role": "user", "content": "?"}], "Paris")
        arl.emit_reward(0.25, name="feedback")
    assert arl.flush()
    arl.shutdown()
    report = score(str(db), rewards=["task_completion"], workers=0, rollout_ids=["rl-emitted"])
    assert report.ok and report.rewards["task_completion"].not_applicable == 1  # no ground truth here
    with duckdb.connect(str(db), read_only=True) as connection:
        result = explain(connection, "rl-emitted")
    assert [(c.name, c.weight, c.weight_from) for c in result.components] == [("feedback", 1.0, "default")]
    assert result.total_reward == 0.25


def test_naming_rewards_without_weights_keeps_their_recorded_weights(db: Path, tmp_path: Path):
    """``-r NAME`` (no ``=W``) on the dataset and training commands picks the reward with the
    weight the store records, as ``advantages compute -r NAME`` does: the KTO rows' reward is
    then ``rollouts.total_reward``."""
    result = agent_rl("score", "--db", str(db), "-r", "task_completion=3", "-r", "answer_quality=1", "-j", "0")
    assert result.exit_code == 0, result.output
    out = tmp_path / "kto.jsonl"
    built = agent_rl(
        "dataset", "build", "kto", "--db", str(db), "-r", "task_completion", "-r", "answer_quality", "-o", str(out)
    )
    assert built.exit_code == 0, built.output
    kto_rewards = {row["rollout_id"]: row["reward"] for row in map(json.loads, out.read_text().splitlines())}
    assert kto_rewards == pytest.approx(totals(db))
    assert len(set(kto_rewards.values())) > 1  # the weights matter here: 3:1 is not 1:1
