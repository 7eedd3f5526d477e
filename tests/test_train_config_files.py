"""Training config files: YAML and TOML for each method, layouts (top level, ``train`` table,
method table), overrides, clear errors (unknown keys with a suggestion, wrong types, method
mismatch), dump/load round trips and templates that load back."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest
import yaml

from agent_rl_plugin.train import GRPOTrainConfig, KTOTrainConfig, OfflineGRPOTrainConfig, TrainConfigError
from agent_rl_plugin.train.config_files import (
    METHODS,
    config_template,
    dump_config,
    load_config_file,
    method_of_config,
)


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


YAML_FILES = {
    "kto": """
        method: kto
        model: ./models/base
        output_dir: runs/kto
        learning_rate: 1e-5        # a string for YAML 1.1
        batch_size: 4
        beta: 0.2
        desirable_weight: 1.5
        save_strategy: no          # false for YAML 1.1
        target_modules: [q_proj, v_proj]
        """,
    "grpo": """
        method: grpo
        model: ./models/base
        output_dir: runs/grpo
        learning_rate: 1e-5
        num_generations: 4
        batch_size: 8
        max_completion_length: 32
        loss_type: grpo
        reward_weights: [1, 0.5]
        mask_truncated_completions: yes
        """,
    "offline_grpo": """
        method: offline_grpo
        model: ./models/base
        output_dir: runs/offline
        epsilon_high: 0.28
        loss_normalization: sequence
        """,
    "gigpo": """
        method: gigpo
        model: ./models/base
        output_dir: runs/gigpo
        train_tool_tokens: true
        """,
}

TOML_FILES = {
    "kto": """
        method = "kto"
        model = "./models/base"
        output_dir = "runs/kto"
        learning_rate = 1e-5
        batch_size = 4
        beta = 0.2
        desirable_weight = 1.5
        save_strategy = "no"
        target_modules = ["q_proj", "v_proj"]
        """,
    "grpo": """
        method = "grpo"
        model = "./models/base"
        output_dir = "runs/grpo"
        learning_rate = 1e-5
        num_generations = 4
        batch_size = 8
        max_completion_length = 32
        loss_type = "grpo"
        reward_weights = [1, 0.5]
        mask_truncated_completions = true
        """,
    "offline_grpo": """
        method = "offline_grpo"
        model = "./models/base"
        output_dir = "runs/offline"
        epsilon_high = 0.28
        loss_normalization = "sequence"
        """,
    "gigpo": """
        method = "gigpo"
        model = "./models/base"
        output_dir = "runs/gigpo"
        train_tool_tokens = true
        """,
}


def check(method: str, config) -> None:
    assert config.model == "./models/base"
    if method == "kto":
        assert type(config) is KTOTrainConfig
        assert config.learning_rate == 1e-5 and isinstance(config.learning_rate, float)
        assert (config.batch_size, config.beta, config.desirable_weight) == (4, 0.2, 1.5)
        assert config.save_strategy == "no" and config.target_modules == ["q_proj", "v_proj"]
    elif method == "grpo":
        assert type(config) is GRPOTrainConfig
        assert (config.num_generations, config.batch_size, config.max_completion_length) == (4, 8, 32)
        assert config.learning_rate == 1e-5 and config.loss_type == "grpo"
        assert config.reward_weights == [1.0, 0.5] and config.mask_truncated_completions is True
    elif method == "offline_grpo":
        assert type(config) is OfflineGRPOTrainConfig
        assert config.advantage_level == "episode" and config.epsilon_high == 0.28
        assert config.loss_normalization == "sequence"
    else:
        assert type(config) is OfflineGRPOTrainConfig
        assert config.advantage_level == "step" and config.train_tool_tokens is True


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".toml"])
def test_each_method_in_yaml_and_toml(tmp_path, method, suffix):
    text = TOML_FILES[method] if suffix == ".toml" else YAML_FILES[method]
    path = write(tmp_path, f"train{suffix}", text)
    check(method, load_config_file(path))
    check(method, load_config_file(path, method=method))  # the caller agrees
    check(method, load_config_file(str(path), method=method.replace("_", "-")))


def test_train_table_and_method_table(tmp_path):
    path = write(tmp_path, "c.toml", """
        model = "m"
        learning_rate = 1e-4

        [train]
        output_dir = "o"
        learning_rate = 2e-4

        [grpo]
        num_generations = 2
        learning_rate = 3e-4

        [kto]
        beta = 0.5
        """)
    grpo = load_config_file(path, method="grpo")
    assert (grpo.model, grpo.output_dir, grpo.num_generations, grpo.learning_rate) == ("m", "o", 2, 3e-4)
    kto = load_config_file(path, method="kto")  # the [grpo] table is ignored for kto
    assert (kto.beta, kto.learning_rate) == (0.5, 2e-4)
    with pytest.raises(TrainConfigError, match="no training method"):
        load_config_file(path)  # two method tables and no method named
    only = write(tmp_path, "only.yaml", """
        train: {model: m, output_dir: o}
        gigpo: {epsilon: 0.1}
        """)
    config = load_config_file(only)  # the one method table names the method
    assert config.advantage_level == "step" and config.epsilon == 0.1
    # offline_grpo tables apply to gigpo too; the gigpo table wins
    both = write(tmp_path, "both.yaml", """
        method: gigpo
        model: m
        output_dir: o
        offline_grpo: {epsilon: 0.1, beta: 0.01}
        gigpo: {epsilon: 0.3}
        """)
    config = load_config_file(both)
    assert (config.epsilon, config.beta) == (0.3, 0.01)


def test_overrides_win_and_none_is_ignored(tmp_path):
    path = write(tmp_path, "c.yaml", YAML_FILES["kto"])
    config = load_config_file(
        path, overrides={"learning_rate": 3e-4, "batch_size": None, "max_steps": "7", "output-dir": "elsewhere"}
    )
    assert (config.learning_rate, config.batch_size, config.max_steps, config.output_dir) == (3e-4, 4, 7, "elsewhere")
    with pytest.raises(TrainConfigError, match="unknown key 'lr'"):
        load_config_file(path, overrides={"lr": 1.0})
    # defaults fill only what neither the file nor the overrides give
    no_out = write(tmp_path, "n.yaml", "method: kto\nmodel: m\n")
    config = load_config_file(no_out, defaults={"output_dir": "generated", "beta": 0.3}, overrides={"beta": 0.4})
    assert (config.output_dir, config.beta) == ("generated", 0.4)
    assert load_config_file(path, defaults={"output_dir": "generated"}).output_dir == "runs/kto"


def test_method_from_the_caller_and_mismatch(tmp_path):
    path = write(tmp_path, "c.yaml", "model: m\noutput_dir: o\nnum_generations: 2\n")
    assert type(load_config_file(path, method="grpo")) is GRPOTrainConfig
    with pytest.raises(TrainConfigError, match="no training method"):
        load_config_file(path)
    kto_file = write(tmp_path, "k.yaml", YAML_FILES["kto"])
    with pytest.raises(TrainConfigError, match=r"'kto' config but 'grpo' training was asked for") as info:
        load_config_file(kto_file, method="grpo")
    assert "k.yaml" in str(info.value) and "agent-rl train kto" in str(info.value)
    offline = write(tmp_path, "off.yaml", YAML_FILES["offline_grpo"])
    assert load_config_file(offline, method="gigpo").advantage_level == "step"  # compatible: gigpo wins
    gigpo = write(tmp_path, "g.yaml", YAML_FILES["gigpo"] + "advantage_level: episode\n")
    with pytest.raises(TrainConfigError, match="contradicts method 'gigpo'"):
        load_config_file(gigpo)
    with pytest.raises(TrainConfigError, match="method must be one of"):
        load_config_file(kto_file, method="ppo")


def test_unknown_keys_suggest_the_closest(tmp_path):
    path = write(tmp_path, "c.yaml", """
        method: grpo
        model: m
        output_dir: o
        learning_rat: 1e-5
        num_generation: 4
        zzz: 1
        """)
    with pytest.raises(TrainConfigError) as info:
        load_config_file(path)
    message = str(info.value)
    assert "c.yaml" in message and "unknown keys" in message
    assert "'learning_rat' (did you mean 'learning_rate'?)" in message
    assert "'num_generation' (did you mean 'num_generations'?)" in message
    assert "'zzz'" in message and "did you mean 'zzz" not in message
    assert "valid fields for grpo:" in message and "max_completion_length" in message
    # a KTO-only field in a GRPO file, and an unknown table
    kto_field = write(tmp_path, "k.toml", 'method = "grpo"\nmodel = "m"\noutput_dir = "o"\ndesirable_weight = 1.0\n')
    with pytest.raises(TrainConfigError, match="unknown key 'desirable_weight'"):
        load_config_file(kto_field)
    table = write(tmp_path, "t.toml", 'method = "kto"\nmodel = "m"\noutput_dir = "o"\n[lora]\nr = 8\n')
    with pytest.raises(TrainConfigError, match="unknown key 'lora'"):
        load_config_file(table)


@pytest.mark.parametrize(
    "line, field",
    [
        ("batch_size: four", "batch_size"),
        ("batch_size: 2.5", "batch_size"),
        ("learning_rate: fast", "learning_rate"),
        ("learning_rate: true", "learning_rate"),
        ("bf16: maybe", "bf16"),
        ("target_modules: {q: 1}", "target_modules"),
        ("model: [a, b]", "model"),
        ("epochs: null", "epochs"),
        ("loss_type: true", "loss_type"),
    ],
)
def test_type_errors_name_the_field(tmp_path, line, field):
    path = write(tmp_path, "c.yaml", f"method: grpo\nmodel: m\noutput_dir: o\n{line}\n")
    with pytest.raises(TrainConfigError, match=rf"c\.yaml: {field}|{field}: expected"):
        load_config_file(path)


def test_coercions(tmp_path):
    path = write(tmp_path, "c.yaml", """
        method: kto
        model: m
        output_dir: o
        max_steps: "12"
        batch_size: 4.0
        lora_alpha: 16
        max_length: none
        use_cpu: "yes"
        resume_from_checkpoint: latest
        report_to: none
        target_modules: q_proj
        """)
    config = load_config_file(path)
    assert (config.max_steps, config.batch_size, config.lora_alpha, config.max_length) == (12, 4, 16.0, None)
    assert config.use_cpu is True and config.resume_from_checkpoint is True
    assert config.report_to == [] and config.target_modules == ["q_proj"]
    assert isinstance(config.lora_alpha, float) and isinstance(config.batch_size, int)
    toml = write(tmp_path, "c.toml", 'method = "kto"\nmodel = "m"\noutput_dir = "o"\nmax_length = "none"\n'
                 'resume_from_checkpoint = "runs/x/checkpoint-4"\nmax-steps = 3\n')
    config = load_config_file(toml)
    assert config.max_length is None and config.resume_from_checkpoint == "runs/x/checkpoint-4" and config.max_steps == 3


def test_validation_errors_name_the_file(tmp_path):
    path = write(tmp_path, "c.yaml", "method: kto\nmodel: m\noutput_dir: o\nbatch_size: 1\n")
    with pytest.raises(TrainConfigError, match=r"c\.yaml: batch_size must be > 1 for KTO"):
        load_config_file(path)
    missing = write(tmp_path, "m.yaml", "method: kto\noutput_dir: o\n")
    with pytest.raises(TrainConfigError, match="model: give"):
        load_config_file(missing)


def test_file_errors(tmp_path):
    with pytest.raises(TrainConfigError, match="does not exist"):
        load_config_file(tmp_path / "nope.yaml")
    with pytest.raises(TrainConfigError, match="unknown config format"):
        load_config_file(write(tmp_path, "c.json", "{}"))
    with pytest.raises(TrainConfigError, match="not valid YAML"):
        load_config_file(write(tmp_path, "bad.yaml", "model: [unclosed\n"))
    with pytest.raises(TrainConfigError, match="not valid TOML"):
        load_config_file(write(tmp_path, "bad.toml", "model = \n"))
    with pytest.raises(TrainConfigError, match="top level must be a mapping"):
        load_config_file(write(tmp_path, "list.yaml", "- 1\n- 2\n"))


def _configs(tmp_path):
    return [
        KTOTrainConfig(model="m", output_dir=str(tmp_path / "o"), learning_rate=1e-5, max_length=None, batch_size=4,
                       target_modules=["q_proj"], resume_from_checkpoint=True, report_to=["wandb"], desirable_weight=1.25),
        GRPOTrainConfig(model="org/model", output_dir="o: with colon", num_generations=3, batch_size=6,
                        reward_weights=[1.0, 0.25], epsilon_high=0.28, temperature=0.7, save_strategy="no"),
        OfflineGRPOTrainConfig(model="m", output_dir="o", advantage_level="episode", beta=0.04, use_cpu=True, bf16=False),
        OfflineGRPOTrainConfig(model="m", output_dir="o", advantage_level="step", resume_from_checkpoint="ck/checkpoint-2",
                               max_steps=10, epochs=2.5),
    ]


@pytest.mark.parametrize("suffix", [".yaml", ".toml"])
def test_dump_and_load_round_trip(tmp_path, suffix):
    for i, config in enumerate(_configs(tmp_path)):
        path = dump_config(config, tmp_path / "sub" / f"c{i}{suffix}")
        loaded = load_config_file(path)
        assert type(loaded) is type(config)
        assert dataclasses.asdict(loaded) == dataclasses.asdict(config), path
        assert load_config_file(path, method=method_of_config(config)) == loaded
    with pytest.raises(TrainConfigError, match="cannot tell the format"):
        dump_config(_configs(tmp_path)[0], tmp_path / "c.txt")


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("fmt", ["yaml", "toml"])
def test_template_loads_back_with_defaults(tmp_path, method, fmt):
    text = config_template(method, fmt)
    cls = METHODS[method]
    for f in dataclasses.fields(cls):
        assert f.metadata["help"] in text, f.name
    assert "required" in text
    filled = config_template(method, fmt, values={"model": "base", "output_dir": "out"})
    path = tmp_path / f"template.{fmt}"
    path.write_text(filled, encoding="utf-8")
    loaded = load_config_file(path)
    expected = cls(model="base", output_dir="out", **({"advantage_level": "step"} if method == "gigpo" else {}))
    assert loaded == expected
    assert method_of_config(loaded) == method
    # the unfilled template fails on the required fields only
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TrainConfigError, match="model: give"):
        load_config_file(path)
    with pytest.raises(TrainConfigError, match="did you mean 'model'"):
        config_template(method, fmt, values={"modle": "x"})


def test_template_is_commented_yaml():
    text = config_template("grpo")
    data = yaml.safe_load(text)
    assert data["method"] == "grpo" and data["num_generations"] == 8 and data["batch_size"] is None
    assert "# Completions sampled per prompt" in text
