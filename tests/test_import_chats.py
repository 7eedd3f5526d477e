"""``agent-rl import chats FILE.jsonl``: saved OpenAI-format conversations become rollouts."""

from __future__ import annotations

import json

import pytest
from score_support import agent_rl, rows

import agent_rl_plugin as arl
from agent_rl_plugin.rewards.runner import score
from agent_rl_plugin.rollouts import ChatImportError, import_chats

# A support conversation: the assistant calls two tools at once; their results come back in
# the other order (matched by tool_call_id); one result reports an error.
SUPPORT_CHAT = {
    "task_id": "refund-17",
    "metadata": {"channel": "email", "ground_truth": "refund issued"},
    "model": "gpt-4o-2024-08-06",
    "reward": {"resolved": 1.0, "csat": 0.8},
    "messages": [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Order A17 arrived broken, please refund it."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_order", "type": "function",
                 "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"A17\"}"}},
                {"id": "call_policy", "type": "function",
                 "function": {"name": "refund_policy", "arguments": "{\"category\": \"damaged\"}"}},
            ],
            "usage": {"prompt_tokens": 52, "completion_tokens": 31},
        },
        {"role": "tool", "tool_call_id": "call_policy", "content": "Error: policy service unavailable"},
        {"role": "tool", "tool_call_id": "call_order", "content": "{\"status\": \"delivered\", \"total\": 39.9}"},
        {"role": "assistant", "content": "I have issued a refund of 39.90 for order A17."},
    ],
}


def write_jsonl(path, *lines) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


@pytest.fixture
def db(tmp_path, plugin_manager):
    return tmp_path / "chats.duckdb"


