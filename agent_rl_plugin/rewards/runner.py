"""``agent-rl score`` as a function: run reward plugins over stored rollouts into ``rewards``.

:func:`score` does, in order:

1. collect the rewards (:func:`~agent_rl_plugin.rewards.registry.collect_registered_rewards`)
   and keep the ones asked for (all by default);
2. load the selected rollouts (``where``: SQL over the ``rollouts`` view, and/or
   ``rollout_ids``) with :func:`~agent_rl_plugin.rewards.rollout.load_rollouts`, and the keys of
   rows already written, then close the file;
3. cut the work into items: one rollout per item for pointwise rewards, one group (same
   ``group_id``, else same ``task_id``, else the rollout alone) for batch rewards, skipping
   those whose ``(rollout_id, name, input_hash)`` already has a row without error (unless
   ``rescore``). Error rows never count as done, so a later run retries them;
4. call ``prepare(ScoringContext)`` once, in this process, for each reward with work left (a
   failure gives each of its rollouts an error row ``prepare failed: ...``);
5. run the items (:mod:`agent_rl_plugin.rewards.workers`: ``workers`` forked processes with a
   per-item wall-clock ``timeout_s``, or in this process with ``workers=0``), and append the
   rows in batches (:class:`~agent_rl_plugin.rewards.rows.RowWriter`).

A batch reward sees the selected members of each group; when some members of a group are done
and others are not, the whole group is scored again and rows are written for the others only.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence

import duckdb
import pluggy

from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.base import RewardPlugin, ScoringContext
from agent_rl_plugin.rewards.registry import RegisteredReward, collect_registered_rewards
from agent_rl_plugin.rewards.rollout import Rollout, load_rollouts
from agent_rl_plugin.rewards.rows import Outcome, RowContext, RowWriter, done_keys, input_hash, outcome_rows
from agent_rl_plugin.rewards.weights import check_weights, record_weights
from agent_rl_plugin.rewards.workers import WorkerPool, WorkItem, evaluate, run_in_process

Progress = Callable[[int, int], None]
WHERE_HINT = (
    "where is an SQL condition over the rollouts view, e.g. \"task_id = 'shop-0' and status = 'ok'\" "
    '(its columns: docs/schema.md, or `agent-rl query "describe rollouts"`)'
)


class ScoringError(AgentRLError):
    """A problem with the request (unknown reward, bad SQL); ``hint`` says how to fix it."""


class UnknownRewardError(ScoringError):
    """A reward name that no plugin registered."""


@dataclass
class RewardStats:
    """What one reward did in one run (counts are rollouts, except ``step_rows``)."""

    name: str
    plugin: str
    plugin_version: str
    mode: str
    source: str
    scored: int = 0
    step_rows: int = 0
    skipped: int = 0
    errors: int = 0
    not_applicable: int = 0
    error_examples: list[str] = field(default_factory=list)

    def add_error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_examples) < 3 and message not in self.error_examples:
            self.error_examples.append(message)


@dataclass
class ScoreReport:
    """The outcome of :func:`score`: counts per reward, timing, and whether all went well."""

    db_path: str
    rollouts: int
    rewards: dict[str, RewardStats]
    elapsed_s: float
    workers: int
    registration_errors: dict[str, str] = field(default_factory=dict)
    #: seconds spent loading rollouts ("load"), hashing and finding what is done ("plan"), in
    #: prepare() ("prepare"), and running the rewards and writing rows ("score")
    timings: dict[str, float] = field(default_factory=dict)
    #: the weight of each reward run, as recorded in ``reward_weights`` (what the combined
    #: episode reward, ``rollouts.total_reward``, applies)
    weights: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no reward failed on any rollout and every plugin registered its rewards."""
        return not self.registration_errors and all(s.errors == 0 for s in self.rewards.values())

    @property
    def rollouts_per_s(self) -> float:
        return self.rollouts / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rows_written(self) -> int:
        return sum(s.scored + s.step_rows + s.errors for s in self.rewards.values())

    def failures(self) -> list[RewardStats]:
        return [s for s in self.rewards.values() if s.errors]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "db_path": self.db_path,
            "rollouts": self.rollouts,
            "elapsed_s": round(self.elapsed_s, 4),
            "rollouts_per_s": round(self.rollouts_per_s, 2),
            "workers": self.workers,
            "rows_written": self.rows_written,
            "rewards": [asdict(s) for s in self.rewards.values()],
            "registration_errors": self.registration_errors,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "weights": self.weights,
        }


