"""One rollout and one group (``GET api/rollouts/<id>``, ``GET api/groups/<id>``).

Contract: :func:`rollout_detail` answers ``None`` for an unknown id, else everything the
rollout view shows (``docs/ui.md``): the rollout, its spans (at most :data:`MAX_SPANS`, ordered
by start, ``offset_ms`` from the first), steps, LLM and tool calls, every reward row (newest
first) and the episode rewards that make ``total_reward``, advantages per run, labels (newest
first), each list at most :data:`MAX_ROWS` long (``<list>_truncated`` says when cut), the
training runs whose recorded dataset query selects it (:class:`RunMembership`), its group's
size and its neighbours in start order. :func:`group_detail` answers ``None`` for an unknown group.
Only fixed SQL with bound values runs on the reader; training runs' recorded queries go through
the locked user-SQL path (:func:`~agent_rl_plugin.ui.listing.run_rollout_ids`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from agent_rl_plugin.store.user_sql import UserSqlError
from agent_rl_plugin.ui.backend import Backend
from agent_rl_plugin.ui.listing import CURRENT_LABELS_SQL, BadParameter, run_rollout_ids
from agent_rl_plugin.ui.rows import fetch_dicts, json_value, preview

logger = logging.getLogger("agent_rl_plugin.ui")

#: The most rows of each list of one rollout (spans, steps, calls, rewards, advantages, labels);
#: a cut list has ``<name>_truncated`` true.
MAX_SPANS = 5000
MAX_ROWS = MAX_SPANS
#: The most rollouts the group view shows (best first).
MAX_GROUP = 1000
#: Training runs checked for "used by" (the most recent that started after the rollout).
MAX_RUNS_CHECKED = 20
#: Time one run's recorded query may take to tell its rollouts, and all of them per request.
RUN_QUERY_TIMEOUT_S = 2.0
RUNS_BUDGET_S = 4.0

_SPANS_SQL = """SELECT span_id, parent_span_id, name, operation, span_kind, kind, start_unix_nano, duration_ms,
    status_code, status_message, attributes, events
