"""The demo's learning half: advantages for this run's groups, then three short LoRA runs on a
tiny offline Qwen2 (KTO, offline GRPO on the logged groups, offline GiGPO on the logged steps),
each recorded in ``training_runs`` / ``training_metrics``.

Everything is quiet (the trainers' bars and warnings are swallowed) because the demo prints its
own summary; :func:`train_all` returns what happened, or ``{"skipped": reason}`` per part.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
import warnings
from typing import Any, Callable

#: The reward the demo learns from (the built-in ``task_completion`` plugin, against ground truth).
DEMO_REWARDS = {"task_completion": 1.0}
#: Short runs: enough to see the metrics move, small enough for the 3-minute budget on 2 cores.
DEMO_STEPS = 8
#: Offline GRPO/GiGPO: more, larger steps (each costs ~0.1 s on the tiny model).
OFFLINE_STEPS = 16
OFFLINE_LR = 5e-3


def tiny_model_dir(path: str) -> str:
    """The demo's tiny model: next to the database, built once and reused."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), ".agent-rl-tiny-model")


def _runs_dir(path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), "runs")


@contextlib.contextmanager
def _quiet():
    noise = io.StringIO()
    with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def compute_demo_advantages(path: str, ids: str) -> dict[str, Any]:
    """GRPO (episode) and GiGPO (step) advantages of this run's rollouts into the ``advantages``
    table; ``{method: {"run_id", "rows"}}`` or ``{"skipped": reason}``."""
    from agent_rl_plugin.rl import AdvantageInputError, compute_advantages

    out: dict[str, Any] = {}
    for method in ("grpo", "gigpo"):
        try:
            run = compute_advantages(path, method, where=f"rollout_id in ({ids})", weights=DEMO_REWARDS)
        except AdvantageInputError as exc:
            out[method] = {"skipped": str(exc)}
            continue
        out[method] = {"run_id": run.run_id, "rows": run.rows_written}
    return out


def _attempt(name: str, job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    from agent_rl_plugin.train.runs import run_errors

    try:
        with _quiet():
            return job()
    except run_errors() as exc:
        return {"method": name, "skipped": str(exc)}


def train_all(
    path: str, ids: str, advantages: dict[str, Any], on_start: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """KTO, offline GRPO and offline GiGPO, a few steps each, on this run's rollouts; one
    summary per run (see :mod:`agent_rl_plugin.train.runs`), or one ``{"skipped": reason}``."""
    try:
        import peft  # noqa: F401
        import trl  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the training extras are missing
        return [{"skipped": f"training needs trl and peft ({exc})"}]
    from agent_rl_plugin.train import KTOTrainConfig, OfflineGRPOTrainConfig
    from agent_rl_plugin.train.runs import run_grpo_offline, run_kto

    model = tiny_model_dir(path)
    if not os.path.isfile(os.path.join(model, "config.json")):
        from agent_rl_plugin.train import build_tiny_model

        with _quiet():
            build_tiny_model(model)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    sql = f"select rollout_id from rollouts where rollout_id in ({ids})"
    shared = dict(model=model, max_steps=DEMO_STEPS, lora_r=8, learning_rate=1e-3, max_length=512, report_to=[])
    offline = {**shared, "max_steps": OFFLINE_STEPS, "learning_rate": OFFLINE_LR}

    def out(name: str) -> str:
        return os.path.join(_runs_dir(path), f"demo-{name}-{stamp}")

    def kto() -> dict[str, Any]:
        config = KTOTrainConfig(output_dir=out("kto"), batch_size=4, **shared)
        return run_kto(config, db=path, sql=sql, label_rule="threshold", weights=DEMO_REWARDS, progress=False)

    def grpo() -> dict[str, Any]:
        config = OfflineGRPOTrainConfig(output_dir=out("grpo"), batch_size=4, advantage_level="episode", **offline)
        # the tour shows the group dataset (one completion per rollout); the default for
        # multi-step rollouts would train every call (recipe "steps"), as the gigpo run does
        return run_grpo_offline(config, db=path, sql=sql, weights=DEMO_REWARDS, recipe="groups", progress=False)

    def gigpo() -> dict[str, Any]:
        config = OfflineGRPOTrainConfig(output_dir=out("gigpo"), batch_size=4, advantage_level="step", **offline)
        run = advantages.get("gigpo", {}).get("run_id")
        return run_grpo_offline(config, db=path, sql=sql, weights=DEMO_REWARDS, run_id=run, progress=False)

    results = []
    for name, job in (("kto", kto), ("offline_grpo", grpo), ("gigpo", gigpo)):
        if on_start is not None:
            on_start(name)
        results.append(_attempt(name, job))
    return results


__all__ = ["DEMO_REWARDS", "compute_demo_advantages", "tiny_model_dir", "train_all"]
