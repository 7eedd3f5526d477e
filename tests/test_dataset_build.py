"""KTO rows and GRPO groups from hand-written stores: splitting, repair, fall-backs, rewards,
labels, groups, and every fault the builders report."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent_rl_plugin.data import BuildReport, DatasetError, LabelRule, build_grpo_dataset, build_kto_dataset
from agent_rl_plugin.data.synthetic import write_reward, write_rollout
from agent_rl_plugin.store import connect_writer

SYSTEM = {"role": "system", "content": "You are terse."}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "lookup", **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def tool(call_id: str, result: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": result}


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def well_behaved(question: str, final: str) -> list[tuple[list, list]]:
    """Two LLM calls; the second sees the whole history."""
    first_in = [SYSTEM, user(question)]
    first_out = [call("c1", item="pen")]
    second_in = first_in + first_out + [tool("c1", "1.5")]
    return [(first_in, first_out), (second_in, [answer(final)])]


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.duckdb"
    connection = connect_writer(str(path))
    yield path, connection
    connection.close()


def build(store, fn=build_kto_dataset, **kwargs):
    path, connection = store
    connection.execute("CHECKPOINT")
    report = BuildReport()
    return fn(connection, report=report, **kwargs), report


def test_kto_row_splits_at_the_first_assistant_message(store):
    _, con = store
    write_rollout(con, "r1", task_id="t", group_id="g", llm_calls=well_behaved("price?", "1.5"), rewards={"ok": 1.0})
    write_rollout(
        con, "r2", task_id="t", group_id="g", llm_calls=well_behaved("price?", "2"), rewards={"ok": 0.0}, start_s=1
    )
    ds, report = build(store)
    assert ds.column_names == ["prompt", "completion", "label", "rollout_id", "group_id", "task_id", "reward"]
    row = ds[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert [m["role"] for m in row["completion"]] == ["assistant", "tool", "assistant"]
    first = row["completion"][0]
    assert first["content"] == ""
    assert first["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"item":"pen"}'}}
    ]
    assert row["completion"][1]["tool_call_id"] == "c1"
    assert row["completion"][2]["content"] == "1.5"
    assert ds["label"] == [True, False]
    assert ds["rollout_id"] == ["r1", "r2"]
    assert report.labels == {"desirable": 1, "undesirable": 1}
    assert report.rows == 2 and report.rollouts == 2 and not report.left_out


def test_assistant_turns_missing_from_the_history_are_restored(store):
    _, con = store
    # an agent that appends tool results but never its own tool-call messages
    calls = [
        ([user("q")], [call("a", item="x")]),
        ([user("q"), tool("a", "1")], [call("b", item="y")]),
        ([user("q"), tool("a", "1"), tool("b", "2")], [answer("3")]),
    ]
    write_rollout(con, "r1", llm_calls=calls, rewards={"ok": 1.0})
    ds, report = build(store)
    completion = ds[0]["completion"]
    assert [(m["role"], (m["tool_calls"] or [{}])[0].get("id"), m["tool_call_id"]) for m in completion] == [
        ("assistant", "a", None),
        ("tool", None, "a"),
        ("assistant", "b", None),
        ("tool", None, "b"),
        ("assistant", None, None),
    ]
    assert ds[0]["prompt"] == [{"role": "user", "content": "q", "tool_calls": None, "tool_call_id": None, "name": None}]
    assert any("restored" in note for note in report.notes)


def test_rollout_without_llm_calls_uses_the_agent_input_and_output(store):
    _, con = store
    write_rollout(con, "r1", agent_input={"question": "How much?"}, agent_output="3 euros", rewards={"ok": 1.0})
    write_rollout(
        con,
        "r2",
        agent_input={"messages": [SYSTEM, user("hi")]},
        agent_output={"content": "hello"},
        rewards={"ok": 1.0},
        start_s=1,
    )
    write_rollout(con, "r3", agent_input={"question": "?"}, rewards={"ok": 1.0}, start_s=2)  # no output at all
    ds, report = build(store)
    assert ds["rollout_id"] == ["r1", "r2"]
    assert [(m["role"], m["content"]) for m in ds[0]["prompt"]] == [("user", "How much?")]
    assert [(m["role"], m["content"]) for m in ds[0]["completion"]] == [("assistant", "3 euros")]
    assert [m["role"] for m in ds[1]["prompt"]] == ["system", "user"]
    assert ds[1]["completion"][0]["content"] == "hello"
    assert report.left_out == {"no LLM messages and no agent output": 1}
    assert report.examples["no LLM messages and no agent output"] == ["r3"]
    assert any("no LLM messages" in note for note in report.notes)


def test_llm_calls_without_captured_messages_fall_back_to_input_and_output(store):
    _, con = store
    write_rollout(con, "r1", llm_calls=[(None, None)], agent_input="say hi", agent_output="hi", rewards={"ok": 1.0})
    ds, _ = build(store)
    assert ds[0]["prompt"][0]["content"] == "say hi" and ds[0]["completion"][0]["content"] == "hi"


def test_conversations_without_an_answer_are_left_out_and_reported(store):
    _, con = store
    write_rollout(con, "r1", llm_calls=[([user("q")], [])], rewards={"ok": 1.0})
    write_rollout(con, "r2", llm_calls=[([answer("hello")], [answer("again")])], rewards={"ok": 1.0}, start_s=1)
    write_rollout(con, "r3", llm_calls=[([user("q")], [answer("a")])], rewards={"ok": 1.0}, start_s=2)
    ds, report = build(store)
    assert ds["rollout_id"] == ["r3"]
    assert report.left_out == {
        "no assistant message in the conversation": 1,
        "the conversation starts with an assistant message (empty prompt)": 1,
    }


def test_message_forms_are_normalised(store):
    _, con = store
    parts_in = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    parts_out = [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "t", "name": "f", "arguments": {"a": 1}}]},
    ]
    write_rollout(con, "r1", llm_calls=[(parts_in, parts_out)], rewards={"ok": 1.0})
    openai_in = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    openai_out = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "g", "arguments": '{"b": 2}'}}],
        }
    ]
    write_rollout(con, "r2", llm_calls=[(openai_in, openai_out)], rewards={"ok": 1.0}, start_s=1)
    write_rollout(
        con,
        "r3",
        llm_calls=[('[{"role": "user", "content": "cut', [answer("x")])],
        rewards={"ok": 1.0},
        agent_input="fallback",
        agent_output="x",
        start_s=2,
    )
    ds, _ = build(store)
    one, two, three = ds
    assert one["prompt"][0]["content"] == "hi"
    assert one["completion"][0]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a":1}'}
    assert two["prompt"][0]["content"] == "ab"
    assert two["completion"][0]["content"] == ""
    assert two["completion"][0]["tool_calls"][0]["function"] == {"name": "g", "arguments": '{"b": 2}'}
    # input messages that are not valid JSON (cut at the size limit): the agent's input and output
    assert three["prompt"][0]["content"] == "fallback" and three["completion"][0]["content"] == "x"


def test_empty_selection_bad_sql_and_writing_sql_are_clear_errors(store):
    _, con = store
    write_rollout(con, "r1", task_id="t", llm_calls=well_behaved("q", "a"), rewards={"ok": 1.0})
    with pytest.raises(DatasetError, match=r"^no rollouts match where \"task_id = 'zz'\""):
        build(store, where="task_id = 'zz'")
    with pytest.raises(DatasetError, match="^SQL error in where: .*nope") as err:
        build(store, where="nope = 1")
    assert "\n" not in str(err.value)
    with pytest.raises(DatasetError, match="^SQL error in the query"):
        build(store, sql="selec 1")
    with pytest.raises(DatasetError, match="must return a rollout_id column"):
        build(store, sql="select task_id from rollouts")
    with pytest.raises(DatasetError, match="must only read"):
        build(store, sql="delete from rewards")
    with pytest.raises(DatasetError, match="either where or sql"):
        build(store, where="true", sql="select rollout_id from rollouts")
    ds, _ = build(store, sql="select rollout_id from rewards where name = 'ok'")
    assert ds["rollout_id"] == ["r1"]


def test_nan_reward_names_the_rollout(store):
    _, con = store
    write_rollout(con, "r1", llm_calls=well_behaved("q", "a"), rewards={"ok": 1.0})
    write_rollout(con, "r-bad", llm_calls=well_behaved("q", "a"), rewards={"ok": math.nan}, start_s=1)
    with pytest.raises(DatasetError, match="'ok' of rollout r-bad is NaN"):
        build(store)
    ds, _ = build(store, where="rollout_id = 'r1'")
    assert ds.num_rows == 1


def test_rewards_latest_row_per_name_errors_ignored_re_emitted_replaced_and_weights(store):
    _, con = store
    write_rollout(con, "r1", llm_calls=well_behaved("q", "a"))
    write_reward(con, "r1", "judge", 0.0, created_s=1)
    write_reward(con, "r1", "judge", 0.8, created_s=2)  # re-scored: the latest counts
    write_reward(con, "r1", "judge", None, error="timeout", created_s=3)  # error rows never count
    write_reward(con, "r1", "bonus", 0.25, source="emitted", created_s=1)
    write_reward(con, "r1", "bonus", 0.5, source="emitted", created_s=2)  # re-emitted: replaces, does not add
    write_reward(con, "r1", "judge", 5.0, step_index=0)  # step rewards are not episode rewards
    ds, report = build(store)
    assert ds[0]["reward"] == pytest.approx((0.8 + 0.5) / 2)
    assert report.reward_names == ["bonus", "judge"]
    ds, _ = build(store, weights={"judge": 3.0, "bonus": 1.0})
    assert ds[0]["reward"] == pytest.approx((3 * 0.8 + 0.5) / 4)
    ds, report = build(store, weights=["judge"])
    assert ds[0]["reward"] == pytest.approx(0.8) and report.reward_names == ["judge"]


def test_rollouts_without_rewards_are_left_out_and_none_at_all_is_an_error(store):
    _, con = store
    write_rollout(con, "r1", llm_calls=well_behaved("q", "a"), rewards={"ok": 1.0})
    write_rollout(con, "r2", llm_calls=well_behaved("q", "a"), start_s=1)
    ds, report = build(store)
    assert ds["rollout_id"] == ["r1"]
    assert list(report.left_out.values()) == [1] and "no usable episode reward" in next(iter(report.left_out))
    with pytest.raises(DatasetError, match="none of the 1 matching rollouts gave a KTO row"):
        build(store, where="rollout_id = 'r2'")


def _scored_group(con, values, group="g", prefix="r", start=0.0):
    for i, value in enumerate(values):
        write_rollout(
            con,
            f"{prefix}{i}",
            task_id="t",
            group_id=group,
            llm_calls=well_behaved("q", str(i)),
            rewards={"ok": value},
            start_s=start + i,
        )


def test_label_rules(store):
    _, con = store
    _scored_group(con, [0.1, 0.2, 0.3, 0.9])
    ds, _ = build(store, label_rule=LabelRule("threshold", threshold=0.25))
    assert ds["label"] == [False, False, True, True]
    ds, _ = build(store, label_rule="quantile")
    assert ds["label"] == [False, False, True, True]
    ds, report = build(store, label_rule={"method": "group", "top_k": 1, "bottom_k": 1})
    assert ds["rollout_id"] == ["r0", "r3"] and ds["label"] == [False, True]
    assert sum(report.left_out.values()) == 2 and "label None" in next(iter(report.left_out))
    with pytest.raises(DatasetError, match="label rule must be one of"):
        LabelRule("median")


def test_one_class_labels_and_equal_rewards_are_reported(store):
    _, con = store
    _scored_group(con, [1.0, 1.0, 1.0])
    ds, report = build(store)
    assert ds["label"] == [True, True, True]
    assert any(note.startswith("one-class labels: all 3 rows are desirable") for note in report.notes)
    with pytest.raises(DatasetError, match="none of the 3"):
        build(store, label_rule="group")  # a group of equal rewards gives no labels


def test_grpo_groups_rewards_and_advantages(store):
    from agent_rl_plugin.rl import grpo_advantages

    _, con = store
    _scored_group(con, [0.0, 1.0, 0.5], group="g1", prefix="a")
    _scored_group(con, [0.2], group="g2", prefix="b", start=10)  # a group of one
    _scored_group(con, [0.7, 0.7], group="g3", prefix="c", start=20)  # equal rewards
    ds, report = build(store, build_grpo_dataset)
    assert ds.column_names == ["prompt", "completions", "rewards", "advantages", "group_id", "task_id", "rollout_ids"]
    assert ds["group_id"] == ["g1", "g3"]
    first = ds[0]
    assert first["rollout_ids"] == ["a0", "a1", "a2"]
    assert first["rewards"] == [0.0, 1.0, 0.5]
    assert np.allclose(first["advantages"], grpo_advantages([0.0, 1.0, 0.5], ["g1"] * 3))
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert len(first["completions"]) == 3 and first["completions"][1][-1]["content"] == "1"
    assert ds[1]["advantages"] == [0.0, 0.0]
    assert report.left_out == {"in a group smaller than min_group_size (2)": 1}
    assert report.groups == 2 and report.mean_group_size == 2.5
    assert any("all-equal rewards" in note for note in report.notes)
    kept, report = build(store, build_grpo_dataset, min_group_size=1)
    assert kept["group_id"] == ["g1", "g2", "g3"] and kept[1]["advantages"] == [0.0]


def test_grpo_groups_fall_back_to_task_id_and_report_mixed_prompts(store):
    _, con = store
    write_rollout(con, "r1", task_id="t", llm_calls=well_behaved("q1", "a"), rewards={"ok": 1.0})
    write_rollout(con, "r2", task_id="t", llm_calls=well_behaved("q2", "a"), rewards={"ok": 0.0}, start_s=1)
    ds, report = build(store, build_grpo_dataset)
    assert ds["group_id"] == ["t"] and ds[0]["prompt"][1]["content"] == "q1"
    assert any("different prompts" in note for note in report.notes)
    write_rollout(con, "solo", llm_calls=well_behaved("q", "a"), rewards={"ok": 1.0}, start_s=5)
    with pytest.raises(DatasetError, match="formed a GRPO group"):
        build(store, build_grpo_dataset, where="rollout_id = 'solo'")


def test_fast_selection_matches_the_rollouts_view(store):
    from agent_rl_plugin.data.sql import ROOTS_SQL, arrow

    _, con = store
    _scored_group(con, [0.1, 0.2, 0.3])
    write_rollout(con, "lonely", agent_input="x", start_s=9)
    order = " ORDER BY start_time, rollout_id"
    fast = arrow(con, ROOTS_SQL + order)
    view = arrow(con, "SELECT rollout_id, task_id, group_id, start_time FROM rollouts" + order)
    assert fast.equals(view)


@pytest.mark.parametrize("failed_rollouts", ["exclude", "zero_reward"])
def test_build_datasets_shares_the_episodes_and_equals_the_separate_builds(store, failed_rollouts, monkeypatch):
    import agent_rl_plugin.data.build as build_module
    import agent_rl_plugin.data.grpo as grpo_module
    import agent_rl_plugin.data.kto as kto_module
    from agent_rl_plugin.data import build_datasets

    path, con = store
    _scored_group(con, [0.0, 1.0, 0.5], group="g1", prefix="a")
    _scored_group(con, [0.2], group="g2", prefix="b", start=10)  # a group of one: GRPO leaves it out
    write_rollout(con, "quiet", task_id="t", group_id="g1", llm_calls=well_behaved("q", "x"), start_s=30)  # no reward
    write_rollout(
        con, "broken", task_id="t", group_id="g1", llm_calls=well_behaved("q", "y"), rewards={"ok": 1.0}, start_s=31
    )
    con.execute("UPDATE spans SET status_code = 'ERROR' WHERE rollout_id = 'broken' AND is_rollout_root")
    options = {"where": "rollout_id <> 'c0'", "weights": ["ok"], "failed_rollouts": failed_rollouts}
    kto, kto_report = build(store, label_rule="quantile", **options)
    grpo, grpo_report = build(store, build_grpo_dataset, min_group_size=2, **options)
    reports = {"grpo": BuildReport(), "kto": BuildReport()}
    calls = []
    for module in (build_module, kto_module, grpo_module):  # count every episode pass
        monkeypatch.setattr(
            module, "episode_rows", lambda *a, _f=module.episode_rows, **k: calls.append(1) or _f(*a, **k)
        )
    both = build_datasets(con, ("grpo", "kto"), label_rule="quantile", min_group_size=2, reports=reports, **options)
    assert list(both) == ["grpo", "kto"] and len(calls) == 1  # one episode pass for both
    assert both["kto"].to_list() == kto.to_list() and both["grpo"].to_list() == grpo.to_list()
    assert reports["kto"].to_dict() == kto_report.to_dict() and reports["grpo"].to_dict() == grpo_report.to_dict()
    assert kto_report.left_out and kto_report.to_dict() != grpo_report.to_dict()  # the reports say something
    assert len(build_datasets(path, ("kto",))["kto"]) > 0  # a path works too
    with pytest.raises(DatasetError, match="kinds must be distinct names"):
        build_datasets(con, ("kto", "steps"))
    with pytest.raises(DatasetError, match="kinds must be distinct names"):
        build_datasets(con, ("kto", "kto"))


def test_reward_names_are_every_name_read_sorted(store):
    _, con = store
    names = ["zeta", "mid", "kappa", "gamma", "delta", "beta", "alpha"]  # not in order: the report sorts
    for i, name in enumerate(names):
        rewards = {name: 1.0, "zeta": 0.5} if i else {"zeta": 1.0}
        write_rollout(con, f"r{i}", task_id="t", llm_calls=well_behaved("q", str(i)), rewards=rewards, start_s=i)
    _, report = build(store)
    assert report.reward_names == sorted(names)
    _, report = build(store, weights={"zeta": 1.0})
    assert report.reward_names == ["zeta"]
