"""Stored token ids: an LLM call recorded with ``token_ids=`` / ``prompt_token_ids=`` reaches the
step dataset (and the files it is written to) as ``completion_token_ids`` / ``prompt_token_ids``,
and the offline trainer trains on exactly ``prompt_token_ids + completion_token_ids`` instead of
re-tokenised text, so logged ``old_logprobs`` line up with the sampled tokens. Unusable ids
(out of the vocabulary, not integers, not a choice) fall back to the text and are counted; the
run reports how many examples used stored ids. Real tiny model, real DuckDB store."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

import agent_rl_plugin as arl  # noqa: E402
from agent_rl_plugin.data import BuildReport, build_step_dataset  # noqa: E402
from agent_rl_plugin.data.output import write_dataset  # noqa: E402
from agent_rl_plugin.train import build_tiny_model  # noqa: E402
from agent_rl_plugin.train.choices import ChoiceSet  # noqa: E402
from agent_rl_plugin.train.offline_data import ALLOWED_KEY, OfflineCollator, build_examples  # noqa: E402
from agent_rl_plugin.train.stored_tokens import prompt_ids, retokenisation_drift  # noqa: E402
from agent_rl_plugin.train.tokenize import tokenize_completion  # noqa: E402

DIRECTIONS = ["up", "down", "left", "right"]
QUESTION = [{"role": "user", "content": "Which way now?"}]
#: What a server with its own template (a system prompt the tokenizer's template lacks) fed the model.
SERVER_PROMPT = (
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhich way now?<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    # one word a line: each direction becomes a single token ("up" is one token, "u" "p" two others)
    texts = ["\n".join(DIRECTIONS * 10), "Which way now?"]
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", vocab_texts=texts, hidden_size=32, layers=1)


@pytest.fixture(scope="module")
def tokenizer(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


def ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def split_up(tokenizer) -> list[int]:
    """ "up" sampled as "u" then "p", then the end-of-turn token: text that re-tokenises differently."""
    return ids(tokenizer, "u") + ids(tokenizer, "p") + [tokenizer.eos_token_id]


def row(completion="up", advantage=1.0, **extra) -> dict:
    return {"prompt": QUESTION, "completion": completion, "advantage": advantage, "old_logprobs": None, **extra}


def test_split_up_really_retokenises_differently(tokenizer):
    text = tokenize_completion(tokenizer, QUESTION, "up")
    retokenised = [i for i, m in zip(text.input_ids, text.assistant_mask) if m]
    assert retokenised == ids(tokenizer, "up") + [tokenizer.eos_token_id] != split_up(tokenizer)
    assert tokenizer.decode(split_up(tokenizer)[:-1]) == "up"


def test_step_dataset_and_its_files_carry_the_stored_ids(tmp_path, plugin_manager):
    path = tmp_path / "agent_rl.duckdb"
    arl.configure(db=str(path), export_delay_ms=50, capture_content=True)
    calls = [
        {"token_ids": [87, 82, 2], "logprobs": [-0.5, -0.25, -0.125], "prompt_token_ids": [1, 387, 201]},
        {"token_ids": [262, 2]},  # no prompt ids
        {},  # nothing stored
    ]
    for i, call in enumerate(calls):
        with arl.rollout(task_id="t", group_id="g"):
            arl.record_llm_call("policy", QUESTION, f"answer {i}", **call)
            arl.emit_reward(float(i), name="correct")
    assert arl.flush()
    arl.shutdown()

    report = BuildReport()
    steps = build_step_dataset(path, report=report)
    assert steps.column_names[:6] == [
        "prompt",
        "completion",
        "advantage",
        "old_logprobs",
        "completion_token_ids",
        "prompt_token_ids",
    ]
    assert steps["completion_token_ids"] == [[87, 82, 2], [262, 2], None]
    assert steps["prompt_token_ids"] == [[1, 387, 201], None, None]
    assert steps["old_logprobs"][0] == [-0.5, -0.25, -0.125]
    assert str(steps.features["completion_token_ids"]) == "List(Value('int64'))"
    assert report.extra["steps_with_token_ids"] == 2 and report.extra["steps_with_prompt_token_ids"] == 1
    assert report.extra["steps_with_logprobs"] == 1

    write_dataset(steps, tmp_path / "steps.parquet")
    table = pq.read_table(tmp_path / "steps.parquet")
    assert table.column("completion_token_ids").to_pylist() == [[87, 82, 2], [262, 2], None]
    write_dataset(steps, tmp_path / "steps.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [line["prompt_token_ids"] for line in lines] == [[1, 387, 201], None, None]


def test_trainer_inputs_are_exactly_the_stored_ids(tokenizer):
    completion = split_up(tokenizer)
    server_prompt = ids(tokenizer, SERVER_PROMPT)
    logged = [-0.5, -0.25, -0.125]
    rows = [
        row(completion_token_ids=completion, prompt_token_ids=server_prompt, old_logprobs=logged),
        row(completion_token_ids=completion),  # no prompt ids: the chat template renders the prompt
        row("down", -1.0),  # no stored ids: re-tokenised
    ]
    built = build_examples(rows, tokenizer)
    first, second, third = built.examples
    assert first["input_ids"] == server_prompt + completion
    n = len(server_prompt)
    assert first["loss_mask"] == [0] * n + [1, 1, 1]
    # the logged log-probs sit 1:1 on the stored completion ids
    assert first["old_mask"] == [0] * n + [1, 1, 1] and first["old_logprobs"][n:] == logged
    assert first["advantages"] == [0.0] * n + [1.0] * 3
    assert second["input_ids"] == prompt_ids(tokenizer, QUESTION) + completion
    assert second["input_ids"][: len(second["input_ids"]) - 3] == ids(
        tokenizer, tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    )
    assert third["input_ids"] == tokenize_completion(tokenizer, QUESTION, "down").input_ids
    stats = built.stats
    assert (stats["examples_with_stored_token_ids"], stats["examples_retokenised"]) == (2, 1)
    assert stats["old_logprobs_used"] == 1 and stats["old_logprobs_ignored"] == 0
    assert (stats["retokenisation_checked"], stats["retokenisation_differs"]) == (2, 2)
    assert stats["stored_token_ids_rejected"] == 0 and built.rejected_token_ids == {}

    batch = OfflineCollator(tokenizer.pad_token_id)(built.examples)
    assert batch["input_ids"][0].tolist() == server_prompt + completion  # the longest row: no padding
    assert batch["old_mask"][0].sum().item() == 3

    # the same logged log-probs do not fit the re-tokenised text ("up" is one token, not two)
    ignored = build_examples(rows, tokenizer, token_ids="ignore")
    assert ignored.examples[0]["input_ids"] == tokenize_completion(tokenizer, QUESTION, "up").input_ids
    assert ignored.stats["old_logprobs_ignored"] == 1 and ignored.stats["stored_token_ids_ignored"] == 2
    assert ignored.stats["examples_with_stored_token_ids"] == 0 and ignored.stats["examples_retokenised"] == 3

    assert retokenisation_drift(rows, tokenizer) == {"rows_with_token_ids": 2, "checked": 2, "differ": 2}
    canonical = [row(completion_token_ids=ids(tokenizer, "up") + [tokenizer.eos_token_id])]
    assert retokenisation_drift(canonical, tokenizer) == {"rows_with_token_ids": 1, "checked": 1, "differ": 0}


def test_unusable_ids_fall_back_to_the_text_and_are_counted(tiny, tokenizer):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny)
    vocab = model.get_input_embeddings().num_embeddings
    rows = [
        row(completion_token_ids=[vocab, 2]),  # past the embedding: an index error on a GPU
        row(completion_token_ids=split_up(tokenizer), prompt_token_ids=[1, vocab + 5]),
        row(completion_token_ids=[-1, 2]),
        row(completion_token_ids=["u", "p"]),
        row(completion_token_ids=split_up(tokenizer)),  # fine
    ]
    built = build_examples(rows, tokenizer, vocab_size=vocab)
    assert built.rejected_token_ids == {"out_of_vocab": 2, "invalid": 2}
    stats = built.stats
    assert stats["stored_token_ids_rejected"] == 4
    assert (stats["examples_with_stored_token_ids"], stats["examples_retokenised"]) == (1, 4)
    text = tokenize_completion(tokenizer, QUESTION, "up").input_ids
    assert [e["input_ids"] for e in built.examples[:4]] == [text] * 4
    batch = OfflineCollator(tokenizer.pad_token_id)(built.examples)
    assert int(batch["input_ids"].max()) < vocab
    with torch.no_grad():  # every example is safe to run
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    # the default vocabulary is the tokenizer's
    assert build_examples(rows[:1], tokenizer).rejected_token_ids == {"out_of_vocab": 1}


def test_choice_sets_accept_stored_ids_only_when_they_are_a_choice(tokenizer):
    choices = ChoiceSet(tokenizer, DIRECTIONS)
    canonical = ids(tokenizer, "left") + [tokenizer.eos_token_id]
    rows = [
        row("left", completion_token_ids=canonical, prompt_token_ids=ids(tokenizer, SERVER_PROMPT)),
        row("up", completion_token_ids=split_up(tokenizer)),  # "u" "p" is not how the choice set writes "up"
    ]
    built = build_examples(rows, tokenizer, choices=choices)
    first, second = built.examples
    n = len(ids(tokenizer, SERVER_PROMPT))
    assert first["input_ids"] == ids(tokenizer, SERVER_PROMPT) + canonical
    assert first[ALLOWED_KEY] == [(n, sorted(s[0] for s in choices.sequences)), (n + 1, [tokenizer.eos_token_id])]
    assert first["loss_mask"][n:] == [1, 0]  # the end token is forced
    assert second["input_ids"] == tokenize_completion(tokenizer, QUESTION, "up").input_ids
    assert built.rejected_token_ids == {"not_a_choice": 1} and built.stats["not_a_choice"] == 0
    assert (built.stats["examples_with_stored_token_ids"], built.stats["examples_retokenised"]) == (1, 1)


def test_a_training_run_reports_where_its_tokens_came_from(tiny, tmp_path, capsys, plugin_manager):
    """What ``agent-rl train gigpo --token-ids auto`` runs: the config from the command line's
    settings, the run on the store, its printed summary and its training_runs record."""
    from transformers import AutoTokenizer

    from agent_rl_plugin.cli.train_options import command_options
    from agent_rl_plugin.cli.train_support import build_config, print_summary
    from agent_rl_plugin.train.runs import run_grpo_offline

    assert "--token-ids" in {o.flag for o in command_options("gigpo")}
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    path = tmp_path / "agent_rl.duckdb"
    arl.configure(db=str(path), export_delay_ms=50, capture_content=True)
    split = split_up(tokenizer)
    calls = [
        {"token_ids": split, "logprobs": [-3.0, -3.0, -1.0], "prompt_token_ids": ids(tokenizer, SERVER_PROMPT)},
        {"token_ids": split, "logprobs": [-3.0, -3.0, -1.0]},
        {"token_ids": [10_000, 2]},  # recorded by a model with a larger vocabulary
        {},
    ]
    for i, call in enumerate(calls):
        with arl.rollout(task_id="t", group_id="g"):
            arl.record_llm_call("policy", QUESTION, "up", **call)
            arl.emit_reward(float(i), name="correct")
    assert arl.flush()
    arl.shutdown()

    settings = {"model": tiny, "max_steps": 2, "batch_size": 4, "lora_r": 4, "output_dir": str(tmp_path / "out")}
    config = build_config("gigpo", None, {**settings, "token_ids": "auto"})
    summary = run_grpo_offline(config, db=str(path), progress=False)
    assert summary["build"]["steps_with_token_ids"] == 3 and summary["build"]["steps_with_prompt_token_ids"] == 1
    capsys.readouterr()
    print_summary(summary)
    out = capsys.readouterr().out
    assert "token ids: 2 examples from stored ids, 2 re-tokenised from text; 1 stored rejected (out_of_vocab 1)" in out
    with duckdb.connect(str(path), read_only=True) as connection:
        (final,) = connection.execute("select final_metrics from training_runs").fetchone()
    metrics = json.loads(final)
    assert metrics["examples_with_stored_token_ids"] == 2 and metrics["examples_retokenised"] == 2
    assert metrics["stored_token_ids_rejected"] == 1


def test_train_offline_grpo_counts_in_its_result(tiny, tokenizer, tmp_path):
    from agent_rl_plugin.train import OfflineGRPOTrainConfig, train_offline_grpo

    split = split_up(tokenizer)
    rows = [
        row(completion_token_ids=split, old_logprobs=[-3.0, -3.0, -1.0]),
        row("down", -1.0, completion_token_ids=[99_999]),
        row("left", -1.0),
        row(completion_token_ids=split, prompt_token_ids=ids(tokenizer, SERVER_PROMPT)),
    ]
    config = OfflineGRPOTrainConfig(
        model=tiny,
        output_dir=str(tmp_path / "o"),
        max_steps=1,
        batch_size=4,
        lora_r=4,
        use_cpu=True,
        report_to=[],
        measure_examples=0,
        advantage_level="step",
    )
    result = train_offline_grpo(config, rows, progress=False)
    assert result.extra["examples_with_stored_token_ids"] == 2 and result.extra["examples_retokenised"] == 2
    assert result.extra["stored_token_ids_rejected"] == 1
    assert result.extra["stored_token_ids_rejected_reasons"] == {"out_of_vocab": 1}
    assert result.extra["old_logprobs_used"] == 1 and result.extra["retokenisation_differs"] == 2
    assert result.metrics["examples_with_stored_token_ids"] == 2 and result.metrics["stored_token_ids_rejected"] == 1
