"""Exporting adapters: ``merge_adapter`` gives a model that loads with plain transformers and
computes the PeftModel's logits (and not the base's); ``export_adapter`` copies the adapter
without trainer state; ``adapter_of_run`` finds a recorded run's adapter; ``agent-rl export``
(``--adapter`` / ``--run``, ``--merge``, ``--json``) and its errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")
peft = pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import agent_rl_plugin.cli.export as export_cli  # noqa: E402
from agent_rl_plugin.cli.main import main  # noqa: E402
from agent_rl_plugin.store.errors import StoreError  # noqa: E402
from agent_rl_plugin.train import KTOTrainConfig, TrainResult, build_tiny_model, record_training_run, train_kto  # noqa: E402
from agent_rl_plugin.train.export import (  # noqa: E402
    ExportError,
    adapter_of_run,
    directory_stats,
    export_adapter,
    merge_adapter,
)

TEXT = "How much do 3 notebooks and 2 pens cost in total?"


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "qwen2", hidden_size=32, initializer_range=0.4)


@pytest.fixture(scope="module")
def adapter(tiny, tmp_path_factory) -> str:
    """A LoRA adapter with random (nonzero) B weights, saved with the tokenizer."""
    path = tmp_path_factory.mktemp("adapter") / "adapter"
    model = AutoModelForCausalLM.from_pretrained(tiny)
    peft_model = peft.get_peft_model(
        model, peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    peft_model.save_pretrained(str(path))
    AutoTokenizer.from_pretrained(tiny).save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="module")
def kto_run(tiny, tmp_path_factory) -> tuple[TrainResult, KTOTrainConfig]:
    """A real KTO adapter: 3 steps at a high learning rate, so the LoRA B weights are nonzero."""
    from datasets import Dataset

    rows = [
        {"prompt": f"Question {i} about pens?", "completion": " yes good" if i % 2 == 0 else " no bad", "label": i % 2 == 0}
        for i in range(12)
    ]
    out = tmp_path_factory.mktemp("kto") / "run"
    config = KTOTrainConfig(
        model=tiny, output_dir=str(out), max_steps=3, batch_size=4, learning_rate=1e-2, lora_r=4, use_cpu=True, report_to=[]
    )
    result = train_kto(config, Dataset.from_list(rows), progress=False)
    return result, config


@pytest.fixture
def cli(plugin_manager):
    """The process-wide plugin manager with ``agent-rl export`` registered."""
    if not plugin_manager.is_registered(export_cli):
        plugin_manager.register(export_cli, name="cli_export")
    return plugin_manager


def agent_rl(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


def logits(model, tokenizer) -> torch.Tensor:
    ids = tokenizer(TEXT, return_tensors="pt")["input_ids"]
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def peft_and_base_logits(base: str, adapter_path: str) -> tuple[torch.Tensor, torch.Tensor]:
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter_path)
    with_adapter = logits(model, tokenizer)
    with model.disable_adapter():
        without = logits(model, tokenizer)
    return with_adapter, without


def assert_merged_matches(merged_dir: str, base: str, adapter_path: str) -> None:
    assert not Path(merged_dir, "adapter_config.json").exists()
    assert Path(merged_dir, "config.json").is_file() and Path(merged_dir, "tokenizer_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(merged_dir)
    assert not isinstance(merged, peft.PeftModel) and not hasattr(merged, "peft_config")
    assert not any("lora" in name for name, _ in merged.named_parameters())
    got = logits(merged, AutoTokenizer.from_pretrained(merged_dir))
    expected, base_logits = peft_and_base_logits(base, adapter_path)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert (got - base_logits).abs().max() > 1e-3


# -- merge_adapter -------------------------------------------------------------------------------


def test_merge_gives_the_peft_models_logits(tiny, adapter, tmp_path):
    out = merge_adapter(adapter, tmp_path / "merged")
    assert out == str(tmp_path / "merged")
    assert_merged_matches(out, tiny, adapter)
    stats = directory_stats(out)
    base_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny).parameters())
    assert stats["parameters"] == base_params
    assert stats["bytes"] > 0 and "model.safetensors" in stats["files"]
    assert not list(tmp_path.glob(".merged.*"))  # no staging leftovers


def test_merge_a_trained_kto_adapter_from_its_run_dir(tiny, kto_run, tmp_path):
    result, _ = kto_run
    out = merge_adapter(result.output_dir, tmp_path / "merged")  # the run dir holds adapter/
    assert_merged_matches(out, tiny, result.adapter_path)


def test_merge_with_base_override_and_dtype(tiny, adapter, tmp_path):
    moved = tmp_path / "adapter"
    shutil.copytree(adapter, moved)
    config_path = moved / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    config_path.write_text(json.dumps(config))
    with pytest.raises(ExportError, match="base model .*gone does not exist") as info:
        merge_adapter(moved, tmp_path / "out")
    assert "--base" in info.value.hint
    config["base_model_name_or_path"] = None
    config_path.write_text(json.dumps(config))
    with pytest.raises(ExportError, match="does not name its base model"):
        merge_adapter(moved, tmp_path / "out")
    out = merge_adapter(moved, tmp_path / "out", base_model=tiny, dtype="bfloat16")
    assert AutoModelForCausalLM.from_pretrained(out, dtype="auto").dtype == torch.bfloat16
    with pytest.raises(ExportError, match="unknown dtype"):
        merge_adapter(moved, tmp_path / "out2", base_model=tiny, dtype="int3")


def test_merge_errors_and_overwrite(tiny, adapter, tmp_path):
    with pytest.raises(ExportError, match="does not exist"):
        merge_adapter(tmp_path / "missing", tmp_path / "out")
    with pytest.raises(ExportError, match="is not a LoRA adapter"):
        merge_adapter(tiny, tmp_path / "out")  # a model directory, not an adapter
    with pytest.raises(ExportError, match="config.json"):
        merge_adapter(adapter, tmp_path / "out", base_model=str(tmp_path))  # a directory that is no model
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(ExportError, match="exists and is not empty") as info:
        merge_adapter(adapter, out)
    assert "--overwrite" in info.value.hint
    assert (out / "old.txt").exists()
    merge_adapter(adapter, out, overwrite=True)
    assert not (out / "old.txt").exists() and (out / "model.safetensors").is_file()
    with pytest.raises(ExportError, match="refusing"):
        merge_adapter(adapter, Path(adapter).parent, overwrite=True)  # would delete the adapter
    assert Path(adapter, "adapter_config.json").is_file()


# -- export_adapter ------------------------------------------------------------------------------


def test_export_adapter_copies_without_trainer_state(tiny, adapter, tmp_path):
    checkpoint = tmp_path / "run" / "checkpoint-2"
    shutil.copytree(adapter, checkpoint)
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"):
        (checkpoint / name).write_bytes(b"x")
    out = export_adapter(checkpoint, tmp_path / "exported")
    files = sorted(p.name for p in Path(out).iterdir())
    assert "adapter_config.json" in files and "adapter_model.safetensors" in files and "tokenizer.json" in files
    assert not {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"} & set(files)
    reloaded = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny), out)
    expected, _ = peft_and_base_logits(tiny, adapter)
    torch.testing.assert_close(logits(reloaded, AutoTokenizer.from_pretrained(tiny)), expected)
    assert directory_stats(out)["parameters"] == sum(p.numel() for n, p in reloaded.named_parameters() if "lora_" in n)
    with pytest.raises(ExportError, match="exists and is not empty"):
        export_adapter(checkpoint, out)
    with pytest.raises(ExportError, match="refusing"):
        export_adapter(checkpoint, checkpoint / "inside")


# -- the store -----------------------------------------------------------------------------------


def _record(db: Path, run_id: str, adapter_path: str | None, model: str, tmp_path: Path) -> None:
    config = KTOTrainConfig(model=model, output_dir=str(tmp_path / run_id), batch_size=4)
    result = None
    if adapter_path is not None:
        result = TrainResult(output_dir=str(tmp_path / run_id), adapter_path=adapter_path, metrics={}, n_rows=8,
                             global_step=1, seconds=0.1)
    record_training_run(db, result, config, "true", run_id=run_id, status="ok" if result else "error",
                        error=None if result else "out of memory")


def test_adapter_of_run(tiny, adapter, tmp_path):
    db = tmp_path / "store.duckdb"
    _record(db, "abc123", adapter, tiny, tmp_path)
    _record(db, "abd456", adapter, tiny, tmp_path)
    _record(db, "ab", adapter, "other/model", tmp_path)
    _record(db, "fff000", None, tiny, tmp_path)
    assert adapter_of_run(db, "abc123") == (adapter, tiny)
    assert adapter_of_run(db, "abc") == (adapter, tiny)
    assert adapter_of_run(db, "ab") == (adapter, "other/model")  # an exact id wins over prefixes
    with pytest.raises(ExportError, match="no training run 'zzz'"):
        adapter_of_run(db, "zzz")
    _record(db, "abd789", adapter, tiny, tmp_path)
    with pytest.raises(ExportError, match="2 training runs start with 'abd': abd456, abd789"):
        adapter_of_run(db, "abd")
    with pytest.raises(ExportError, match="saved no adapter .*out of memory"):
        adapter_of_run(db, "fff")
    with pytest.raises(ExportError, match="give a run id"):
        adapter_of_run(db, " ")
    with pytest.raises(StoreError, match="no database"):
        adapter_of_run(tmp_path / "none.duckdb", "abc")


# -- the command line ----------------------------------------------------------------------------


def test_cli_merge_and_adapter_only(cli, tiny, adapter, tmp_path, capsys):
    out = tmp_path / "merged"
    code, stdout, err = agent_rl(capsys, "export", "--adapter", adapter, "--merge", "--out", str(out), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["kind"] == "merged" and summary["path"] == str(out) and summary["base_model"] == tiny
    assert summary["parameters"] == directory_stats(out)["parameters"] > 0
    assert summary["bytes"] == directory_stats(out)["bytes"] and "model.safetensors" in summary["files"]
    assert_merged_matches(str(out), tiny, adapter)

    code, stdout, err = agent_rl(capsys, "export", "--adapter", adapter, "--out", str(tmp_path / "lora"))
    assert code == 0, err
    assert f"Wrote the adapter to {tmp_path / 'lora'}" in stdout
    assert "size on disk:" in stdout and "parameters:" in stdout and "(LoRA)" in stdout
    assert Path(tmp_path / "lora", "adapter_config.json").is_file()

    code, stdout, err = agent_rl(capsys, "export", "--adapter", adapter, "--merge", "--out", str(out))
    assert code == 1 and "exists and is not empty" in err and "--overwrite" in err
    code, stdout, err = agent_rl(capsys, "export", "--adapter", adapter, "--merge", "--out", str(out), "--overwrite")
    assert code == 0, err
    assert "Wrote the merged model" in stdout and "no peft needed" in stdout


def test_cli_run_from_the_store(cli, tiny, kto_run, tmp_path, capsys):
    result, config = kto_run
    db = tmp_path / "store.duckdb"
    run_id = record_training_run(db, result, config, "file:rows.jsonl")
    out = tmp_path / "merged"
    code, stdout, err = agent_rl(capsys, "export", "--run", run_id[:8], "--db", str(db), "--merge", "--out", str(out), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["run_id"] == run_id[:8] and summary["adapter_path"] == result.adapter_path
    assert summary["base_model"] == tiny
    assert_merged_matches(str(out), tiny, result.adapter_path)
    code, _, err = agent_rl(capsys, "export", "--run", "nope", "--db", str(db), "--out", str(tmp_path / "x"))
    assert code == 1 and "no training run 'nope'" in err and "fix:" in err
    code, _, err = agent_rl(capsys, "export", "--run", "nope", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "x"))
    assert code == 1 and "no database" in err


def test_cli_help_and_usage_errors(cli, adapter, tmp_path, capsys):
    code, stdout, _ = agent_rl(capsys, "export")
    assert code == 0 and "--adapter" in stdout and "--merge" in stdout
    code, _, err = agent_rl(capsys, "export", "--adapter", adapter)
    assert code == 1 and "--out" in err
    code, _, err = agent_rl(capsys, "export", "--adapter", adapter, "--run", "x", "--out", str(tmp_path / "o"))
    assert code == 1 and "not both" in err
    code, _, err = agent_rl(capsys, "export", "--adapter", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert code == 1 and "does not exist" in err and "fix:" in err
    code, _, err = agent_rl(capsys, "export", "--adapter", adapter, "--dtype", "bfloat16", "--out", str(tmp_path / "o"))
    assert code == 1 and "--dtype applies to --merge only" in err
    assert not (tmp_path / "o").exists()
    # subcommands (agent-rl export parquet) do not take export's own options
    code, stdout, _ = agent_rl(capsys, "export", "parquet", "--help")
    assert code == 0 and "--out" in stdout
    code, _, err = agent_rl(capsys, "export", "--db", "x.duckdb", "parquet", "--out", str(tmp_path / "o"))
    assert code == 1 and "belong to `agent-rl export` itself" in err
    assert not (tmp_path / "o").exists()