def test_a_realistic_conversation_becomes_a_rollout_with_ordered_steps(tmp_path, db):
    file = write_jsonl(tmp_path / "chats.jsonl", SUPPORT_CHAT)
    result = agent_rl("import", "chats", file, "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["imported"], report["llm_calls"], report["tool_calls"], report["rewards"]) == (1, 2, 2, 2)
    (rollout_id,) = report["rollout_ids"]

    (rollout,) = rows(db, "select * from rollouts")
    assert (rollout["rollout_id"], rollout["task_id"], rollout["status"]) == (rollout_id, "refund-17", "ok")
    assert rollout["group_id"] == f"refund-17/{report['import_id']}"
    assert rollout["agent_name"] == "imported_chat"
    assert json.loads(rollout["output"]) == "I have issued a refund of 39.90 for order A17."
    assert (rollout["input_tokens"], rollout["output_tokens"]) == (52, 31)
    assert rollout["total_reward"] == pytest.approx((1.0 + 0.8) / 2)  # the mean of resolved and csat
    metadata = json.loads(rollout["metadata"])
    assert metadata["channel"] == "email" and metadata["import_line"] == 1
    assert metadata["import_source"] == "chats.jsonl" and len(metadata["import_hash"]) == 64

    steps = rows(db, "select step_index, kind, name, input, output from steps order by step_index")
    assert [(s["kind"], s["name"]) for s in steps] == [
        ("llm", "gpt-4o-2024-08-06"), ("tool", "refund_policy"), ("tool", "lookup_order"), ("llm", "gpt-4o-2024-08-06"),
    ]
    first, policy, order, last = steps
    assert [m["role"] for m in json.loads(first["input"])] == ["system", "user"]
    (reply,) = json.loads(first["output"])
    assert [c["function"]["name"] for c in reply["tool_calls"]] == ["lookup_order", "refund_policy"]
    assert json.loads(policy["input"]) == {"category": "damaged"}
    assert json.loads(policy["output"]) == "Error: policy service unavailable"
    assert json.loads(order["input"]) == {"order_id": "A17"}
    assert json.loads(order["output"]) == '{"status": "delivered", "total": 39.9}'
    assert [m["role"] for m in json.loads(last["input"])] == ["system", "user", "assistant", "tool", "tool"]
    assert json.loads(last["output"])[0]["content"].startswith("I have issued a refund")

    calls = rows(db, "select tool_name, call_id from tool_calls order by start_time")
    assert [(c["tool_name"], c["call_id"]) for c in calls] == [("refund_policy", "call_policy"), ("lookup_order", "call_order")]
    rewards = rows(db, "select name, value, source, step_index from rewards order by name")
    assert [(r["name"], r["value"], r["source"], r["step_index"]) for r in rewards] == [
        ("csat", 0.8, "emitted", None), ("resolved", 1.0, "emitted", None),
    ]
    # all spans of the rollout: the rollout root, one agent span, 2 LLM and 2 tool spans
    assert rows(db, f"select count(*) as n from spans where rollout_id = '{rollout_id}'")[0]["n"] == 6


def test_imported_rollouts_can_be_scored(tmp_path, db):
    plain = {"task_id": "weather", "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tool_calls": [{"id": "w1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "w1", "content": "18C, sunny"},
        {"role": "assistant", "content": "18C and sunny."},
    ]}
    report = import_chats(write_jsonl(tmp_path / "chats.jsonl", SUPPORT_CHAT, plain), db=db)
    arl.shutdown()
    scored = score(str(db), rewards=["tool_success"], workers=0)
    assert scored.ok and scored.rewards["tool_success"].scored == 2 and scored.rewards["tool_success"].step_rows == 3
    values = {
        (r["rollout_id"], r["step_index"]): r["value"]
        for r in rows(db, "select rollout_id, step_index, value from rewards where name = 'tool_success'")
    }
    support, weather = report.rollout_ids
    assert values[(support, 1)] == -1.0  # "Error: policy service unavailable"
    assert values[(support, 2)] == 1.0
    assert values[(support, None)] == 0.0
    assert values[(weather, 1)] == 1.0 and values[(weather, None)] == 1.0


def test_bare_message_lists_and_task_ids(tmp_path, db):
    opening = [{"role": "user", "content": "Say hi"}]
    lines = [
        opening + [{"role": "assistant", "content": "hi"}],
        opening + [{"role": "assistant", "content": "hello!"}],
        {"messages": [{"role": "user", "content": "Other"}, {"role": "assistant", "content": "ok"}],
         "metadata": {"ticket": "T-9"}},
        {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "task_id": 12, "group_id": "g"},
    ]
    report = import_chats([json.dumps(line) for line in lines], db=db, task_key="metadata.ticket")
    arl.shutdown()
    stored = {r["rollout_id"]: r for r in rows(db, "select rollout_id, task_id, group_id from rollouts")}
    ids = [stored[rid]["task_id"] for rid in report.rollout_ids]
    assert ids[0] == ids[1] and ids[0].startswith("chat-")  # the same opening: the same task
    assert ids[2:] == ["T-9", "12"]
    assert stored[report.rollout_ids[0]]["group_id"] == stored[report.rollout_ids[1]]["group_id"]
    assert stored[report.rollout_ids[3]]["group_id"] == "g"


BAD_LINES = [
    (json.dumps(SUPPORT_CHAT), None),
    ("{not json", "invalid JSON"),
    (json.dumps({"task_id": "x"}), 'expected a list of messages or an object with "messages"'),
    (json.dumps([{"role": "user", "content": "only a question"}]), "no assistant message"),
    (json.dumps([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}]),
     "message 2: tool_call_id 'zz' matches no earlier tool call"),
    (json.dumps({"messages": SUPPORT_CHAT["messages"], "reward": "high"}), "reward 'reward' must be a finite number"),
    (json.dumps([{"role": "robot", "content": "beep"}]), "message 1: role must be one of"),
    (json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]),
     "message 2: tool call 1 has no function name"),
]


def test_bad_lines_are_named_and_nothing_is_imported(tmp_path, db):
    file = write_jsonl(tmp_path / "chats.jsonl", *[line for line, _ in BAD_LINES])
    result = agent_rl("import", "chats", file, "--db", str(db))
    assert result.exit_code == 1
    assert "7 bad lines in chats.jsonl" in result.stderr and "nothing was imported" in result.stderr
    for number, (_, problem) in enumerate(BAD_LINES, start=1):
        if problem:
            assert f"line {number}: " in result.stderr and problem in result.stderr.replace("\n", "")
    assert "--skip-bad" in result.stderr
    assert not db.exists() or rows(db, "select count(*) as n from rollouts")[0]["n"] == 0


