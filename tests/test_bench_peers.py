"""The peer rows' plumbing (``bench/peers/``, ``python -m bench --peers``) without the peers'
environments: the env builder's commands and cache, an unavailable peer reported with its
reason (SKIP, not an error), the row selection, and the shared OTLP load against our real
receiver on 127.0.0.1. Nothing here installs a peer or asserts on speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import __main__ as bench_main  # noqa: E402
from bench import harness  # noqa: E402
from bench.peers import SPECS, envs  # noqa: E402
from bench.peers.envs import PeerSpec  # noqa: E402


def test_install_commands_pin_torch_and_carry_the_constraints(tmp_path):
    python = tmp_path / "bin" / "python"
    spec = PeerSpec("x", ("somepkg>=1",), "somepkg", needs_torch=True)
    commands = envs.install_commands(spec, python)
    assert len(commands) == 2
    torch_first, main = commands
    assert torch_first[:4] == [str(python), "-m", "pip", "install"]
    assert torch_first[-1] == envs.TORCH_PIN == "torch==2.13.0"
    assert main[-1] == "somepkg>=1"
    for command in commands:  # every install is held to the constraints (torch cannot be upgraded)
        assert command[command.index("-c") + 1] == str(envs.CONSTRAINTS)
    assert "torch==2.13.0" in envs.CONSTRAINTS.read_text()
    plain = envs.install_commands(PeerSpec("y", ("other",), "other"), python)
    assert len(plain) == 1 and not any("torch" in c for c in plain[0])


def test_the_peer_specs():
    assert set(SPECS) == {"mlflow", "phoenix", "agentlightning"}
    assert SPECS["agentlightning"].requirements == ("agentlightning==0.3.0",)
    assert all(not s.needs_torch for s in SPECS.values())  # none of them needs torch at its core


def test_envs_live_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("AGENT_RL_BENCH_PEERS_DIR", raising=False)
    assert envs.peers_dir() == Path.home() / ".cache" / "agent-rl-bench-peers"
    monkeypatch.setenv("AGENT_RL_BENCH_PEERS_DIR", str(tmp_path))
    assert envs.peers_dir() == tmp_path


def test_offline_env_turns_telemetry_off_and_drops_the_main_venv(monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/somewhere/.venv")
    monkeypatch.setenv("PYTHONPATH", "/work/main")
    env = envs.offline_env({"EXTRA": "1"})
    assert "VIRTUAL_ENV" not in env and "PYTHONPATH" not in env
    assert env["PHOENIX_TELEMETRY_ENABLED"] == "false"
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert env["HF_HUB_OFFLINE"] == "1" and env["DO_NOT_TRACK"] == "1"
    assert env["EXTRA"] == "1"


def test_a_failed_build_is_a_reason_not_an_exception(monkeypatch, tmp_path):
    """A requirement no index has, through the real pip (of this interpreter, offline, so it
    fails fast and installs nothing; creating a real venv is left out: it takes most of a
    minute on a busy machine): ``ensure_env`` returns the reason; nothing is stamped."""
    monkeypatch.setenv("AGENT_RL_BENCH_PEERS_DIR", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    assert envs.venv_command(tmp_path / "v")[:3] == [sys.executable, "-m", "venv"]
    monkeypatch.setattr(envs, "venv_command", lambda venv: [sys.executable, "-c", "pass"])
    monkeypatch.setattr(envs, "venv_python", lambda venv: Path(sys.executable))
    spec = PeerSpec("nothing", ("agent-rl-no-such-package-xyz==0.0.1",), "agent-rl-no-such-package-xyz")
    env = envs.ensure_env(spec, log=lambda _: None, timeout_s=300)
    assert not env.ok and env.python is None
    assert "install of nothing failed" in env.reason and "agent-rl-no-such-package-xyz" in env.reason
    assert not (tmp_path / "nothing" / envs.STAMP).exists()
    assert env.commands[1][:4] == [sys.executable, "-m", "pip", "install"]


def test_a_stamped_env_is_reused_without_building(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_RL_BENCH_PEERS_DIR", str(tmp_path))
    spec = PeerSpec("fake", ("pytest",), "pytest")
    venv = tmp_path / "fake"
    python = envs.venv_python(venv)
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)  # this interpreter holds pytest: the version comes from it
    (venv / envs.STAMP).write_text(envs.inputs_hash(spec), encoding="utf-8")
    env = envs.ensure_env(spec, log=lambda _: pytest.fail("must not build"))
    assert env.ok and env.reused and env.build_s == 0.0
    expected = subprocess.run(
        [str(python), "-c", "import pytest; print(pytest.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert env.version == expected  # read inside that interpreter
    (venv / envs.STAMP).write_text("stale", encoding="utf-8")  # changed inputs: rebuilt (here: fails fast)
    monkeypatch.setattr(envs, "venv_command", lambda venv: [sys.executable, "-c", "pass"])
    monkeypatch.setattr(envs, "install_commands", lambda s, p: [[sys.executable, "-c", "raise SystemExit(3)"]])
    rebuilt = envs.ensure_env(spec, log=lambda _: None)
    assert not rebuilt.reused and not rebuilt.ok and "exit 3" in rebuilt.reason


@pytest.mark.parametrize("row_id", ["peers_mlflow", "peers_phoenix", "peers_agentlightning"])
def test_an_unavailable_peer_skips_its_row_with_the_reason(monkeypatch, tmp_path, row_id):
    from bench.peers import common

    def unavailable(spec, **_):
        return envs.PeerEnv(spec=spec, path=tmp_path / spec.name, python=None, reason="no wheel for this Python")

    monkeypatch.setattr(common, "ensure_env", unavailable)
    row = harness.run_row(row_id, harness.Context(quick=True, workdir=tmp_path, verbose=False))
    assert row.status == "SKIP", row.error
    assert "unavailable: no wheel for this Python" in row.skipped
    cells = harness.table_rows([row])[0]
    assert cells[5] == "SKIP" and "no wheel for this Python" in cells[1]


def test_peer_rows_run_only_when_asked():
    peers = [r for r in harness.ROW_IDS if r.startswith("peers_")]
    assert peers == ["peers_mlflow", "peers_phoenix", "peers_agentlightning"]
    assert not set(peers) & set(bench_main.selected_rows(""))
    assert set(peers) <= set(bench_main.selected_rows("", peers=True))
    assert bench_main.selected_rows("peers_phoenix") == ["peers_phoenix"]
    assert bench_main.selected_rows("gigpo", peers=True) == ["gigpo", *peers]
    assert bench_main.parse_args(["--peers"]).peers


def test_otlp_load_counts_every_span_into_our_receiver(tmp_path):
    """The load of the receiver rows, small, against our real receiver: all spans stored, the
    resource attributes handed to the exporting processes reach the store."""
    from agent_rl_plugin.receiver import Receiver
    from bench.peers.otlp_load import otlp_round

    receiver = Receiver(str(tmp_path / "served.duckdb"), port=0, token="", announce=False).start()
    try:

        def count() -> int:
            cursor = receiver.sink.cursor()
            try:
                return int(cursor.execute("select count(*) from spans").fetchone()[0])
            finally:
                cursor.close()

        result = otlp_round(
            receiver.url,
            count,
            processes=2,
            n=40,
            batch=16,
            deadline_s=120,
            wait=receiver.sink.flush,
            resource="bench.peer=probe",
        )
        cursor = receiver.sink.cursor()
        try:
            resources = cursor.execute("select distinct resource from spans").fetchall()
        finally:
            cursor.close()
    finally:
        receiver.stop()
    assert result.sent == 80 and result.failed == 0
    assert result.stored == 80 and result.stored_s is not None and result.rate > 0
    assert any("probe" in str(r) for r in resources)


def test_a_successful_build_is_stamped_then_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_RL_BENCH_PEERS_DIR", str(tmp_path))
    monkeypatch.setattr(
        envs, "venv_command", lambda venv: [sys.executable, "-c", f"import os; os.makedirs({str(venv)!r})"]
    )
    monkeypatch.setattr(envs, "install_commands", lambda s, p: [[sys.executable, "-c", "pass"]])
    monkeypatch.setattr(envs, "venv_python", lambda venv: Path(sys.executable))
    spec = PeerSpec("built", ("pytest",), "pytest")
    first = envs.ensure_env(spec, log=lambda _: None)
    assert first.ok and not first.reused and len(first.commands) == 2
    assert (tmp_path / "built" / envs.STAMP).read_text(encoding="utf-8") == envs.inputs_hash(spec)
    second = envs.ensure_env(spec, log=lambda _: pytest.fail("must not build"))
    assert second.ok and second.reused and second.version == pytest.__version__


def test_the_decorator_worker_stores_every_call_on_our_side(tmp_path):
    """Our side of the decorator rows, as the rows run it (a fresh interpreter)."""
    from bench.peers.common import PYTHON, ours_env, run_json

    db = tmp_path / "ours.duckdb"
    out = run_json(
        [
            PYTHON,
            str(ROOT / "bench" / "peers" / "decorator_worker.py"),
            "--side",
            "ours",
            "--calls",
            "50",
            "--db",
            str(db),
        ],
        ours_env(),
        300,
    )
    assert out["side"] == "ours" and out["sent"] == 51 and out["calls"] == 50
    assert out["persisted"] == 51 and out["spans"] == 51 and out["flushed"] is True
    assert 0 < out["loop_s"] <= out["stored_s"]


def test_a_failing_worker_raises_with_its_output(tmp_path):
    from bench.peers.common import PeerRunError, run_json

    with pytest.raises(PeerRunError, match="status 3: boom"):
        run_json([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], {}, 60)
