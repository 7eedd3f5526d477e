"""The collector around a training run (agent_rl_plugin.train.heap): paused during set-up, one
collection and the survivors frozen when the run is about to train, everything back as it was
afterwards (also after an error), and a caller that manages the collector itself left alone;
run_kto trains with the stack imported and frozen, and the collector restored after the run."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from agent_rl_plugin.train.heap import training_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture
def clean_gc():
    """Each test starts with the collector on and nothing frozen, and leaves it so."""
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()
    gc.enable()


def test_paused_then_frozen_then_restored(clean_gc):
    seen = {}
    with training_heap() as heap:
        assert heap.managed
        assert not gc.isenabled()  # paused while the run sets up
        node = _Node()
        dead = weakref.ref(node)
        del node  # cyclic garbage made during the pause

        def preload() -> None:
            seen["enabled_during_preload"] = gc.isenabled()

        heap.settle(preload=preload)
        assert seen["enabled_during_preload"] is False  # the imports run paused
        assert dead() is None  # the one collection freed it: nothing unreachable is frozen
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        # frozen objects freed since (by reference counting, in any thread) leave the count
        assert 0 < gc.get_freeze_count() <= heap.frozen
        heap.settle()  # a second call changes nothing
        assert gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_restored_after_an_error(clean_gc):
    with pytest.raises(RuntimeError):
        with training_heap() as heap:
            heap.settle()
            raise RuntimeError("trainer failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError):
        with training_heap():  # failed before settling: still paused at the error
            raise RuntimeError("no data")
    assert gc.isenabled()


def test_caller_managed_collector_is_left_alone(clean_gc):
    gc.disable()
    with training_heap() as heap:
        assert not heap.managed
        heap.settle()
        assert not gc.isenabled()
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled()
    gc.enable()

    gc.freeze()
    with training_heap() as heap:
        assert not heap.managed
        assert gc.isenabled()
        heap.settle()
    assert gc.get_freeze_count() > 1000  # the caller's frozen objects stay frozen (not unfrozen by the run)
    gc.unfreeze()


class _Stop(Exception):
    pass


def test_run_kto_trains_with_the_stack_frozen(clean_gc, tmp_path, monkeypatch):
    pytest.importorskip("trl")
    from agent_rl_plugin.data.synthetic import synthesize_store
    from agent_rl_plugin.train import KTOTrainConfig, build_tiny_model, runs

    model = build_tiny_model(tmp_path / "tiny")
    store = tmp_path / "runs.duckdb"
    synthesize_store(store, rollouts=16, llm_calls=1, group_size=4)
    seen = {}

    def train_recorded(**kwargs):
        seen.update(
            enabled=gc.isenabled(),
            frozen=gc.get_freeze_count(),
            trainer_loaded="trl.trainer.kto_trainer" in sys.modules,
            rows=len(kwargs["dataset"]),
        )
        raise _Stop

    monkeypatch.setattr(runs, "train_recorded", train_recorded)
    config = KTOTrainConfig(model=str(model), output_dir=str(tmp_path / "out"), batch_size=2, use_cpu=True)
    with pytest.raises(_Stop):
        runs.run_kto(config, db=str(store), record=False)
    assert seen["rows"] == 16
    assert seen["trainer_loaded"]  # TRL's trainer imported before the collector came back
    assert seen["enabled"]
    assert seen["frozen"] > 10_000  # the imported stack, frozen for the run
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_training_command_freezes_the_heap_at_exit(tmp_path):
    """The process of a training command skips the collection of its heap at exit: gc.freeze
    runs from atexit after the command, and before the handlers registered ahead of it."""
    import subprocess

    script = tmp_path / "command.py"
    script.write_text(
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0))  # runs last\n"
        "from agent_rl_plugin.cli.train_support import report\n"
        "report(lambda: {'method': 'kto', 'rows': 2}, json_output=True)\n"
        "report(lambda: {'method': 'kto', 'rows': 3}, json_output=True)\n"
        "print('frozen before exit:', gc.get_freeze_count() > 0)\n",
        encoding="utf-8",
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "frozen before exit: False" in lines  # nothing changes while the process runs
    assert lines[-1] == "frozen at exit: True"
    assert proc.stdout.count('"rows"') == 2
