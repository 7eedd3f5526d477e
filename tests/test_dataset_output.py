"""Writing datasets (JSONL, Parquet, save_to_disk), the text form, token counts, and the
``agent-rl dataset build`` command."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from agent_rl_plugin.data import BuildReport, DatasetError, build_kto_dataset, build_table, to_text, write_dataset
from agent_rl_plugin.data.output import count_chars, render_messages
from agent_rl_plugin.data.synthetic import synthesize_store
from score_support import agent_rl


@pytest.fixture
def store(tmp_path, plugin_manager):
    path = tmp_path / "s.duckdb"
    synthesize_store(path, rollouts=12, llm_calls=2, group_size=3, n_tasks=2)
    return path


def test_jsonl_parquet_and_directory_round_trip(store, tmp_path):
    import datasets

    ds = build_kto_dataset(store)
    assert write_dataset(ds, tmp_path / "out" / "kto.jsonl") == "jsonl"
    lines = (tmp_path / "out" / "kto.jsonl").read_text().splitlines()
    assert len(lines) == ds.num_rows
    first = json.loads(lines[0])
    assert first["prompt"] == ds[0]["prompt"] and first["label"] == ds[0]["label"]
    assert datasets.load_dataset("json", data_files=str(tmp_path / "out" / "kto.jsonl"), split="train").num_rows == 12
    assert write_dataset(ds, tmp_path / "kto.parquet") == "parquet"
    assert pq.read_table(tmp_path / "kto.parquet").to_pylist() == ds.to_list()
    assert write_dataset(ds, str(tmp_path / "saved") + "/") == "directory"
    assert datasets.load_from_disk(str(tmp_path / "saved")).to_list() == ds.to_list()
    with pytest.raises(DatasetError, match="cannot tell the output format"):
        write_dataset(ds, tmp_path / "kto.txt")


def test_text_form_simple_and_with_a_chat_template(store, tmp_path):
    from tiny_models import build_tokenizer

    report = BuildReport()
    table = build_table("kto", store, fmt="text", report=report)
    row = table.slice(0, 1).to_pylist()[0]
    assert row["prompt"].startswith("system: You are a careful shopping assistant.")
    assert row["prompt"].endswith("\nuser: How much do 1 notebooks and 1 pens cost in total? Task 0.\n")
    assert row["completion"].startswith('assistant: [call lookup {"item":"item-0"}]\ntool: 0.0\nassistant: The total is 0.00.')
    assert report.tokens == (count_chars(table) + 3) // 4 and report.tokens_method == "chars/4"
    tokenizer = build_tokenizer(tmp_path / "tok")
    report = BuildReport()
    table = build_table("grpo", store, fmt="text", tokenizer=tokenizer, report=report)
    group = table.slice(0, 1).to_pylist()[0]
    assert group["prompt"].endswith("<|im_start|>assistant\n")
    assert len(group["completions"]) == 3
    assert group["completions"][0].startswith('<tool_call>{"name": "lookup", "arguments": {"item": "item-0"}}</tool_call>')
    assert report.tokens_method == "tokenizer" and report.tokens > 0


def test_render_messages():
    text = render_messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        ]
    )
    assert text == "user: hi\nassistant: [call f {}]"


def test_to_text_keeps_other_columns(store):
    table = build_table("kto", store)
    text = to_text(table)
    assert text.column_names == table.column_names and text.column("label").equals(table.column("label"))


def test_cli_build_summary_and_files(store, tmp_path):
    out = tmp_path / "kto.jsonl"
    result = agent_rl("dataset", "build", "kto", "--db", str(store), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 12 and summary["kind"] == "kto" and summary["output_format"] == "jsonl"
    assert set(summary["labels"]) == {"desirable", "undesirable"} and summary["tokens"] > 0
    assert len(out.read_text().splitlines()) == 12
    result = agent_rl(
        "dataset", "build", "grpo", "--db", str(store), "--out", str(tmp_path / "g.parquet"),
        "--reward", "correct=2", "--reward", "tool_success", "--style", "text",
    )
    assert result.exit_code == 0, result.output
    assert "groups: 4, mean group size 3.0" in result.stdout
    assert "rewards combined: correct, tool_success" in result.stdout
    assert pq.read_table(tmp_path / "g.parquet").num_rows == 4
    result = agent_rl("dataset", "build", "steps", "--db", str(store), "--out", str(tmp_path / "steps") + "/")
    assert result.exit_code == 0, result.output
    assert "Wrote 24 steps rows" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--where", "task_id = 'nope'"], "error: no rollouts match where"),
        (["--where", "bogus = 1"], "error: SQL error in where"),
        (["--sql", "select 1 as x"], "error: the query must return a rollout_id column"),
        (["--where", "true", "--sql", "select rollout_id from rollouts"], "error: give --where or --sql"),
        (["--reward", "=3"], "error: bad --reward"),
        (["--reward", "missing_reward"], "error: none of the 12 matching rollouts gave a KTO row"),
    ],
)
def test_cli_errors_are_one_line(store, tmp_path, args, message):
    result = agent_rl("dataset", "build", "kto", "--db", str(store), "--out", str(tmp_path / "x.jsonl"), *args)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0].startswith(message), result.stderr
    assert "Traceback" not in result.output


def test_cli_bad_extension_and_missing_database(tmp_path, plugin_manager):
    result = agent_rl("dataset", "build", "kto", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "x.csv"))
    assert result.exit_code == 1 and "cannot tell the output format" in result.stderr
    result = agent_rl("dataset", "build", "kto", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "x.jsonl"))
    assert result.exit_code == 1 and "no database at" in result.stderr