FROM spans WHERE rollout_id = ? ORDER BY start_unix_nano, span_id LIMIT ?"""


class RunMembership:
    """Which rollouts each training run's recorded dataset query selects: computed once per run
    and query text (a run trains once: the rollouts recorded later, which it never saw, are left
    out by the caller), each within :data:`RUN_QUERY_TIMEOUT_S`, and per request within
    :data:`RUNS_BUDGET_S` (runs left over are tried again by the next request). A query that
    fails or runs out of time counts as selecting nothing, and is not run again."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], frozenset[str]] = {}
        self._lock = threading.Lock()

    def members(self, backend: Backend, run_id: str, dataset_sql: str | None, timeout_s: float) -> frozenset[str]:
        """The rollout ids ``run_id``'s query selects (cached, see the class contract)."""
        key = (run_id, dataset_sql or "")
        with self._lock:
            found = self._cache.get(key)
        if found is not None:
            return found
        try:
            found = frozenset(run_rollout_ids(backend, run_id, timeout_s=timeout_s))
        except (BadParameter, UserSqlError) as exc:
            logger.debug("agent-rl ui: cannot tell which rollouts run %s used: %s", run_id, exc)
            found = frozenset()
        with self._lock:
            if len(self._cache) > 1000:
                self._cache.clear()
            self._cache[key] = found
        return found

    def runs_using(self, backend: Backend, rollout_id: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + RUNS_BUDGET_S
        used = []
        for run in runs[:MAX_RUNS_CHECKED]:
            left = deadline - time.monotonic()
            with self._lock:
                known = (run["run_id"], run.get("dataset_sql") or "") in self._cache
            if not known and left <= 0.1:
                continue
            members = self.members(backend, run["run_id"], run.get("dataset_sql"), min(RUN_QUERY_TIMEOUT_S, left))
            if rollout_id in members:
                used.append({k: v for k, v in run.items() if k != "dataset_sql"})
        return used


def rollout_detail(backend: Backend, rollout_id: str, membership: RunMembership) -> dict[str, Any] | None:
    """Everything about one rollout (see the module contract), or ``None`` when unknown."""
    with backend.reader() as connection:
        found = fetch_dicts(connection, "SELECT * FROM rollouts WHERE rollout_id = ?", [rollout_id])
        if not found:
            return None
        rollout = found[0]
        spans = fetch_dicts(connection, _SPANS_SQL, [rollout_id, MAX_SPANS])
        steps = fetch_dicts(
            connection,
            "SELECT step_index, kind, name, span_id, input, output, status, error, start_time, duration_ms, state_key "
            "FROM steps WHERE rollout_id = ? ORDER BY step_index LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        llm_calls = fetch_dicts(
            connection,
            "SELECT span_id, name, provider, request_model, response_model, input_tokens, output_tokens, "
            "input_messages, output_messages, reasoning, finish_reasons, duration_ms, status, error "
            "FROM llm_calls WHERE rollout_id = ? ORDER BY start_time, span_id LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        tool_calls = fetch_dicts(
            connection,
            "SELECT span_id, tool_name, call_id, arguments, result, status, error, duration_ms "
            "FROM tool_calls WHERE rollout_id = ? ORDER BY start_time, span_id LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        rewards = fetch_dicts(
            connection,
            "SELECT reward_id, name, step_index, value, label, reason, plugin, plugin_version, source, created_at, "
            "error FROM rewards WHERE rollout_id = ? ORDER BY created_at DESC, reward_id LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        episode = fetch_dicts(
            connection,
            "SELECT name, value, weight, source, plugin FROM episode_rewards WHERE rollout_id = ? ORDER BY name",
            [rollout_id],
        )
        advantages = fetch_dicts(
            connection,
            "SELECT run_id, method, step_index, action_index, value, episode_advantage, step_advantage, reward, "
            "step_return, state_key, step_group_size, created_at FROM advantages WHERE rollout_id = ? "
            "ORDER BY created_at DESC, run_id, step_index NULLS FIRST, action_index NULLS FIRST LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        labels = fetch_dicts(
            connection,
            "SELECT label_id, step_index, label, value, score, labeller, note, created_at FROM labels "
            "WHERE rollout_id = ? ORDER BY created_at DESC, label_id LIMIT ?",
            [rollout_id, MAX_ROWS],
        )
        runs = fetch_dicts(  # a run cannot have trained on a rollout recorded after it started
            connection,
            "SELECT run_id, method, model, status, started_at, dataset_sql FROM training_runs "
            "WHERE started_at >= (SELECT start_time FROM rollouts WHERE rollout_id = ?) "
            "ORDER BY started_at DESC LIMIT ?",
            [rollout_id, MAX_RUNS_CHECKED],
        )
        group_size = 0
        if rollout["group_id"] is not None:
            group_size = connection.execute(
                "SELECT count(*) FROM rollouts WHERE group_id = ?", [rollout["group_id"]]
            ).fetchall()[0][0]
        neighbours = connection.execute(
            "WITH me AS (SELECT start_time, rollout_id FROM rollouts WHERE rollout_id = ?) "
            "SELECT (SELECT r.rollout_id FROM rollouts r, me WHERE (r.start_time, r.rollout_id) < "
            "(me.start_time, me.rollout_id) ORDER BY r.start_time DESC, r.rollout_id DESC LIMIT 1), "
            "(SELECT r.rollout_id FROM rollouts r, me WHERE (r.start_time, r.rollout_id) > "
            "(me.start_time, me.rollout_id) ORDER BY r.start_time, r.rollout_id LIMIT 1)",
            [rollout_id],
        ).fetchall()[0]
    first = min((s["start_unix_nano"] for s in spans if s["start_unix_nano"] is not None), default=0)
    for span in spans:
        start = span.pop("start_unix_nano")
        span["offset_ms"] = None if start is None else (start - first) / 1e6
    lists = {
        "spans": spans,
        "steps": steps,
        "llm_calls": llm_calls,
        "tool_calls": tool_calls,
        "rewards": rewards,
        "advantages": advantages,
        "labels": labels,
    }
    return {
        "rollout": rollout,
        **lists,
        **{f"{name}_truncated": len(rows) >= MAX_ROWS for name, rows in lists.items()},
        "episode_rewards": episode,
        "training_runs": membership.runs_using(backend, rollout_id, runs),
        "group": {"group_id": rollout["group_id"], "n_rollouts": int(group_size)},
        "neighbours": {"previous": neighbours[0], "next": neighbours[1]},
    }


def group_detail(backend: Backend, group_id: str) -> dict[str, Any] | None:
    """The rollouts of one group side by side (what GRPO compares), or ``None`` when unknown."""
    with backend.reader() as connection:
        rollouts = fetch_dicts(
            connection,
            "SELECT r.rollout_id, r.task_id, r.status, r.total_reward, r.duration_ms, r.n_tool_errors, r.output, "
            "(SELECT count(*) FROM steps s WHERE s.rollout_id = r.rollout_id) AS n_steps, "
            f"c.label, c.label_score FROM rollouts r LEFT JOIN ({CURRENT_LABELS_SQL}) c USING (rollout_id) "
            "WHERE r.group_id = ? ORDER BY r.total_reward DESC NULLS LAST, r.rollout_id LIMIT ?",
            [group_id, MAX_GROUP],
        )
        if not rollouts:
            return None
        ids = [r["rollout_id"] for r in rollouts]
        rewards = connection.execute(
            "SELECT rollout_id, name, value FROM episode_rewards WHERE list_contains(?, rollout_id)", [ids]
        ).fetchall()
        advantages = connection.execute(
            "SELECT run_id, any_value(method), rollout_id, "
            "coalesce(max(episode_advantage), max(value) FILTER (WHERE step_index IS NULL)), max(created_at) "
            "FROM advantages WHERE list_contains(?, rollout_id) GROUP BY run_id, rollout_id",
            [ids],
        ).fetchall()
    by_rollout: dict[str, dict[str, Any]] = {r["rollout_id"]: r for r in rollouts}
    names: set[str] = set()
    for rid, name, value in rewards:
        names.add(name)
        by_rollout[rid].setdefault("rewards", {})[name] = json_value(value)
    runs: dict[str, tuple[str, Any]] = {}
    for run_id, method, rid, value, created in advantages:
        runs[run_id] = (method, max(created, runs[run_id][1]) if run_id in runs else created)
        by_rollout[rid].setdefault("advantages", {})[run_id] = json_value(value)
    totals = [r["total_reward"] for r in rollouts if r["total_reward"] is not None]  # finite: json_value
    mean = sum(totals) / len(totals) if totals else None
    std = math.sqrt(sum((t - mean) ** 2 for t in totals) / len(totals)) if totals and mean is not None else None
    for row in rollouts:
        row.setdefault("rewards", {})
        row.setdefault("advantages", {})
        row["output_preview"] = preview(row.pop("output"))
    ordered_runs = sorted(runs.items(), key=lambda item: str(item[1][1]), reverse=True)
    return {
        "group_id": group_id,
        "task_id": rollouts[0]["task_id"],
        "reward_names": sorted(names),
        "advantage_runs": [{"run_id": run_id, "method": method} for run_id, (method, _) in ordered_runs],
        "mean_reward": mean,
        "std_reward": std,
        "rollouts": rollouts,
        "truncated": len(rollouts) >= MAX_GROUP,
    }
