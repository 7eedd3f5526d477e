"""Labels become ``human_label`` reward rows, as after ``agent-rl label``.

Contract: :class:`HumanLabelScorer` takes the rollout ids of labels just written
(:meth:`~HumanLabelScorer.submit`, which never blocks on scoring) and, on its own thread, runs
the ``human_label`` reward for them when a reward of that name is registered
(:func:`~agent_rl_plugin.rewards.runner.score`, so its rows are exactly the CLI's). Ids that
arrive while a run is going wait for the next run; a run starts once no label came for
:data:`QUIET_S` (a burst of keyboard labels is scored once, and its writes never wait for it). A failure is logged and counted
(:attr:`~HumanLabelScorer.errors`), never raised into a request: the labels are stored either way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable

from agent_rl_plugin.rewards.labels import HUMAN_REWARD

logger = logging.getLogger("agent_rl_plugin.ui")

QUIET_S = 1.0


class HumanLabelScorer:
    """See the module contract. ``turn``: held while scoring (the backend's file lock)."""

    def __init__(
        self, db: str, turn: Callable[[], contextlib.AbstractContextManager[Any]], quiet_s: float = QUIET_S
    ) -> None:
        self.db = db
        self.quiet_s = quiet_s
        self._last_submit = 0.0
        self._turn = turn
        self._pending: set[str] = set()
        self._cond = threading.Condition()
        self._busy = False
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.errors = 0
        self.last_error: str | None = None

    def submit(self, rollout_ids: list[str]) -> None:
        with self._cond:
            self._pending.update(rollout_ids)
            self._last_submit = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="agent-rl ui human_label", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """True once nothing is pending or running (for tests and shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout_s)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending))
                self._busy = True
                # Let a burst of labels (u, u, d, ...) finish first: one run for all, and the
                # label writes do not wait for scoring between keys.
                while (quiet := self._last_submit + self.quiet_s - time.monotonic()) > 0:
                    self._cond.wait(quiet)
                ids, self._pending = sorted(self._pending), set()
            try:
                self._score(ids)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _score(self, ids: list[str]) -> None:
        from agent_rl_plugin.rewards.registry import collect_registered_rewards
        from agent_rl_plugin.rewards.runner import score

        try:
            if HUMAN_REWARD not in collect_registered_rewards().rewards:
                return
            with self._turn():
                score(self.db, rewards=[HUMAN_REWARD], rollout_ids=ids, workers=0)
            self.runs += 1
        except Exception as exc:  # noqa: BLE001 - the labels are stored; scoring is best effort, logged
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            logger.warning("agent-rl ui: could not score %s for %d labelled rollouts: %s", HUMAN_REWARD, len(ids), exc)
