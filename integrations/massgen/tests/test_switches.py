"""The MassGen-style RLConfig switches: enable_rl, enable_tool_rewards,
enable_answer_quality_rewards, enable_coordination_rewards, collect_only."""

from __future__ import annotations

import asyncio

import pytest
from massgen.chat_agent import SingleAgent

import agent_rl_massgen as arm
from fakes import ScriptedBackend, content, executed_tool, two_agent_scripts

QUESTION = [{"role": "user", "content": "What is 2+2?"}]
ALL_REWARDS = dict(enable_tool_rewards=True, enable_answer_quality_rewards=True, enable_coordination_rewards=True)


def run(db_path, instance_kwargs=None, **config):
    agents = {name: SingleAgent(backend=ScriptedBackend(script), agent_id=name) for name, script in two_agent_scripts().items()}
    orchestrator = arm.RLOrchestrator(
        agents=agents, rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50, **config), **(instance_kwargs or {})
    )

    async def go():
        return [c async for c in orchestrator.chat(QUESTION)]

    return asyncio.run(go())


def rewards(store):
    return {r["name"]: r for r in store.rows("select name, value, reason, source from rewards")}


def test_defaults_record_without_rewards(db_path, store):
    run(db_path)
    assert store.rows("select count(*) as n from rollouts")[0]["n"] == 1
    assert rewards(store) == {}


def test_all_reward_switches(db_path, store):
    run(db_path, **ALL_REWARDS)
    got = rewards(store)
    assert set(got) == {"tool_success", "answer_quality", "coordination"}
    assert got["tool_success"]["value"] == 1.0  # the one calculator call succeeded
    assert 0.0 <= got["answer_quality"]["value"] <= 1.0
    assert "consensus reached" in got["coordination"]["reason"]
    assert "2 round(s)" in got["coordination"]["reason"]
    assert {r["source"] for r in got.values()} == {"emitted"}
    (rollout,) = store.rows("select total_reward from rollouts")
    # the episode reward: the mean over reward names (docs/schema.md, view episode_rewards)
    assert rollout["total_reward"] == pytest.approx(sum(r["value"] for r in got.values()) / len(got))


@pytest.mark.parametrize(
    "switch, name",
    [("enable_tool_rewards", "tool_success"), ("enable_answer_quality_rewards", "answer_quality"),
     ("enable_coordination_rewards", "coordination")],
)
def test_each_switch_alone(db_path, store, switch, name):
    run(db_path, **{switch: True})
    assert set(rewards(store)) == {name}


def test_collect_only_records_but_emits_no_reward(db_path, store):
    run(db_path, collect_only=True, **ALL_REWARDS)
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 6
    assert store.rows("select count(*) as n from events where event_type = 'vote'")[0]["n"] == 3
    assert rewards(store) == {}


def test_enable_rl_false_in_config_records_nothing(db_path):
    chunks = run(db_path, enable_rl=False, **ALL_REWARDS)
    assert chunks  # MassGen ran
    assert not db_path.exists()


def test_enable_rl_false_for_one_instance(db_path, store):
    # another, recorded, run first so the database exists
    agent = arm.RLSingleAgent(backend=ScriptedBackend([[content("hello")]]), agent_id="other",
                              rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50))

    async def go():
        return [c async for c in agent.chat([{"role": "user", "content": "hi"}])]

    asyncio.run(go())
    run(db_path, instance_kwargs={"enable_rl": False}, **ALL_REWARDS)
    assert store.rows("select count(*) as n from rollouts")[0]["n"] == 1
    assert store.rows("select count(*) as n from events")[0]["n"] == 0
    assert store.rows("select count(*) as n from llm_calls")[0]["n"] == 1


def test_tool_rewards_for_a_single_agent(db_path, store):
    script = [[*executed_tool("search", {"q": "x"}, "", "t1"), *executed_tool("run", {"code": "1/0"}, "", "t2", error="ZeroDivisionError"),
               content("Paris is the capital of France.")]]
    agent = arm.RLSingleAgent(backend=ScriptedBackend(script), agent_id="solo",
                              rl_config=arm.RLConfig(db_path=str(db_path), export_delay_ms=50, enable_tool_rewards=True,
                                                     enable_answer_quality_rewards=True))

    async def go():
        return [c async for c in agent.chat([{"role": "user", "content": "capital of France?"}])]

    asyncio.run(go())
    got = rewards(store)
    assert got["tool_success"]["value"] == pytest.approx((-0.5 + -1.0) / 2)
    assert "answer_quality" in got
    tools = store.rows("select tool_name, status, error from tool_calls order by start_time")
    assert [(t["tool_name"], t["status"]) for t in tools] == [("search", "ok"), ("run", "error")]
    assert "ZeroDivisionError" in tools[1]["error"]


def test_switches_from_environment(db_path, store, monkeypatch):
    monkeypatch.setenv("AGENT_RL_ENABLE_COORDINATION_REWARDS", "1")
    monkeypatch.setenv("AGENT_RL_DB", str(db_path))
    agents = {name: SingleAgent(backend=ScriptedBackend(script), agent_id=name) for name, script in two_agent_scripts().items()}
    orchestrator = arm.RLOrchestrator(agents=agents)

    async def go():
        return [c async for c in orchestrator.chat(QUESTION)]

    asyncio.run(go())
    assert set(rewards(store)) == {"coordination"}
