"""Run any agent over a task list, ``group_size`` rollouts per task, concurrently, recorded.

:func:`run_rollouts` (or :func:`run_rollouts_async` inside an event loop) does, in order:

1. reads the tasks (:func:`~agent_rl_plugin.rollouts.tasks.load_tasks`: a task file or a list)
   and writes them into the ``tasks`` table of the database recording goes to (``db=``, else
   the configured one; skipped when no file is written), so rewards find the ground truth;
2. runs ``group_size`` rollouts of every task, at most ``concurrency`` at a time. Each runs in
   its own ``rollout(task_id=..., group_id=..., metadata=...)`` context:

   - ``group_id`` is ``f"{task_id}/{run_id}"``: one group per task and run, and a re-run (a new
     random ``run_id`` of 8 hex digits, unless given) makes new groups instead of growing old
     ones;
   - ``metadata`` is the task's metadata plus ``ground_truth`` (when not None), ``run_id``,
     ``sample_index`` and ``seed`` (when the run has one);
   - the rollout span gets the agent's input (``agent_rl.input``) and its result
     (``agent_rl.output``), so the ``rollouts`` view shows them even for an agent that is not
     traced itself;

3. calls the agent **with one positional argument**: the task dict of
   :func:`~agent_rl_plugin.rollouts.tasks.task_payload` (``task_id``, ``prompt``,
   ``ground_truth``, ``metadata``, ``sample_index``, ``seed``), or with ``input_key="prompt"``
   just that value (a top-level key of the task dict, else a key of its metadata). Async
   agents (coroutine or async-generator functions) run in this event loop; sync ones each in
   a daemon thread that inherits the rollout context
   (:mod:`~agent_rl_plugin.rollouts.agent_call`). Streams are consumed and their text is the
   output;
4. records failures without stopping the batch: an exception fails that rollout (span status
   ERROR, outcome ``"error"``); past ``timeout_s`` the rollout fails with
   ``TimeoutError: rollout timed out after S s`` (outcome ``"timeout"``): an async agent is
   cancelled, a sync agent's thread cannot be killed and runs on unobserved (its late spans
   still carry the rollout id);
5. flushes the recorded spans, and returns one :class:`RolloutOutcome` per rollout in task
   order then sample order.

``progress(done, total, outcome)`` is called in the event loop after each rollout; its own
failures are logged and ignored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import agent_rl_plugin.tracing as tracing
from agent_rl_plugin.ids import new_id
from agent_rl_plugin.instrumentation.context import rollout
from agent_rl_plugin.instrumentation.spans import capture_content, current_recording_span, set_attributes, to_json_text
from agent_rl_plugin.rollouts.agent_call import (
    RolloutTimeout,
    agent_kind,
    call_async,
    call_in_thread,
    wait_with_deadline,
)
from agent_rl_plugin.rollouts.tasks import load_tasks, rollout_seed, store_tasks, task_payload, use_database
from agent_rl_plugin.semconv import ROLLOUT_INPUT, ROLLOUT_OUTPUT
from agent_rl_plugin.serialize import safe_repr

__all__ = ["RolloutOutcome", "run_rollouts", "run_rollouts_async", "STATUSES"]

logger = logging.getLogger(__name__)

#: The values of :attr:`RolloutOutcome.status`.
STATUSES = ("ok", "error", "timeout", "cancelled")

Progress = Callable[[int, int, "RolloutOutcome"], None]


@dataclass
class RolloutOutcome:
    """How one rollout ended.

    ``status`` is ``ok``, ``error`` (the agent raised), ``timeout`` (past ``timeout_s``; the
    ``rollouts`` view shows these as ``error``) or ``cancelled``. ``output`` is what the agent
    returned (streamed text for a stream), ``error`` is ``"Type: message"`` when not ok,
    ``duration_s`` is wall-clock seconds.
    """

    rollout_id: str
    task_id: str
    group_id: str
    sample_index: int
    status: str
    output: Any = None
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def duration(self) -> float:
        """Alias of :attr:`duration_s`."""
        return self.duration_s

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (an output JSON cannot hold becomes its repr)."""
        try:
            json.dumps(self.output)
            output = self.output
        except (TypeError, ValueError):
            output = safe_repr(self.output)
        return {
            "rollout_id": self.rollout_id,
            "task_id": self.task_id,
            "group_id": self.group_id,
            "sample_index": self.sample_index,
            "status": self.status,
            "output": output,
            "error": self.error,
            "duration_s": round(self.duration_s, 4),
        }


@dataclass(frozen=True)
class _Job:
    row: Any
    sample_index: int
    group_id: str
    rollout_id: str
    seed: int | None
    metadata: dict[str, Any]


