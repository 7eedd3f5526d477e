"""What must not reach training, checked on real stores and real tiny tokenizers:

* a streamed answer the agent stopped reading early (``agent_rl.llm.incomplete = true``): the step
  dataset leaves it out and counts it, and ``agent-rl doctor`` warns (``llm_incomplete``);
* stored completion ids from another model's tokenizer: one rule (``ids_match_text``) that the
  doctor (``token_ids_mismatch``) and the trainer (``decode_mismatch``: re-tokenise instead) share;
* ids the tokenizer cannot decode (past its vocabulary, larger than 64 bits): an ``out_of_vocab``
  finding, never a crash of ``agent-rl doctor``; an unexpected failure exits 2 with one line.
"""

from __future__ import annotations

import json

import duckdb
import pytest
from score_support import agent_rl

import agent_rl_plugin as arl
from agent_rl_plugin import plugins, tracing
from agent_rl_plugin.data import BuildReport, build_step_dataset
from agent_rl_plugin.data.health import CHECKS, check_traces
from agent_rl_plugin.data.health_tokens import comparable_text, ids_match_text
from agent_rl_plugin.data.steps import INCOMPLETE

pytest.importorskip("transformers")

from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from agent_rl_plugin.train.offline_data import build_examples  # noqa: E402

QUESTION = [{"role": "user", "content": "Which way now?"}]
WORDS = ["up", "down", "left", "right"]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    """Model A (directions) and model B (other words): B's ids are in A's vocabulary range."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("tok")
    a = build_tiny_model(root / "a", vocab_texts=["up\ndown\nleft\nright\n" * 10, "Which way now?"], hidden_size=32)
    b = build_tiny_model(root / "b", vocab_texts=["zebra quantum xylophone " * 10], hidden_size=32, layers=1)
    return str(a), AutoTokenizer.from_pretrained(a), AutoTokenizer.from_pretrained(b)


def ids(tokenizer, text: str, end: bool = True) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] if end else [])


def record(path, calls) -> None:
    """Rollouts ``r{i}`` of group ``g``: ``calls[i]`` is a list of record_llm_call keyword dicts;
    rewards 0, 1, 0, 1, ..."""
    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    tracing.configure(db_path=str(path), export_delay_ms=50)
    try:
        for i, rollout_calls in enumerate(calls):
            with arl.rollout(task_id="t", group_id="g", rollout_id=f"r{i}"):
                for kwargs in rollout_calls:
                    kwargs = dict(kwargs)
                    arl.record_llm_call("m", kwargs.pop("input", QUESTION), kwargs.pop("output"), **kwargs)
                arl.emit_reward(float(i % 2))
        assert arl.flush()
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)


CUT = {"agent_rl.llm.incomplete": True}


# --- incomplete streamed answers --------------------------------------------------------------------


def test_step_dataset_leaves_incomplete_answers_out_and_counts_them(tmp_path):
    path = tmp_path / "s.duckdb"
    record(
        path,
        [
            [{"output": "left"}, {"output": "one two", **CUT}],
            [{"output": "right"}, {"output": "up"}],
        ],
    )
    report = BuildReport()
    ds = build_step_dataset(path, report=report)
    texts = [row["completion"][0]["content"] for row in ds]
    assert sorted(texts) == ["left", "right", "up"]  # the cut "one two" is not a step row
    assert report.extra["steps_incomplete_left_out"] == 1
    assert report.left_out[INCOMPLETE] == 1 and report.examples[INCOMPLETE] == ["r0"]
    assert report.rows == 3


def test_step_dataset_counts_zero_when_every_answer_is_complete(tmp_path):
    path = tmp_path / "s.duckdb"
    record(path, [[{"output": "left"}], [{"output": "right"}]])
    report = BuildReport()
    assert build_step_dataset(path, report=report).num_rows == 2
    assert report.extra["steps_incomplete_left_out"] == 0 and INCOMPLETE not in report.left_out


def test_doctor_warns_about_incomplete_answers(tmp_path):
    path = tmp_path / "s.duckdb"
    record(path, [[{"output": "left"}, {"output": "one two", **CUT}], [{"output": "right"}]])
    report = check_traces(path)
    finding = report.get("llm_incomplete")
    assert finding is not None and finding.severity == "warning"
    assert (finding.count, finding.total) == (1, 3)
    assert "read each stream to its end" in finding.fix and "\n" not in finding.fix
    assert "llm_incomplete" in report.checked and not report.healthy


# --- one rule for stored completion ids --------------------------------------------------------------


def test_ids_match_text_rule(tokenizers):
    _, a, b = tokenizers
    assert ids_match_text(a, ids(a, "left"), "left")  # one trailing end token allowed
    assert ids_match_text(a, ids(a, "left", end=False), "left")
    assert not ids_match_text(a, ids(a, "left") + [a.eos_token_id], "left")  # not two
    assert not ids_match_text(a, ids(a, "left"), "right")
    assert not ids_match_text(a, ids(b, "zebra quantum"), "zebra quantum")  # another model's ids
    for bad in ([2**70], [-1], [len(a)]):  # never raises
        assert not ids_match_text(a, bad, "x")
    assert comparable_text("up") == "up"
    assert comparable_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]) == "ab"
    assert comparable_text([{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}]) is None
    assert comparable_text([{"role": "assistant", "content": [{"type": "text"}]}]) is None


def test_trainer_rejects_another_tokenizers_ids_and_retokenises(tokenizers):
    _, a, b = tokenizers
    rows = []
    for i, word in enumerate(WORDS * 2):
        foreign = ids(b, word)
        rows.append(
            {"prompt": QUESTION, "completion": [{"role": "assistant", "content": word}], "advantage": 1.0 - 2 * (i % 2)}
        )
        rows[-1].update(old_logprobs=None, completion_token_ids=foreign, prompt_token_ids=None)
    mismatched = sum(not ids_match_text(a, r["completion_token_ids"], r["completion"][0]["content"]) for r in rows)
    assert mismatched >= 4  # most of B's ids decode to other text under A
    built = build_examples(rows, a)
    assert built.rejected_token_ids.get("decode_mismatch") == mismatched
    assert built.stats["examples_with_stored_token_ids"] == len(rows) - mismatched
    for example, row in zip(built.examples, rows):  # every trained completion decodes to its own text
        trained = [t for t, m in zip(example["input_ids"], example["loss_mask"]) if m]
        assert ids_match_text(a, trained, row["completion"][0]["content"])
    # the model's own ids are still trained as stored
    own = [dict(r, completion_token_ids=ids(a, r["completion"][0]["content"])) for r in rows]
    built = build_examples(own, a)
    assert built.rejected_token_ids == {} and built.stats["examples_with_stored_token_ids"] == len(rows)


def test_doctor_flags_the_same_foreign_ids(tokenizers, tmp_path):
    path_a, a, b = tokenizers
    path = tmp_path / "s.duckdb"
    calls = [[{"output": word, "token_ids": ids(b, word)}] for word in WORDS]
    record(path, calls)
    report = check_traces(path, tokenizer=path_a)
    expected = sum(not ids_match_text(a, ids(b, w), w) for w in WORDS)
    finding = report.get("token_ids_mismatch")
    assert expected > 0 and finding is not None and finding.count == expected


# --- ids the tokenizer cannot decode ----------------------------------------------------------------


def _plant_huge_id(path) -> None:
    """Rewrite the stored token ids of rollout r1's call to [2**70] (recording refuses such ids;
    an older store or another writer may hold them)."""
    connection = duckdb.connect(str(path))
    try:
        rows = connection.execute(
            "SELECT span_id, attributes FROM spans WHERE rollout_id = 'r1' AND attributes LIKE '%agent_rl.token_ids%'"
        ).fetchall()
        assert len(rows) == 1
        attributes = json.loads(rows[0][1])
        attributes["agent_rl.token_ids"] = json.dumps([2**70])
        connection.execute("UPDATE spans SET attributes = ? WHERE span_id = ?", [json.dumps(attributes), rows[0][0]])
    finally:
        connection.close()


def test_doctor_reports_out_of_vocab_ids_instead_of_crashing(tokenizers, tmp_path):
    path_a, a, _ = tokenizers
    path = tmp_path / "s.duckdb"
    good = ids(a, "left")
    record(
        path,
        [
            [{"output": "left", "token_ids": good}],
            [{"output": "right", "token_ids": [5]}],  # becomes 2**70
            [{"output": "up", "token_ids": [len(a) + 10]}],
            [{"output": "down", "prompt_token_ids": [7, len(a)]}],
        ],
    )
    _plant_huge_id(path)
    report = check_traces(path, tokenizer=path_a)
    finding = report.get("out_of_vocab")
    assert finding is not None and finding.severity == "error"
    assert (finding.count, finding.total) == (3, 4)
    assert report.get("token_ids_mismatch") is None  # out-of-vocab rows are not judged again
    assert report.exit_code == 1

    result = agent_rl("doctor", "--db", str(path), "--tokenizer", path_a, "--json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert [f["count"] for f in data["findings"] if f["code"] == "out_of_vocab" and f["agent"] is None] == [3]


def test_doctor_exits_2_on_an_unexpected_failure(tmp_path):
    path = tmp_path / "s.duckdb"
    record(path, [[{"output": "left"}]])
    connection = duckdb.connect(str(path))
    try:  # a store whose spans table lost a column the checks read (DuckDB alters no indexed table)
        for (index,) in connection.execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'spans'").fetchall():
            connection.execute(f"DROP INDEX {index}")
        connection.execute("ALTER TABLE spans DROP COLUMN status_code")
    finally:
        connection.close()
    result = agent_rl("doctor", "--db", str(path))
    assert result.exit_code == 2, result.output
    assert "the checks could not run" in result.stderr and "Traceback" not in result.output


def test_new_checks_are_declared():
    codes = [check.code for check in CHECKS]
    assert "out_of_vocab" in codes and "llm_incomplete" in codes