def select_rewards(registry: dict[str, RegisteredReward], names: Sequence[str] | None) -> dict[str, RegisteredReward]:
    """The rewards named (when ``names`` is None: every reward whose ``run_by_default`` is true).
    A name is a reward's name, the class name of a reward that names its instance otherwise
    (``llm_judge`` selects ``llm_judge_heuristic``), or the name of a plugin, meaning all its
    rewards; unknown names raise :class:`UnknownRewardError`."""
    if names is None:
        return {n: entry for n, entry in registry.items() if getattr(entry.reward, "run_by_default", True)}
    chosen: dict[str, RegisteredReward] = {}
    unknown = []
    for name in names:
        if name in registry:
            chosen[name] = registry[name]
            continue
        by_class = {n: entry for n, entry in registry.items() if getattr(type(entry.reward), "name", None) == name}
        if by_class:
            chosen.update(by_class)
            continue
        of_plugin = {n: entry for n, entry in registry.items() if entry.plugin == name}
        if not of_plugin:
            unknown.append(name)
        chosen.update(of_plugin)
    if unknown:
        known = ", ".join(sorted(registry)) or "none (install a reward plugin)"
        raise UnknownRewardError(
            f"unknown reward{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; known rewards: {known}",
            "list them with `agent-rl plugins`",
        )
    return chosen


def apply_weights(
    selected: dict[str, RegisteredReward], weights: Mapping[str, float] | None
) -> dict[str, RegisteredReward]:
    """``selected`` with the ``weights`` given (by reward name, or by class name as in
    :func:`select_rewards`) set on copies of the rewards; :class:`ScoringError` for a weight of
    a reward that is not selected, or one that is not a number from 0 to
    :data:`~agent_rl_plugin.rewards.weights.MAX_WEIGHT`."""
    if not weights:
        return selected
    try:
        wanted = check_weights(weights)
    except ValueError as exc:
        raise ScoringError(str(exc), "give each weight as NAME=W, W from 0 to 1e6, e.g. task_completion=2") from None
    out = dict(selected)
    for key, weight in wanted.items():
        names = [n for n, e in selected.items() if n == key or getattr(type(e.reward), "name", None) == key]
        if not names:
            raise ScoringError(
                f"a weight was given for {key!r}, which is not among the rewards to run ({', '.join(selected) or 'none'})",
                "name the reward as NAME=W among the rewards to run",
            )
        for name in names:
            entry = out[name]
            reward = copy.copy(entry.reward)
            reward.weight = weight
            out[name] = RegisteredReward(reward, entry.plugin, entry.package_version)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_where(where: str | None) -> None:
    """Refuse a ``where`` that does not parse or is more than one condition that only reads the
    store (no data-modifying CTE, no file-reading table function; see
    :func:`~agent_rl_plugin.store.user_sql.check_condition`)."""
    if not where:
        return
    from agent_rl_plugin.store.user_sql import UserSqlError, check_condition

    try:
        check_condition(where, "SELECT * FROM rollouts WHERE ({where})")
    except UserSqlError as exc:
        raise ScoringError(f"bad where SQL: {exc}", WHERE_HINT) from None


def _read(
    db_path: str, where: str | None, rollout_ids: Sequence[str] | None, names: Sequence[str], rescore: bool
) -> tuple[list[Rollout], set[tuple[str, str, str]]]:
    from agent_rl_plugin.store import open_reader

    connection = open_reader(db_path)
    try:
        try:
            rollouts = load_rollouts(connection, where=where, rollout_ids=rollout_ids)
        except duckdb.Error as exc:
            if where:
                raise ScoringError(f"bad where SQL: {_first_line(exc)}", WHERE_HINT) from None
            raise
        done = set() if rescore else done_keys(connection, [r.rollout_id for r in rollouts], names)
    finally:
        connection.close()
    return rollouts, done


def _context(db_path: str) -> ScoringContext:
    def load(where: str | None = None, **kwargs: Any) -> list[Rollout]:
        from agent_rl_plugin.store import open_reader

        connection = open_reader(db_path)
        try:
            return load_rollouts(connection, where=where, **kwargs)
        finally:
            connection.close()

    return ScoringContext(db_path=db_path, load_rollouts=load)


