"""``agent-rl train`` under ``accelerate launch`` with several processes, on CPU (gloo): every
process builds the same dataset from the store and trains its share of each batch; only the
main one records the run and prints the summary; the adapter is saved once. Also which
launcher flags start several CPU processes, and the example accelerate configs of
``examples/accelerate/`` (docs/scaling.md, "Training on several GPUs").

No GPU here: the multi-GPU, FSDP and DeepSpeed configs are checked up to the point where they
would need GPUs (or DeepSpeed)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("accelerate")
pytest.importorskip("trl")
pytest.importorskip("peft")

from accelerate.commands.config.config_args import ClusterConfig  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

from agent_rl_plugin.rewards.runner import score  # noqa: E402
from agent_rl_plugin.train import build_tiny_model, distributed  # noqa: E402
from agent_rl_plugin.train.hardware import Hardware, choose_profile, detect_hardware  # noqa: E402
from score_support import record_demo  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "accelerate"
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch"]

PROBE = """\
import json, os
from agent_rl_plugin.train.distributed import is_main_process, rank, world_size
names = ("ACCELERATE_MIXED_PRECISION", "ACCELERATE_USE_FSDP", "FSDP_VERSION", "FSDP_STATE_DICT_TYPE")
os.makedirs("probes", exist_ok=True)  # one file per process: their stdout lines interleave
with open(os.path.join("probes", f"{os.getpid()}.json"), "w") as handle:
    json.dump({"rank": rank(), "world": world_size(), "main": is_main_process(),
               **{n: os.environ.get(n) for n in names}}, handle)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(args: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``accelerate launch ARGS`` with its own HF_HOME (no default accelerate config of the user
    applies) and a free rendezvous port (other test runs may launch at the same time)."""
    env = dict(os.environ)
    env.update(
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        AGENT_RL_DISABLE_PLUGIN_AUTOLOAD="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
    )
    env.pop("AGENT_RL_DB", None)
    command = [*LAUNCH, "--main_process_port", str(free_port()), *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def probes(tmp_path: Path) -> list[dict]:
    """What each process of the last launch of the probe script reported, by rank."""
    folder = tmp_path / "probes"
    found = [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.is_dir() else []
    for p in folder.glob("*.json"):
        p.unlink()
    return sorted(found, key=lambda p: p["rank"])


@pytest.fixture
def probe(tmp_path: Path) -> str:
    path = tmp_path / "probe.py"
    path.write_text(PROBE, encoding="utf-8")
    return str(path)


@pytest.fixture
def scored(db_path: Path) -> Path:
    record_demo(tasks=2, group_size=4, seed=1)
    score(db_path, rewards=["task_completion", "tool_success"], workers=0)
    return db_path


def test_rank_and_world_size_from_the_launcher_environment(monkeypatch):
    for name in (*distributed.RANK_VARIABLES, *distributed.WORLD_SIZE_VARIABLES, *distributed.LOCAL_RANK_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (0, 1, True)
    assert not distributed.is_distributed()
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (distributed.rank(), distributed.local_rank(), distributed.world_size()) == (3, 1, 4)
    assert not distributed.is_main_process() and distributed.is_distributed()
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("PMI_RANK", "0")  # mpirun (accelerate launch --cpu --mpirun_hostfile)
    monkeypatch.setenv("PMI_SIZE", "2")
    assert (distributed.rank(), distributed.world_size(), distributed.is_main_process()) == (0, 2, True)


def test_the_hardware_profile_counts_the_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert detect_hardware().world_size == 8
    one = Hardware(cpu_cores=32, ram_gib=256.0, gpu_name="H100", gpu_memory_gib=80.0, gpu_count=8, bf16=True)
    profile = choose_profile(one, "offline")
    assert "processes" not in profile.describe() and profile.effective_batch_size == 16
    eight = choose_profile(dataclasses.replace(one, world_size=8), "offline")
    assert (eight.batch_size, eight.gradient_accumulation_steps) == (16, 1)  # per device, as with one
    assert eight.effective_batch_size == 128
    assert "batch 16 x accum 1 x 8 processes (effective batch 128)" in eight.describe()
    assert eight.to_dict()["hardware"]["world_size"] == 8


def test_multi_gpu_launcher_starts_cpu_processes_and_cpu_flag_starts_one(probe, tmp_path):
    # --multi_gpu goes through torchrun: N processes with RANK/WORLD_SIZE; on a machine without
    # CUDA, accelerate (and the Trainer) then use the gloo backend on CPU.
    two = launch(["--multi_gpu", "--num_processes", "2", probe], tmp_path)
    assert two.returncode == 0, two.stderr[-3000:]
    assert [(p["rank"], p["world"], p["main"]) for p in probes(tmp_path)] == [(0, 2, True), (1, 2, False)]
    # --cpu --num_processes 2 uses accelerate's simple launcher, which starts several CPU
    # processes only through mpirun (--mpirun_hostfile); without it one process runs.
    one = launch(["--cpu", "--num_processes", "2", probe], tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    assert [(p["rank"], p["world"], p["main"]) for p in probes(tmp_path)] == [(0, 1, True)]


def test_python_dash_m_agent_rl_plugin_is_the_cli(tmp_path):
    result = subprocess.run([sys.executable, "-m", "agent_rl_plugin", "train", "--help"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "AGENT_RL_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert result.returncode == 0, result.stderr
    assert "gigpo" in result.stdout and "kto" in result.stdout


def test_gigpo_on_two_processes_records_one_run_and_saves_one_adapter(scored, tmp_path):
    tiny = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "gigpo-out"
    config = tmp_path / "gigpo.yaml"  # the same training config as a single-process run
    config.write_text(
        f"method: gigpo\nmodel: {tiny}\noutput_dir: {out}\nlearning_rate: 5.0e-3\n"
        "batch_size: 2\nlora_r: 4\nmax_steps: 3\n",
        encoding="utf-8",
    )
    result = launch(
        ["--multi_gpu", "--num_processes", "2", "-m", "agent_rl_plugin.cli.main",
         "train", "gigpo", "--config", str(config), "--db", str(scored), "--json"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-5000:]

    summary = json.loads(result.stdout)  # one JSON document: only the main process printed
    assert summary["method"] == "gigpo" and summary["steps"] == 3
    assert "x 2 processes (effective batch 4)" in summary["hardware"]
    assert result.stderr.count("hardware: cpu") == 1  # the profile is printed once

    # Each optimizer step took 2 rows on each of 2 processes: the epoch after 3 steps says so.
    rows = summary["rows"]
    assert summary["metrics"]["epoch"] == pytest.approx(3 / math.ceil(rows / 4))
    assert summary["metrics"]["epoch"] != pytest.approx(3 / math.ceil(rows / 2))

    con = duckdb.connect(str(scored), read_only=True)
    try:
        runs = con.execute(
            "select run_id, method, status, n_rows, json_extract(config, '$.world_size')::int, adapter_path "
            "from training_runs"
        ).fetchall()
        losses = con.execute(
            "select step, count(*) from training_metrics where name = 'loss' group by step order by step"
        ).fetchall()
        per_name = con.execute(
            "select name, count(*) = count(distinct step) from training_metrics where step is not null group by name"
        ).fetchall()
    finally:
        con.close()
    assert runs == [(summary["run_id"], "gigpo", "ok", rows, 2, str(out / "adapter"))]
    assert losses == [(1, 1), (2, 1), (3, 1)]  # each step's metrics recorded once
    assert all(once for _, once in per_name)

    adapters = sorted(p.parent for p in out.rglob("adapter_config.json"))
    assert adapters == [out / "adapter"]
    assert (out / "adapter" / "adapter_model.safetensors").is_file()


@pytest.mark.parametrize(
    "name, kind, extra",
    [
        ("multi-gpu.yaml", DistributedType.MULTI_GPU, {}),
        ("fsdp2.yaml", DistributedType.FSDP, {"fsdp_version": 2, "fsdp_state_dict_type": "FULL_STATE_DICT"}),
        ("deepspeed-zero2.yaml", DistributedType.DEEPSPEED, {"zero_stage": 2}),
    ],
)
def test_example_accelerate_configs_are_valid_accelerate_configs(name, kind, extra):
    # accelerate's own loader: unknown keys are errors
    config = ClusterConfig.from_yaml_file(str(EXAMPLES / name))
    assert config.distributed_type == kind
    assert (config.num_processes, config.num_machines, config.mixed_precision) == (8, 1, "bf16")
    assert config.use_cpu is False
    section = config.fsdp_config if kind == DistributedType.FSDP else config.deepspeed_config
    for key, value in extra.items():
        assert section[key] == value
    if kind == DistributedType.DEEPSPEED:
        assert "gradient_accumulation_steps" not in section  # the training config's value applies


@pytest.mark.parametrize("name, fsdp", [("multi-gpu.yaml", None), ("fsdp2.yaml", "true")])
def test_accelerate_launch_accepts_the_example_configs(name, fsdp, probe, tmp_path):
    # Launched as written (8 processes, bf16) with a script that needs no GPU: the launcher
    # accepts the file and starts every process; training would need the GPUs from here on.
    result = launch(["--config_file", str(EXAMPLES / name), probe], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = probes(tmp_path)
    assert [p["rank"] for p in found] == list(range(8))
    assert all(p["world"] == 8 and p["ACCELERATE_MIXED_PRECISION"] == "bf16" for p in found)
    assert [p["main"] for p in found] == [True] + [False] * 7
    assert all(p["ACCELERATE_USE_FSDP"] == fsdp for p in found)
    if fsdp:
        assert all(p["FSDP_VERSION"] == "2" and p["FSDP_STATE_DICT_TYPE"] == "FULL_STATE_DICT" for p in found)


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is not None, reason="DeepSpeed is installed")
def test_deepspeed_config_needs_deepspeed(probe, tmp_path):
    result = launch(["--config_file", str(EXAMPLES / "deepspeed-zero2.yaml"), probe], tmp_path)
    assert result.returncode != 0
    assert "DeepSpeed is not installed" in result.stderr
