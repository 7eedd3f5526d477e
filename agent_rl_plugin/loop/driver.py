"""The closed training loop: the agent gets better at its environment, round after round.

Round 0 evaluates the starting policy. Each round k >= 1 then:

1. **rollouts**: :func:`~agent_rl_plugin.rollouts.run_rollouts` runs the environment's agent
   (:func:`~agent_rl_plugin.loop.episode.env_agent`) ``group_size`` times from every training
   start with policy k-1 sampling at ``temperature``; each LLM call is recorded with its state
   key, behaviour log-probs, token ids and policy version; each episode emits its return;
2. **advantages**: :func:`~agent_rl_plugin.rl.compute_advantages` with ``method`` over exactly
   these rollouts (``rollout_run_id``), written to the ``advantages`` table;
3. **dataset**: :func:`~agent_rl_plugin.data.build_step_dataset` with that advantage run: one
   row per LLM call (an episode advantage applies to every step of its rollout, GiGPO's to its
   step), the multi-step recipe that trains every action, not only the last;
4. **train**: :func:`~agent_rl_plugin.train.offline.train_offline_grpo` at step level,
   constrained to the environment's action words, **continuing the previous round's adapter**
   against the fixed base model; recorded in ``training_runs``;
5. **reload**: the policy swaps to the new adapter without a restart;
6. **eval**: greedy episodes from every held-out start (not recorded): ``heldout_success``.

A round whose rollouts give no group a reward difference has nothing to learn from: it is
recorded ``skipped`` and the policy stays. Every finished round is a ``loop_rounds`` row; a
loop run again with the same settings (same ``loop_id``) resumes after its last recorded round.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agent_rl_plugin import tracing
from agent_rl_plugin.data import BuildReport, DatasetError, build_step_dataset
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.loop.config import LoopConfig, LoopConfigError, environment_factory
from agent_rl_plugin.loop.episode import env_agent, play_episode
from agent_rl_plugin.loop.records import LoopRound, read_rounds, write_round
from agent_rl_plugin.rl import compute_advantages
from agent_rl_plugin.rl.store import AdvantageInputError
from agent_rl_plugin.rollouts import run_rollouts

__all__ = ["LoopResult", "evaluate", "train_loop"]

logger = logging.getLogger(__name__)

OnRound = Callable[[LoopRound], None]
#: Called with (round, phase) when a phase of a round starts (for progress displays).
OnPhase = Callable[[int, str], None]


@dataclass
class LoopResult:
    """The rounds of a loop (resumed ones included), its id, database and final adapter."""

    loop_id: str
    db_path: str
    rounds: list[LoopRound] = field(default_factory=list)
    resumed_from: int | None = None

    @property
    def heldout_curve(self) -> list[float | None]:
        return [r.heldout_success for r in self.rounds]

    @property
    def adapter_path(self) -> str | None:
        return self.rounds[-1].adapter_path if self.rounds else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "loop_id": self.loop_id,
            "db": self.db_path,
            "resumed_from": self.resumed_from,
            "heldout_success": self.heldout_curve,
            "rounds": [r.to_dict() for r in self.rounds],
        }


def evaluate(make_env: Callable[[], Any], policy: Any, starts: Any) -> float:
    """Share of ``starts`` from which ``policy`` reaches the goal acting greedily (not recorded)."""
    starts = list(starts)
    wins = sum(play_episode(make_env(), start, policy, greedy=True).succeeded for start in starts)
    return wins / len(starts)


def _base_model(config: LoopConfig, make_env: Callable[[], Any]) -> str:
    if config.model is not None:
        return config.model
    from agent_rl_plugin.train.tiny import build_tiny_model

    env_name = config.env.rsplit(":", 1)[-1].replace(".", "_")
    path = Path(config.output_dir) / f"base-model-{env_name}-s{config.seed}"  # its vocabulary is the env's
    if (path / "config.json").is_file():
        return str(path)
    env = make_env()
    texts = ["\n".join(env.actions)] * 20  # each action word becomes one token
    for start in (*env.train_starts, *env.heldout_starts):
        texts.append(env.reset(start))
    return build_tiny_model(path, vocab_texts=texts, seed=config.seed)


def _tasks(config: LoopConfig, make_env: Callable[[], Any]) -> list[dict[str, Any]]:
    env = make_env()
    name = config.env.rsplit(":", 1)[-1]
    tasks = []
    for start in env.train_starts:
        label = "-".join(map(str, start)) if isinstance(start, tuple) else str(start)
        stored = list(start) if isinstance(start, tuple) else start
        tasks.append({"task_id": f"{name}:{label}", "prompt": env.reset(start), "metadata": {"start": stored}})
    return tasks


def train_loop(
    config: LoopConfig,
    *,
    policy: Any = None,
    progress: bool = True,
    on_round: OnRound | None = None,
    on_phase: OnPhase | None = None,
) -> LoopResult:
    """Run ``config.rounds`` rounds of the loop (see the module doc) and return them.

    ``policy``: the policy the agent calls (default: a
    :class:`~agent_rl_plugin.policy.LocalPolicy` over ``config.model``); it must have
    ``generate`` and ``load_adapter``. ``on_round`` is called with each finished round (also
    for rounds read back when resuming); ``on_phase(round, phase)`` when a phase starts;
    ``progress`` shows the trainer's progress bar. Recording goes to ``config.db_path`` with
    content captured (the step dataset needs the prompts); a recording configuration set
    before is restored afterwards. ``config.torch_threads`` sets torch's (process-wide) thread
    count. A crashed round is redone from its start with new rollouts (each attempt has its own
    ``rollout_run_id``), so a resumed loop never mixes two attempts."""

    make_env = environment_factory(config.env)
    if config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    db = config.db_path
    before = tracing.STATE.config
    tracing.configure(tracing.current_config(), db_path=db, capture_content=True, enable_rl=True)
    try:
        return _run(config, db, make_env, policy, progress, on_round, on_phase)
    finally:
        tracing.flush()
        if before is not None:
            tracing.configure(before)
        else:  # recording was off before the loop: it is off again (nothing more goes to the loop's file)
            tracing.shutdown()


def _run(
    config: LoopConfig,
    db: str,
    make_env: Callable[[], Any],
    policy: Any,
    progress: bool,
    on_round: OnRound | None,
    on_phase: OnPhase | None,
) -> LoopResult:
    from agent_rl_plugin.policy import LocalPolicy

    loop_id = config.loop_id()
    base = _base_model(config, make_env)
    done = [r for r in read_rounds(db, loop_id) if r.round <= config.rounds]
    digest = config.settings_digest()
    other = [r for r in done if r.details.get("settings", digest) != digest]
    if other:
        raise LoopConfigError(
            f"loop {loop_id!r} in {db} was run with other settings (round {other[0].round}): resuming it would "
            "continue an adapter trained on something else",
            hint="give this run another --name, or run it with the settings it had",
        )
    result = LoopResult(loop_id, db, resumed_from=done[-1].round if done else None)
    if policy is None:
        policy = LocalPolicy(base, seed=config.seed, allow_download=config.allow_download)
    for row in done:
        result.rounds.append(row)
        if on_round:
            on_round(row)
    if done and done[-1].adapter_path:
        policy.load_adapter(done[-1].adapter_path)
    env = make_env()
    if not done:
        if on_phase:
            on_phase(0, "eval")
        started = time.perf_counter()
        success = evaluate(make_env, policy, env.heldout_starts)
        row = LoopRound(
            loop_id,
            0,
            "done",
            config.env,
            config.method,
            config.seed,
            policy.version,
            heldout_success=success,
            seconds={"eval": time.perf_counter() - started},
        )
        _finish(db, result, row, on_round, digest)
    for k in range(len(result.rounds), config.rounds + 1):
        row = _round(config, k, policy, base, make_env, result.rounds[-1], progress, on_phase)
        _finish(db, result, row, on_round, digest)
    return result


def _finish(db: str, result: LoopResult, row: LoopRound, on_round: OnRound | None, digest: str) -> None:
    row.details["settings"] = digest
    write_round(db, row)
    result.rounds.append(row)
    if on_round:
        on_round(row)


def _round(
    config: LoopConfig,
    k: int,
    policy: Any,
    base: str,
    make_env: Callable[[], Any],
    previous: LoopRound,
    progress: bool,
    on_phase: OnPhase | None,
) -> LoopRound:
    from agent_rl_plugin.train.grpo_config import OfflineGRPOTrainConfig
    from agent_rl_plugin.train.offline import train_offline_grpo
    from agent_rl_plugin.train.recorded import train_recorded

    env = make_env()
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    order = ("rollouts", "advantages", "dataset", "train", "reload", "eval")

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = round(now - clock, 4)
        clock = now
        following = order[order.index(name) + 1]
        if on_phase and following != "eval":
            on_phase(k, following)

    if on_phase:
        on_phase(k, "rollouts")

    loop_id = config.loop_id()
    run_id = f"{loop_id}-r{k}-{new_id()[:6]}"  # one per attempt: a redone round never reuses a crashed one's rollouts
    row = LoopRound(
        loop_id,
        k,
        "done",
        config.env,
        config.method,
        config.seed,
        previous.policy_version,
        adapter_path=previous.adapter_path,
        rollout_run_id=run_id,
    )
    agent = env_agent(make_env, policy, temperature=config.temperature, model_name=Path(base).name)
    if hasattr(policy, "reseed"):
        policy.reseed(config.seed * 100_003 + k)
    outcomes = run_rollouts(
        agent,
        _tasks(config, make_env),
        group_size=config.group_size,
        concurrency=1,
        seed=config.seed * 1000 + k,
        run_id=run_id,
        db=config.db_path,
    )
    if not tracing.flush():
        raise RuntimeError(f"round {k}: the recorded spans could not all be stored in {config.db_path}")
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} rollouts of round {k} failed, e.g. {failed[0].error}")
    row.train_success = sum(bool(o.output["succeeded"]) for o in outcomes) / len(outcomes)
    lap("rollouts")
    try:
        advantages = compute_advantages(config.db_path, config.method, rollout_run_id=run_id)
    except AdvantageInputError as exc:
        row.status, row.details["skipped"] = "skipped", str(exc)
        return _evaluate_round(row, make_env, policy, env, seconds, on_phase)
    row.advantage_run_id = advantages.run_id
    lap("advantages")
    report = BuildReport()
    try:
        dataset = build_step_dataset(config.db_path, run_id=advantages.run_id, rollout_run_id=run_id, report=report)
    except DatasetError as exc:
        row.status, row.details["skipped"] = "skipped", str(exc)
        return _evaluate_round(row, make_env, policy, env, seconds, on_phase)
    nonzero = sum(1 for a in dataset["advantage"] if a)
    row.details.update(steps=len(dataset), nonzero_steps=nonzero)
    lap("dataset")
    if nonzero == 0:
        row.status, row.details["skipped"] = "skipped", "every advantage is 0: no group had a reward difference"
        return _evaluate_round(row, make_env, policy, env, seconds, on_phase)
    options = config.training_options()
    train_config = OfflineGRPOTrainConfig(
        model=base,
        output_dir=str(Path(config.output_dir) / loop_id / f"round-{k}"),
        advantage_level="step",
        choices=list(env.actions),
        seed=config.seed * 1000 + k,
        allow_download=config.allow_download,
        **options,
    )
    result, training_run_id = train_recorded(
        method="gigpo" if config.method == "gigpo" else "offline_grpo",
        config=train_config,
        dataset=dataset,
        dataset_sql=f"loop {loop_id} round {k}: rollouts {run_id}, advantages {advantages.run_id}",
        record_db=config.db_path,
        train=lambda: train_offline_grpo(train_config, dataset, adapter=previous.adapter_path, progress=progress),
    )
    row.training_run_id = training_run_id
    row.adapter_path = result.adapter_path
    row.details["train"] = {
        k2: result.metrics.get(k2)
        for k2 in ("train_loss", "clip_ratio", "approx_kl", "entropy")
        if k2 in result.metrics
    }
    row.details["global_step"] = result.global_step
    row.details["continued_from"] = result.extra.get("continued_from")
    lap("train")
    row.policy_version = policy.load_adapter(result.adapter_path)
    lap("reload")
    return _evaluate_round(row, make_env, policy, env, seconds, on_phase)


def _evaluate_round(
    row: LoopRound,
    make_env: Callable[[], Any],
    policy: Any,
    env: Any,
    seconds: dict[str, float],
    on_phase: OnPhase | None = None,
) -> LoopRound:
    if on_phase:
        on_phase(row.round, "eval")
    started = time.perf_counter()
    row.heldout_success = evaluate(make_env, policy, env.heldout_starts)
    seconds["eval"] = round(time.perf_counter() - started, 4)
    row.seconds = seconds
    return row