def group_indices(rollouts: Sequence[Rollout]) -> list[tuple[int, ...]]:
    """Indices of the rollouts by group: same group_id, else same task_id, else alone."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, rollout in enumerate(rollouts):
        if rollout.group_id is not None:
            key = ("group", rollout.group_id)
        elif rollout.task_id is not None:
            key = ("task", rollout.task_id)
        else:
            key = ("rollout", rollout.rollout_id)
        groups.setdefault(key, []).append(index)
    return [tuple(members) for members in groups.values()]


def score(
    db_path: str,
    *,
    rewards: Sequence[str] | None = None,
    where: str | None = None,
    rescore: bool = False,
    workers: int = 2,
    timeout_s: float = 30.0,
    progress: Progress | None = None,
    rollout_ids: Sequence[str] | None = None,
    config: RLConfig | None = None,
    pm: pluggy.PluginManager | None = None,
    batch_size: int = 500,
    stop_after_timeouts: int = 3,
    weights: Mapping[str, float] | None = None,
) -> ScoreReport:
    """Score stored rollouts with reward plugins and append the rows to ``db_path``'s
    ``rewards`` table: what ``agent-rl score`` does, from Python.

    Arguments:

    * ``db_path``: the DuckDB store the rollouts were recorded into (call
      :func:`agent_rl_plugin.flush` first when this process recorded them). Rows are written in
      batches, each in a short write lease, so other processes get in between.
    * ``rewards``: reward names, or plugin names meaning all their rewards; by default every
      registered reward whose ``run_by_default`` is true. Rewards come from the
      ``agent_rl_register_rewards`` hook of ``pm`` (the process-wide plugin manager by default):
      built-ins, installed plugins, and rewards added in this process with
      :func:`~agent_rl_plugin.rewards.registration.register`.
    * ``where``: one SQL condition over the ``rollouts`` view (e.g. ``"task_id = 'shop-0'"``);
      ``rollout_ids``: only these rollouts. Both together select their intersection; neither
      selects every rollout.
    * ``rescore``: score again rollouts that already have a row for the same input (by default
      they are skipped, see :mod:`agent_rl_plugin.rewards.runner`).
    * ``workers``: forked worker processes, each item limited to ``timeout_s`` seconds of wall
      clock; ``workers=0`` runs the rewards in this process with no timeout (for debugging, or
      where ``fork`` is not available). When a reward's first ``stop_after_timeouts`` items
      (0: never) all time out, its remaining ones get ``not run`` error rows at once.
    * ``progress``: called as ``progress(done, total)`` over (reward, rollout) pairs.
    * ``config``: parameters and weights of the rewards (``config.rewards[NAME]``; default
      :meth:`RLConfig.from_env <agent_rl_plugin.config.RLConfig.from_env>`).
    * ``batch_size``: rows written per transaction.
    * ``weights``: ``{reward name: weight}`` overriding the configured weights of rewards run.

    The weight of every reward run (its class default, ``config.rewards[NAME]["weight"]``, or
    ``weights``) is recorded in the store's ``reward_weights`` table: the combined episode
    reward (``rollouts.total_reward``, and every reader of it) weights each name by it.

    Returns a :class:`ScoreReport`: per reward the rollouts scored, skipped (already done), not
    applicable and failed (with up to 3 example errors), the step rows written, and
    :attr:`ScoreReport.ok` (every reward succeeded on every selected rollout, and every plugin
    registered its rewards). ``prepare()`` runs only for rewards with rollouts to score.

    Raises :class:`UnknownRewardError` for a reward name no plugin registered,
    :class:`ScoringError` for bad ``where`` SQL or arguments,
    :class:`~agent_rl_plugin.rewards.registry.DuplicateRewardError` when two plugins register
    one name, and :class:`~agent_rl_plugin.store.StoreError` when the file cannot be opened. A
    reward's own failures (exceptions, timeouts, invalid results) never raise: they become
    error rows, counted in the report, and the next run retries them.
    """
    if workers < 0:
        raise ScoringError(f"workers must be 0 or more, got {workers}")
    if timeout_s <= 0:
        raise ScoringError(f"timeout must be positive, got {timeout_s}")
    started = time.perf_counter()
    registry = collect_registered_rewards(pm, config)
    selected = apply_weights(select_rewards(registry.rewards, rewards), weights)
    check_where(where)
    stats = {
        name: RewardStats(name, entry.plugin, entry.plugin_version, entry.reward.mode, entry.reward.source)
        for name, entry in selected.items()
    }
    errors = dict(registry.errors) if rewards is None else {}
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    rollouts, done = _read(db_path, where, rollout_ids, list(selected), rescore) if selected else ([], set())
    timings["load"] = time.perf_counter() - mark
    applied = {name: entry.reward.weight for name, entry in selected.items()}
    try:  # a configured weight ([rewards.NAME] weight = nan, a class default) is checked too
        applied = check_weights(applied)
    except ValueError as exc:
        raise ScoringError(
            str(exc),
            "set [rewards.NAME] weight (or -r NAME=W) to a number from 0 to 1e6; 0 shows a reward without counting it",
        ) from None
    if applied:
        record_weights(db_path, applied)

    def report() -> ScoreReport:
        return ScoreReport(
            db_path, len(rollouts), stats, time.perf_counter() - started, workers, errors, timings, applied
        )

    if not rollouts or not selected:
        return report()
    total = len(rollouts) * len(selected)
    finished = 0
    if progress:
        progress(0, total)
    mark = time.perf_counter()
    hashes_by_labels: dict[bool, list[str]] = {}

    def hashes_for(reward: RewardPlugin) -> list[str]:
        include = bool(getattr(reward, "uses_labels", False))
        if include not in hashes_by_labels:
            hashes_by_labels[include] = [r.content_hash(include_labels=include) for r in rollouts]
        return hashes_by_labels[include]

    groups = group_indices(rollouts)
    planned: list[WorkItem] = []
    todo: dict[int, tuple[str, frozenset[int]]] = {}  # item id -> (input hash, indices to write)
    for name, entry in selected.items():
        units = groups if entry.reward.mode == "batch" else [(i,) for i in range(len(rollouts))]
        for unit in units:
            hashes = hashes_for(entry.reward)
            digest = input_hash([hashes[i] for i in unit], entry.reward)
            wanted = frozenset(i for i in unit if (rollouts[i].rollout_id, name, digest) not in done)
            stats[name].skipped += len(unit) - len(wanted)
            finished += len(unit) - len(wanted)
            if wanted:
                planned.append(WorkItem(len(todo), name, unit))
                todo[planned[-1].item_id] = (digest, wanted)
    timings["plan"] = time.perf_counter() - mark
    mark = time.perf_counter()
    context = _context(db_path)
    prepare_errors: dict[str, str] = {}
    for name in dict.fromkeys(item.reward for item in planned):  # only rewards with work to do
        try:
            selected[name].reward.prepare(context)
        except Exception as exc:  # noqa: BLE001 - reported as error rows for this reward
            prepare_errors[name] = f"prepare failed: {type(exc).__name__}: {exc}"
    timings["prepare"] = time.perf_counter() - mark
    mark = time.perf_counter()
    items = [item for item in planned if item.reward not in prepare_errors]
    failed_now = [
        (item, [Outcome.failed(prepare_errors[item.reward])] * len(item.indices))
        for item in planned
        if item.reward in prepare_errors
    ]
    if progress:
        progress(finished, total)

    with RowWriter(db_path, batch_size) as writer:

        def on_result(item: WorkItem, outcomes: list[Outcome]) -> None:
            nonlocal finished
            entry = selected[item.reward]
            digest, wanted = todo[item.item_id]
            row_stats = stats[item.reward]
            for index, outcome in zip(item.indices, outcomes):
                if index not in wanted:
                    continue
                rollout = rollouts[index]
                ctx = RowContext(
                    rollout.rollout_id, entry.name, entry.plugin, entry.plugin_version, entry.reward.source, digest
                )
                writer.add(outcome_rows(ctx, outcome, [s.span_id for s in rollout.steps]))
                if outcome.status == "error":
                    row_stats.add_error(outcome.error or "error")
                elif outcome.status == "na":
                    row_stats.not_applicable += 1
                else:
                    row_stats.scored += 1
                    row_stats.step_rows += len(outcome.steps)
            finished += len(wanted)
            if progress:
                progress(finished, total)

        for item, outcomes in failed_now:
            on_result(item, outcomes)
        plugins = {name: entry.reward for name, entry in selected.items()}
        if workers == 0 or not items:
            run_in_process(items, plugins, rollouts, on_result)
        else:
            WorkerPool(workers, plugins, rollouts, timeout_s, stop_after_timeouts).run(items, on_result)
    timings["score"] = time.perf_counter() - mark
    return report()


__all__ = [
    "Progress",
    "RewardStats",
    "ScoreReport",
    "ScoringError",
    "UnknownRewardError",
    "check_where",
    "evaluate",
    "group_indices",
    "score",
    "select_rewards",
]