def test_skip_bad_imports_the_good_lines(tmp_path, db):
    file = write_jsonl(tmp_path / "chats.jsonl", *[line for line, _ in BAD_LINES])
    result = agent_rl("import", "chats", file, "--db", str(db), "--skip-bad", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["imported"] == 1 and [b["line"] for b in report["bad"]] == [2, 3, 4, 5, 6, 7, 8]
    assert rows(db, "select task_id from rollouts") == [{"task_id": "refund-17"}]
    text = agent_rl("import", "chats", file, "--db", str(db), "--skip-bad")
    assert "Imported 1 conversations" in text.stdout and "Skipped 7 bad lines in" in text.stdout


def test_reimporting_makes_new_rollouts_unless_dedupe(tmp_path, db):
    other = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    file = write_jsonl(tmp_path / "chats.jsonl", SUPPORT_CHAT, other)
    for _ in range(2):
        assert agent_rl("import", "chats", file, "--db", str(db)).exit_code == 0
    assert rows(db, "select count(*) as n from rollouts")[0]["n"] == 4

    again = agent_rl("import", "chats", file, "--db", str(db), "--dedupe", "--json")
    assert again.exit_code == 0, again.output
    assert (json.loads(again.stdout)["imported"], json.loads(again.stdout)["duplicates"]) == (0, 2)
    # same content, other key order and spacing: still a duplicate; a new line is imported
    reordered = json.dumps(dict(reversed(list(SUPPORT_CHAT.items()))), indent=None, separators=(", ", ": "))
    new = {"messages": [{"role": "user", "content": "new"}, {"role": "assistant", "content": "yes"}]}
    file2 = write_jsonl(tmp_path / "more.jsonl", reordered, new, new)
    more = agent_rl("import", "chats", file2, "--db", str(db), "--dedupe", "--json")
    assert (json.loads(more.stdout)["imported"], json.loads(more.stdout)["duplicates"]) == (1, 2)
    assert rows(db, "select count(*) as n from rollouts")[0]["n"] == 5
    text = agent_rl("import", "chats", file2, "--db", str(db), "--dedupe")
    assert "Skipped 3 already imported (--dedupe)." in text.stdout


def test_dedupe_into_a_new_database_and_missing_file(tmp_path, db):
    file = write_jsonl(tmp_path / "chats.jsonl", SUPPORT_CHAT, SUPPORT_CHAT)
    report = import_chats(file, db=db, dedupe=True)
    assert (report.imported, report.duplicates) == (1, 1)
    with pytest.raises(ChatImportError, match="no chat file at"):
        import_chats(tmp_path / "missing.jsonl", db=db)
    result = agent_rl("import", "chats", str(tmp_path / "missing.jsonl"), "--db", str(db))
    assert result.exit_code == 1 and "no chat file at" in result.stderr


def test_legacy_function_calls_and_results_without_ids(tmp_path, db):
    chat = [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None, "function_call": {"name": "add", "arguments": "{\"a\": 2, \"b\": 3}"}},
        {"role": "function", "name": "add", "content": "5"},
        {"role": "assistant", "content": "5"},
    ]
    report = import_chats([chat], db=db)
    arl.shutdown()
    (call,) = rows(db, "select tool_name, arguments, result from tool_calls")
    assert (call["tool_name"], json.loads(call["arguments"]), json.loads(call["result"])) == ("add", {"a": 2, "b": 3}, "5")
    assert report.tool_calls == 1


def test_the_example_file_imports(db):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "rollouts" / "chats.jsonl"
    report = import_chats(example, db=db)
    assert (report.imported, report.llm_calls, report.tool_calls, report.rewards) == (3, 5, 3, 3)
