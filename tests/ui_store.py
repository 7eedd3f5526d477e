"""A small store for the UI's tests (``test_ui_api.py``, ``test_ui_browser.py``), built through
the public API only: the demo agent in GRPO groups (3 tasks x 3 rollouts, tool calls, some
failing), a hostile rollout whose every piece of content is HTML that runs script if a page
ever inserts it as markup, the built-in rewards, GRPO and GiGPO advantages, and two recorded
training runs with per-step metrics (one selecting its rollouts by a query), and two rounds of a
closed training loop. About 3 s.

:func:`record_one` records one more rollout into a store from the calling process (what an
agent running beside the UI does).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import agent_rl_plugin as arl
from agent_rl_plugin import plugins, tracing

SCRIPT = "<script>window.__xss=1</script>"
IMG = '<img src=x onerror="window.__xss=1">'
LINK = "javascript:window.__xss=1"


def _hostile_rollout() -> str:
    rollout_id = f"hostile-{SCRIPT}"
    with arl.rollout(task_id=f"task {IMG}", group_id=f"hostile/{IMG}", rollout_id=rollout_id):
        arl.record_llm_call(
            f"model {SCRIPT}",
            [{"role": "system", "content": IMG}, {"role": "user", "content": f"</td>{SCRIPT}"}],
            f"</div>{SCRIPT}{IMG}",
            tool_calls=[{"id": "c1", "name": f"search{SCRIPT}", "arguments": {"q": IMG, "url": LINK}}],
            input_tokens=7,
            output_tokens=5,
            reasoning=f"thinking {SCRIPT}",
        )
        arl.record_tool_call(f"search {IMG}", arguments={"q": IMG, "href": LINK}, result=f"{SCRIPT} result")
        arl.record_tool_call("fetch", arguments={"url": LINK}, error=f"ValueError: {IMG}")
        arl.record_event(f"note{SCRIPT}", agent_id=IMG, content=SCRIPT, reason=IMG)
        arl.emit_reward(0.25, name="correct", reason=f"{SCRIPT}{IMG}")
        arl.emit_reward(0.5, name="correct", step=1, reason=IMG)
    return rollout_id


def _training_runs(path: str) -> list[str]:
    from agent_rl_plugin.train import record_training_run

    kto = [
        {"step": s, "epoch": s / 10, "loss": 0.7 - 0.04 * s, "kl": 0.01 * s, "learning_rate": 1e-4}
        for s in range(1, 11)
    ]
    grpo = [{"step": s, "loss": 0.2 / s, "reward": 0.3 + 0.02 * s} for s in range(1, 9)]
    ids = []
    for method, history, selection in (
        ("kto", kto, "select rollout_id from rollouts where status = 'ok'"),
        ("offline_grpo", grpo, "select rollout_id from rollouts where task_id like 'shop-0%'"),
    ):
        result = SimpleNamespace(metrics={"train_loss": history[-1]["loss"]}, log_history=history, seconds=0.0)
        ids.append(record_training_run(path, result, {"model": "tiny", "lr": 1e-4}, selection, method=method, n_rows=9))
    return ids


def _loop_rounds(path: str, training_run_id: str) -> None:
    """Two rounds of a closed training loop (the second trained by ``training_run_id``)."""
    from agent_rl_plugin.loop.records import LoopRound, write_round

    for number, (train, heldout) in enumerate(((0.25, 0.2), (0.75, 0.7))):
        write_round(
            path,
            LoopRound(
                loop_id="loop-ui",
                round=number,
                status="ok",
                env="grid",
                method="grpo",
                seed=7,
                policy_version=f"v{number}",
                training_run_id=training_run_id if number else None,
                train_success=train,
                heldout_success=heldout,
                seconds={"rollouts": 1.5, "train": 2.5},
            ),
        )


def build_ui_store(path: str | Path) -> dict[str, Any]:
    """Build the store at ``path`` (see the module docstring). Returns ``{"db", "rollout_ids",
    "group_id" (a group of 3), "hostile_rollout_id", "training_run_ids", "record_one"}``."""
    from score_support import record_demo

    from agent_rl_plugin.rewards.runner import score
    from agent_rl_plugin.rl.runs import compute_advantages

    db = str(path)
    previous = plugins.get_plugin_manager()
    plugins.set_plugin_manager(plugins.new_plugin_manager(load_entry_points=False))
    try:
        tracing.configure(db_path=db, export_delay_ms=50)
        record_demo(tasks=3, group_size=3, seed=2)
        tracing.configure(db_path=db, export_delay_ms=50)
        hostile = _hostile_rollout()
        assert arl.flush()
        arl.shutdown()
        score(db, workers=0)
        compute_advantages(db, "grpo")
        compute_advantages(db, "gigpo")
        runs = _training_runs(db)
        _loop_rounds(db, runs[1])
    finally:
        tracing.shutdown()
        plugins.set_plugin_manager(previous)
    import duckdb

    with duckdb.connect(db, read_only=True) as connection:
        ids = [r[0] for r in connection.execute("SELECT rollout_id FROM rollouts ORDER BY start_time").fetchall()]
        group = connection.execute(  # the group whose rewards differ most: what GRPO learns from
            "SELECT group_id FROM rollouts WHERE group_id LIKE 'shop-%' GROUP BY group_id HAVING count(*) >= 3 "
            "ORDER BY stddev_pop(total_reward) DESC, group_id LIMIT 1"
        ).fetchall()[0][0]
    return {
        "db": db,
        "rollout_ids": ids,
        "group_id": group,
        "hostile_rollout_id": hostile,
        "training_run_ids": runs,
        "record_one": record_one,
    }


def record_one(db: str | Path, task_id: str = "late-task") -> str:
    """Record one rollout into ``db`` from this process, as an agent beside the UI would; its id.
    The spans are on disk (in the store's spool or merged) when this returns."""
    rollout_id = f"late-{uuid.uuid4().hex[:12]}"
    tracing.configure(db_path=str(db), export_delay_ms=50)
    try:
        with arl.rollout(task_id=task_id, group_id=f"{task_id}/g0", rollout_id=rollout_id):
            arl.record_llm_call("late-model", "What is 2 + 2?", "4", input_tokens=5, output_tokens=1)
            arl.record_tool_call("add", arguments={"a": 2, "b": 2}, result=4)
        assert arl.flush()
    finally:
        tracing.shutdown()
    return rollout_id
