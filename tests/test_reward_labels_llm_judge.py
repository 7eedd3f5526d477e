"""llm_judge without a judge is a keyword heuristic, and its rows say so.

Issue 18 ("wrong labels by default"): with no judge model configured, ``llm_judge`` fell back to
a keyword heuristic but stored its rows as ``source = 'llm'``, as if a model had judged. Now
those rows are named ``llm_judge_heuristic`` with source ``heuristic`` (weight 0 by default),
and only a configured judge writes ``llm_judge`` rows with source ``llm``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from score_support import rows

import agent_rl_plugin as arl
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.llm_judge import KeywordJudge, LLMJudge
from agent_rl_plugin.rewards.runner import score

REFERENCE = "Rayleigh scattering of sunlight by air molecules makes the sky blue"


def graded(messages):  # a stand-in for a real model client: imported by name from a config file
    return "Looks right.\nScore: 9/10"


@pytest.fixture
def db(db_path: Path, plugin_manager) -> Path:
    arl.configure(db=str(db_path), export_delay_ms=50)
    for i, answer in enumerate(["Sunlight scattering by air molecules makes the sky blue.", "It reflects the sea."]):
        with arl.rollout(task_id="sky", rollout_id=f"judge-{i}", metadata={"ground_truth": REFERENCE}):
            arl.record_llm_call("m", [{"role": "user", "content": "Why is the sky blue?"}], answer)
    assert arl.flush()
    arl.shutdown()
    return db_path


def test_without_a_judge_rows_are_the_heuristics_never_llm(db: Path):
    report = score(str(db), rewards=["llm_judge"], workers=0)  # the reward's class name still selects it
    assert report.ok and list(report.rewards) == ["llm_judge_heuristic"]
    written = rows(
        db, "select name, source, value, metrics->>'$.heuristic' as heuristic from rewards order by rollout_id"
    )
    assert [(r["name"], r["source"], r["heuristic"]) for r in written] == [
        ("llm_judge_heuristic", "heuristic", "true"),
    ] * 2
    assert written[0]["value"] > written[1]["value"]  # the heuristic still ranks by key terms
    assert rows(db, "select count(*) as n from rewards where source = 'llm'") == [{"n": 0}]
    assert report.weights == {"llm_judge_heuristic": 0.0}  # shown, not counted by default


def test_a_configured_judge_writes_llm_rows(db: Path):
    config = RLConfig.from_env(rewards={"llm_judge": {"judge": f"{__name__}:graded"}})
    report = score(str(db), rewards=["llm_judge"], workers=0, config=config)
    assert report.ok and list(report.rewards) == ["llm_judge"]
    written = rows(db, "select distinct name, source, value from rewards")
    assert written == [{"name": "llm_judge", "source": "llm", "value": 0.9}]
    assert report.weights == {"llm_judge": 1.0}


def test_the_heuristic_weight_can_be_given_under_either_name(db: Path):
    for key in ("llm_judge", "llm_judge_heuristic"):
        config = RLConfig.from_env(rewards={key: {"weight": 0.5}})
        assert score(str(db), rewards=["llm_judge"], workers=0, config=config).weights == {"llm_judge_heuristic": 0.5}


def test_instances_label_themselves():
    rollout = Rollout(rollout_id="r", final_output="scattering of sunlight", ground_truth=REFERENCE)
    heuristic = LLMJudge()
    assert (heuristic.name, heuristic.source, heuristic.weight) == ("llm_judge_heuristic", "heuristic", 0.0)
    assert heuristic.score(rollout).metrics["heuristic"] is True
    assert LLMJudge(judge=KeywordJudge()).source == "heuristic"  # the keyword judge given explicitly is no LLM
    real = LLMJudge(judge=graded)
    assert (real.name, real.source, real.weight) == ("llm_judge", "llm", 1.0)
    assert real.score(rollout).metrics["heuristic"] is False
    with pytest.raises(ValueError, match="cannot import judge"):
        LLMJudge(judge="no_such_module_xyz:grade")
    with pytest.raises(ValueError, match="package.module:function"):
        LLMJudge(judge=42)
