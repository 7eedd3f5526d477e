"""Each training option is declared once, as a config field (``train.fields.option``); the
command-line options, the config-file schema and the docs table all come from it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agent_rl_plugin.cli.common import UserError
from agent_rl_plugin.cli.main import build_app
from agent_rl_plugin.cli.train_options import command_options, with_settings
from agent_rl_plugin.cli.train_support import build_config
from agent_rl_plugin.train import KTOTrainConfig, OfflineGRPOTrainConfig, TrainConfigError, TrainError
from agent_rl_plugin.train.config_files import load_config_file
from agent_rl_plugin.train.fields import train_options
from agent_rl_plugin.train.options_table import REGENERATE, documented_table, options_table
from agent_rl_plugin.train.runs import run_kto

DOCS = Path(__file__).resolve().parents[1] / "docs" / "training.md"

#: Every option `agent-rl train ...` had before the options were generated: none may disappear.
FLAGS_BEFORE = {
    "kto": "--model -m --config -c --db --where -w --sql --dataset --out -o --epochs --max-steps --lr --batch-size "
           "--lora-r --save-steps --resume --beta --label --threshold --quantile --per-group --top-k --bottom-k "
           "--reward -r --json",
    "grpo": "--model -m --config -c --db --offline --level --where -w --sql --from-tasks --dataset --reward -r --out -o "
            "--epochs --max-steps --lr --batch-size --lora-r --save-steps --resume --beta --epsilon --num-generations "
            "--max-completion-length --temperature --from-table --advantages-run --json",
    "gigpo": "--model -m --config -c --db --where -w --sql --dataset --reward -r --out -o --epochs --max-steps --lr "
             "--batch-size --lora-r --save-steps --resume --beta --epsilon --from-table --advantages-run --json",
}
COMMAND_METHODS = {"kto": ("kto",), "grpo": ("grpo", "offline_grpo"), "gigpo": ("gigpo",)}


def help_flags(command: str) -> set[str]:
    result = CliRunner().invoke(build_app(), ["train", command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return set(re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", result.output))


def test_the_docs_table_is_the_generated_one():
    assert documented_table(DOCS) == options_table(), f"docs/training.md is out of date: run `{REGENERATE}`"


@pytest.mark.parametrize("command", list(FLAGS_BEFORE))
def test_help_shows_every_option_there_was_and_every_declared_flag(command):
    shown = help_flags(command)
    assert set(FLAGS_BEFORE[command].split()) <= shown
    declared = {o.flag for o in command_options(*COMMAND_METHODS[command])}
    assert declared <= shown


def test_a_declared_flag_becomes_an_option_whose_value_arrives_as_the_config_field():
    app = typer.Typer()
    received = {}

    @app.command()
    @with_settings("gigpo")
    def train(settings: dict | None = None) -> None:
        received.update(settings or {})

    result = CliRunner().invoke(app, ["--lr", "1e-3", "--save-steps", "5", "--resume", "latest"])
    assert result.exit_code == 0, result.output
    # named as in the config class; --save-steps also turns checkpoints on; options not given are absent
    assert received == {"learning_rate": 1e-3, "save_steps": 5, "save_strategy": "steps",
                        "resume_from_checkpoint": "latest"}
    # gigpo fixes advantage_level: it has no --level
    assert CliRunner().invoke(app, ["--level", "step"]).exit_code == 2


def test_every_field_is_a_config_file_key_of_its_type(tmp_path):
    values = {"model": "m", "output_dir": "o", "max_steps": 3, "report_to": ["wandb"], "save_strategy": "steps"}
    path = tmp_path / "kto.yaml"
    path.write_text(json.dumps({"method": "kto", **values}), encoding="utf-8")  # JSON is YAML
    config = load_config_file(path)
    assert {name: getattr(config, name) for name in values} == values
    keys = {o.name for o in train_options(KTOTrainConfig)}
    assert keys == {f.name for f in dataclasses.fields(KTOTrainConfig)}


def test_a_value_outside_the_declared_choices_names_the_key_and_the_allowed_ones(tmp_path):
    path = tmp_path / "grpo.toml"
    path.write_text('method = "grpo"\nmodel = "m"\noutput_dir = "o"\nloss_type = "ppo"\n', encoding="utf-8")
    with pytest.raises(TrainConfigError, match=r"loss_type: expected one of 'grpo', 'dapo', 'dr_grpo', 'bnpo', got 'ppo'"):
        load_config_file(path)
    with pytest.raises(TrainConfigError, match=r"advantage_level must be one of 'episode', 'step', got 'turn'"):
        OfflineGRPOTrainConfig(model="m", output_dir="o", advantage_level="turn")


def test_options_given_win_over_the_config_file_and_the_others_keep_its_values(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    path = tmp_path / "offline.yaml"
    path.write_text(f"method: offline_grpo\nmodel: {model}\noutput_dir: o\nadvantage_level: step\n"
                    "learning_rate: 1e-4\n", encoding="utf-8")
    config = build_config("offline_grpo", str(path), {"learning_rate": 1e-3})
    assert (config.learning_rate, config.advantage_level, config.output_dir) == (1e-3, "step", "o")
    with pytest.raises(UserError, match="no model given") as info:
        build_config("kto", None, {})
    assert "--model" in info.value.hint  # the command line names its flag


def test_training_errors_do_not_name_command_line_flags(tmp_path):
    config = KTOTrainConfig(model="m", output_dir=str(tmp_path))
    with pytest.raises(TrainError, match="give one of where, sql, dataset_file, not several") as info:
        run_kto(config, where="true", sql="select rollout_id from rollouts")
    assert "--" not in str(info.value) and info.value.option == "source"
