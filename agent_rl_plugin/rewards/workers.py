"""Running reward plugins: in worker processes with a wall-clock timeout, or in-process.

* :func:`evaluate` calls one plugin on one rollout (pointwise) or one group (batch) and turns
  each result into a checked :class:`~agent_rl_plugin.rewards.rows.Outcome`: an exception
  becomes ``"ExceptionType: message"`` (with the traceback in ``metrics``), a result outside the
  contract (NaN, a string, an object, a step index past the rollout's steps, a batch result of
  the wrong length) becomes ``"invalid result: ..."`` naming the reward.
* :class:`WorkerPool` runs work items in ``workers`` processes started with the ``fork`` start
  method: the plugins (after ``prepare``) and the rollouts are inherited, never pickled; a work
  item crosses the pipe as ``(item id, reward name, rollout indices)`` and comes back as plain
  outcomes. Each item has ``timeout_s`` of wall-clock time; the parent waits on the pipes, and
  a worker past its deadline is killed with SIGKILL (with its whole process group, so
  subprocesses a plugin started die too), its item gets ``"timed out after S s"`` and a fresh
  worker takes the next item. When a reward's first ``stop_after_timeouts`` (3) items all timed
  out, its items not yet started fail at once (``"not run: ..."``), so a plugin that always hangs
  costs a few timeouts, not one per rollout; its error rows are retried by the next run. A
  worker that dies (a crash, ``os._exit``) gives
  ``"worker process died (exit code N)"``. Worker stdout goes to stderr so ``--json`` output
  stays clean.
* :func:`run_in_process` is ``workers=0``: the same calls in this process, no timeout, no
  isolation (a hanging plugin hangs the run): for debugging with ``pdb`` or prints.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
import warnings
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

from agent_rl_plugin.rewards.base import RewardPlugin
from agent_rl_plugin.rewards.result import RewardContractError, coerce_result
from agent_rl_plugin.rewards.rollout import Rollout
from agent_rl_plugin.rewards.rows import Outcome, StepRow, dumps


@dataclass(frozen=True)
class WorkItem:
    """One call of one reward: a rollout (pointwise) or a group (batch), by index."""

    item_id: int
    reward: str
    indices: tuple[int, ...]


OnResult = Callable[[WorkItem, list[Outcome]], None]


def _error_text(exc: BaseException) -> str:
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _invalid(exc: BaseException, reward: RewardPlugin) -> Outcome:
    """``invalid result: DETAIL (reward 'NAME')`` from a RewardContractError."""
    detail = str(exc)
    prefix = f"reward {reward.name!r} returned an invalid result: "
    detail = detail[len(prefix) :] if detail.startswith(prefix) else detail
    detail = detail.removeprefix("Value error, ")
    return Outcome.failed(f"invalid result: {detail} (reward {reward.name!r})")


def _check(value: Any, reward: RewardPlugin, rollout: Rollout) -> Outcome:
    try:
        result = coerce_result(value, reward.name)
        n_steps = len(rollout.steps)
        for step in result.step_outputs:
            if step.step_index >= n_steps:
                raise RewardContractError(f"step_index {step.step_index} is past the rollout's {n_steps} steps")
        if result.error is not None:
            return Outcome.failed(result.error)
        if not result.applicable:
            return Outcome("na")
        try:
            metrics = dumps(result.metrics)
            steps = [StepRow(s.step_index, s.base_reward, s.reason, dumps(s.metrics)) for s in result.step_outputs]
        except (TypeError, ValueError) as exc:
            raise RewardContractError(f"metrics are not JSON ({exc})") from None
        label = result.metrics.get("label")
        return Outcome(
            "ok",
            score=result.score,
            reason=result.reason,
            metrics=metrics,
            label=label if isinstance(label, str) else None,
            steps=steps,
        )
    except RewardContractError as exc:
        return _invalid(exc, reward)


def evaluate(reward: RewardPlugin, rollouts: Sequence[Rollout]) -> list[Outcome]:
    """One call of ``reward`` (``score`` for pointwise, ``score_batch`` for batch) as outcomes."""
    try:
        if reward.mode == "batch":
            values = reward.score_batch(list(rollouts))
            try:
                values = list(values)
            except TypeError:
                raise RewardContractError(f"score_batch must return a list, got {type(values).__name__}") from None
            if len(values) != len(rollouts):
                raise RewardContractError(f"{len(values)} results for a group of {len(rollouts)} rollouts")
        else:
            values = [reward.score(rollout) for rollout in rollouts]
    except RewardContractError as exc:
        return [_invalid(exc, reward)] * len(rollouts)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's failure is data, SystemExit included
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:])
        return [Outcome.failed(_error_text(exc), tb)] * len(rollouts)
    return [_check(value, reward, rollout) for value, rollout in zip(values, rollouts)]


def run_in_process(
    items: Iterable[WorkItem], plugins: Mapping[str, RewardPlugin], rollouts: Sequence[Rollout], on_result: OnResult
) -> None:
    """``workers=0``: evaluate each item here, in order, without timeouts."""
    for item in items:
        on_result(item, evaluate(plugins[item.reward], [rollouts[i] for i in item.indices]))


# --- worker processes ---------------------------------------------------------------------
def _worker_main(
    conn: Connection, inherited: list[Connection], plugins: Mapping[str, RewardPlugin], rollouts: Sequence[Rollout]
) -> None:
    for other in inherited:  # the parent's ends of the other workers' pipes
        try:
            other.close()
        except OSError:
            pass
    try:
        os.setpgid(0, 0)  # our own process group: a kill takes the plugin's subprocesses too
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
    try:  # (the parent flushed its streams before forking)
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):
        pass
    sys.stdout = sys.stderr
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        item_id, name, indices = message
        outcomes = evaluate(plugins[name], [rollouts[i] for i in indices])
        try:
            conn.send((item_id, outcomes))
        except Exception as exc:  # noqa: BLE001 - should not happen: outcomes are plain data
            conn.send((item_id, [Outcome.failed(f"invalid result: cannot send the result back: {exc}")] * len(indices)))


class _Worker:
    def __init__(self, process: multiprocessing.process.BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.item: WorkItem | None = None
        self.deadline = 0.0

    def kill(self) -> None:
        pid = self.process.pid
        if pid is not None and self.process.is_alive():
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """``workers`` forked processes running :class:`WorkItem` s with a per-item timeout."""

    def __init__(
        self,
        workers: int,
        plugins: Mapping[str, RewardPlugin],
        rollouts: Sequence[Rollout],
        timeout_s: float,
        stop_after_timeouts: int = 3,
    ) -> None:
        if workers < 1:
            raise ValueError("WorkerPool needs at least one worker; use run_in_process for workers=0")
        if "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("scoring in worker processes needs the 'fork' start method; use workers=0 here")
        self.size = workers
        self.plugins = plugins
        self.rollouts = rollouts
        self.timeout_s = timeout_s
        self.stop_after_timeouts = stop_after_timeouts
        self._context = multiprocessing.get_context("fork")
        self._workers: list[_Worker] = []
        self.restarts = 0

    def _start(self) -> _Worker:
        parent_end, child_end = self._context.Pipe(duplex=True)
        inherited = [w.conn for w in self._workers] + [parent_end]
        process = self._context.Process(
            target=_worker_main,
            args=(child_end, inherited, self.plugins, self.rollouts),
            name="agent-rl-score-worker",
            daemon=False,  # daemonic processes may not start processes
        )
        with warnings.catch_warnings():  # Python 3.12+ warns about fork() with threads running
            warnings.simplefilter("ignore", DeprecationWarning)
            process.start()
        try:  # also from this side, so a kill right after start finds the group
            os.setpgid(process.pid, process.pid)  # type: ignore[arg-type]
        except OSError:
            pass
        child_end.close()
        worker = _Worker(process, parent_end)
        self._workers.append(worker)
        return worker

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        self._workers.remove(worker)

    def _replace(self, worker: _Worker) -> _Worker:
        self._retire(worker)
        self.restarts += 1
        return self._start()

    def run(self, items: Iterable[WorkItem], on_result: OnResult) -> None:
        """Run every item; ``on_result(item, outcomes)`` is called in this process as each ends.

        When one reward's first ``stop_after_timeouts`` finished items (0: never) all timed out,
        its items not yet started fail at once with ``"not run: ..."`` instead of each waiting out
        the timeout: a plugin that hangs on everything costs a few timeouts, not one per rollout.
        A reward that has returned once in this run is never stopped this way.
        """
        pending = deque(items)
        idle: list[_Worker] = []
        busy: dict[Connection, _Worker] = {}
        timeouts: dict[str, int] = {}
        returned: set[str] = set()

        def finish(worker: _Worker, item: WorkItem, outcomes: list[Outcome], healthy: bool) -> None:
            if healthy:
                worker.item = None
                idle.append(worker)
            elif pending:
                idle.append(self._replace(worker))
            else:
                self._retire(worker)
            on_result(item, outcomes)

        def timed_out(item: WorkItem) -> None:
            timeouts[item.reward] = timeouts.get(item.reward, 0) + 1
            if (
                self.stop_after_timeouts
                and item.reward not in returned
                and timeouts[item.reward] == self.stop_after_timeouts
            ):
                message = (
                    f"not run: reward {item.reward!r} timed out on its first {self.stop_after_timeouts} "
                    f"rollouts (timeout {self.timeout_s:g} s)"
                )
                for other in [p for p in pending if p.reward == item.reward]:
                    pending.remove(other)
                    on_result(other, [Outcome.failed(message)] * len(other.indices))

        try:
            for _ in range(min(self.size, len(pending))):
                idle.append(self._start())
            while pending or busy:
                while pending and idle:
                    worker = idle.pop()
                    item = pending.popleft()
                    worker.item, worker.deadline = item, time.monotonic() + self.timeout_s
                    try:
                        worker.conn.send((item.item_id, item.reward, item.indices))
                    except OSError:  # it died while idle: replace it and retry the item
                        pending.appendleft(item)
                        idle.append(self._replace(worker))
                        continue
                    busy[worker.conn] = worker
                if not busy:
                    continue
                wait_s = max(0.0, min(w.deadline for w in busy.values()) - time.monotonic())
                for ready in wait(list(busy), timeout=wait_s):
                    conn = cast(Connection, ready)  # wait() returns what it was given
                    worker = busy.pop(conn)
                    busy_item = worker.item
                    assert busy_item is not None
                    try:
                        _, outcomes = conn.recv()
                    except (EOFError, OSError):
                        worker.process.join(1)
                        message = f"worker process died (exit code {worker.process.exitcode})"
                        finish(worker, busy_item, [Outcome.failed(message)] * len(busy_item.indices), healthy=False)
                    else:
                        returned.add(busy_item.reward)
                        finish(worker, busy_item, outcomes, healthy=True)
                now = time.monotonic()
                for conn, worker in list(busy.items()):
                    if worker.deadline <= now:
                        del busy[conn]
                        late = worker.item
                        assert late is not None
                        message = f"timed out after {self.timeout_s:g} s"
                        finish(worker, late, [Outcome.failed(message)] * len(late.indices), healthy=False)
                        timed_out(late)
        finally:
            self.close()

    def close(self) -> None:
        """Stop every worker (politely, then SIGKILL after a second)."""
        for worker in self._workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 1.0
        for worker in self._workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
            worker.kill()
        self._workers = []