def _check(group_size: int, concurrency: int, timeout_s: float | None) -> None:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {group_size!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds or None, got {timeout_s!r}")


def _agent_input(payload: dict[str, Any], input_key: str | None) -> Any:
    if input_key is None:
        return payload
    if input_key in payload:
        return payload[input_key]
    return payload["metadata"][input_key]


def _check_input_key(rows: list[Any], input_key: str | None) -> None:
    if input_key is None:
        return
    for row in rows:
        if input_key not in task_payload(row, 0, None) and input_key not in row.metadata:
            raise ValueError(
                f"input_key {input_key!r}: task {row.task_id!r} has no such key (keys: task_id, prompt, "
                f"ground_truth, metadata, sample_index, seed, or a key of its metadata)"
            )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _jobs(rows: list[Any], group_size: int, run_id: str, seed: int | None) -> list[_Job]:
    jobs = []
    for row in rows:
        group_id = f"{row.task_id}/{run_id}"
        for index in range(group_size):
            sample_seed = rollout_seed(seed, row.task_id, index)
            metadata = dict(row.metadata)
            if row.ground_truth is not None:
                metadata["ground_truth"] = row.ground_truth
            metadata.update(run_id=run_id, sample_index=index)
            if sample_seed is not None:
                metadata["seed"] = sample_seed
            jobs.append(_Job(row, index, group_id, new_id(), sample_seed, metadata))
    return jobs


async def _run_one(
    agent_fn: Callable[[Any], Any], kind: str, job: _Job, timeout_s: float | None, input_key: str | None
) -> RolloutOutcome:
    started = time.perf_counter()
    status, output, error = "ok", None, None
    argument = _agent_input(task_payload(job.row, job.sample_index, job.seed), input_key)
    try:
        async with rollout(
            task_id=job.row.task_id, group_id=job.group_id, metadata=job.metadata, rollout_id=job.rollout_id
        ):
            root = current_recording_span()  # the rollout span (None when recording is off)
            # the span to record the agent's input and output on, when content is captured
            capture = root if root is not None and capture_content() else None
            if capture is not None:
                set_attributes(capture, {ROLLOUT_INPUT: to_json_text(argument)})
            if kind == "async":
                job_future: asyncio.Future[Any] = asyncio.ensure_future(call_async(agent_fn, argument))
            else:
                job_future = call_in_thread(agent_fn, argument, name=f"agent-rl-rollout-{job.rollout_id[:8]}")
            try:
                output = await wait_with_deadline(job_future, timeout_s)
            except RolloutTimeout as exc:
                status = "timeout"
                raise TimeoutError(str(exc)) from None  # recorded on the rollout span as TimeoutError
            if capture is not None:
                set_attributes(capture, {ROLLOUT_OUTPUT: to_json_text(output)})
    except asyncio.CancelledError:
        raise
    except (Exception, SystemExit) as exc:  # the agent failed: record it, go on with the others
        status = "timeout" if status == "timeout" else "error"
        error = _describe(exc)
    return RolloutOutcome(
        job.rollout_id,
        job.row.task_id,
        job.group_id,
        job.sample_index,
        status,
        output,
        error,
        time.perf_counter() - started,
    )


def _report(progress: Progress | None, done: int, total: int, outcome: RolloutOutcome) -> None:
    if progress is None:
        return
    try:
        progress(done, total, outcome)
    except Exception:
        logger.warning("agent-rl: the rollout progress callback failed", exc_info=True)


async def run_rollouts_async(
    agent_fn: Callable[[Any], Any],
    tasks: str | os.PathLike[str] | Iterable[Any],
    group_size: int = 8,
    concurrency: int = 16,
    *,
    progress: Progress | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
    input_key: str | None = None,
    run_id: str | None = None,
    db: str | os.PathLike[str] | None = None,
) -> list[RolloutOutcome]:
    """:func:`run_rollouts` for code already inside an event loop (``await`` it)."""
    _check(group_size, concurrency, timeout_s)
    kind = agent_kind(agent_fn)
    rows = load_tasks(tasks)
    _check_input_key(rows, input_key)
    path = use_database(db)
    if not rows:
        return []
    await asyncio.to_thread(store_tasks, rows, path)
    jobs = _jobs(rows, group_size, run_id or new_id()[:8], seed)
    limit = asyncio.Semaphore(concurrency)
    total, done = len(jobs), 0

    async def guarded(job: _Job) -> RolloutOutcome:
        nonlocal done
        async with limit:
            outcome = await _run_one(agent_fn, kind, job, timeout_s, input_key)
        done += 1
        _report(progress, done, total, outcome)
        return outcome

    try:
        return list(await asyncio.gather(*(guarded(job) for job in jobs)))
    finally:
        await asyncio.to_thread(tracing.flush)


def run_rollouts(
    agent_fn: Callable[[Any], Any],
    tasks: str | os.PathLike[str] | Iterable[Any],
    group_size: int = 8,
    concurrency: int = 16,
    *,
    progress: Progress | None = None,
    seed: int | None = None,
    timeout_s: float | None = None,
    input_key: str | None = None,
    run_id: str | None = None,
    db: str | os.PathLike[str] | None = None,
) -> list[RolloutOutcome]:
    """Run ``agent_fn`` ``group_size`` times on each task, ``concurrency`` at a time, each run
    recorded as a rollout; returns the outcomes (see the module docstring for the rules).

    ``tasks``: a task file path (``.jsonl``/``.json``/``.csv``) or a list of task dicts.
    ``seed``: derive a stable per-rollout seed (``task["seed"]``, metadata ``seed``).
    ``timeout_s``: per rollout. ``input_key``: call the agent with ``task[input_key]`` instead
    of the task dict. ``run_id``: the group id suffix (default: new random). ``db``: record into
    this DuckDB file (default: the configured one). Raises ``ValueError`` for bad arguments,
    :class:`~agent_rl_plugin.rollouts.tasks.TaskFileError` for bad tasks, ``TypeError`` for an
    agent that is not callable, ``RuntimeError`` when called inside a running event loop (use
    :func:`run_rollouts_async`); the agent's own failures never raise.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_rollouts() was called inside a running event loop: use `await run_rollouts_async(...)`")
    return asyncio.run(
        run_rollouts_async(
            agent_fn,
            tasks,
            group_size,
            concurrency,
            progress=progress,
            seed=seed,
            timeout_s=timeout_s,
            input_key=input_key,
            run_id=run_id,
            db=db,
        )
    )
