"""Reading advantage inputs from the store with SQL: episode rewards and GiGPO steps.

* :func:`episode_rewards` (for GRPO, RLOO, Dr. GRPO): one row per selected rollout with its
  group and its combined episode reward.
* :func:`steps_for_gigpo`: one row per agent action (LLM step) with its group, trajectory,
  action position, state key, step reward and episode reward.

Shared rules (``docs/advantages.md`` has the full text):

* the selection is ``where``, an SQL condition over the ``rollouts`` view, and/or
  ``rollout_ids`` (a list of rollout ids) and/or ``rollout_run_id`` (the ``run_id`` that
  :func:`~agent_rl_plugin.rollouts.run_rollouts` records in each rollout's metadata), combined
  by AND (:func:`selection_sql`; ids are bound as parameters, never pasted into SQL); the
  group of a rollout is its ``group_id``, else its ``task_id``, else the rollout alone;
* episode rewards are the rows of the ``episode_rewards`` view (its rule: episode-level rows
  with a value and no error, the latest per rollout and name wins), combined per rollout by
  :meth:`agent_rl_plugin.rewards.RewardEngine.combine` (weighted mean over the names present:
  ``rollouts.total_reward`` when every weight is 1); step rewards follow the same rule per
  (rollout, step, name); ``reward_names`` keeps only those names (default: all);
  step rewards credited to one action are summed, each times its weight;
* a NaN or infinite reward raises :class:`AdvantageInputError` naming the rollout; rollouts
  without a usable episode reward are left out and listed in the report;
* rollouts that did not end ``ok`` (error, timeout, cancelled: :mod:`agent_rl_plugin.rl.failed`)
  follow ``failed_rollouts`` (:data:`~agent_rl_plugin.advantages.failed.FailedRollouts`):
  ``exclude`` (default) leaves them out before anything else, ``zero_reward`` takes their
  episode reward as 0, ``keep`` uses their own; the report's ``failed_rollouts`` says how many.

Each function returns a pyarrow Table; :func:`table_report` reads the report (counts of what
was left out or defaulted) stored in the table's schema metadata.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import duckdb
import pluggy
import pyarrow as pa
import pyarrow.compute as pc

from agent_rl_plugin.advantages.failed import DEFAULT_FAILED_ROLLOUTS, FailedRollouts, check_failed_rollouts
from agent_rl_plugin.errors import AgentRLError
from agent_rl_plugin.rewards.engine import RewardEngine
from agent_rl_plugin.rl import state_keys
from agent_rl_plugin.rl.failed import split_failed
from agent_rl_plugin.rl.hints import LLM_STEPS_HINT, SCORE_HINT
from agent_rl_plugin.rollouts.tasks import PER_SAMPLE_FIELDS, TASK_PAYLOAD_FIELDS

REPORT_KEY = b"agent_rl.report"
WHERE_HINT = (
    "where is an SQL condition over the rollouts view (columns rollout_id, task_id, group_id, status, "
    "total_reward, n_llm_calls, ...: see docs/schema.md), e.g. \"task_id = 'shop-0'\""
)
MAX_EXAMPLES = 5
#: The key of a rollout's metadata where :func:`~agent_rl_plugin.rollouts.run_rollouts` records
#: its run id (``rollout_run_id`` selects on it).
RUN_ID_KEY = "run_id"


class AdvantageInputError(AgentRLError, ValueError):
    """The stored data cannot give advantages (bad SQL, NaN reward, no rewards...); ``hint``
    says what to do."""


def _arrow(connection: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pa.Table:
    relation = connection.sql(sql, params=list(params) or None)
    return (getattr(relation, "to_arrow_table", None) or relation.arrow)()  # duckdb 2 / 1.x


def rollout_id_list(rollout_ids: Sequence[str] | str | None) -> list[str] | None:
    """``rollout_ids`` as a list of strings (one string is one id), or ``None`` for no filter."""
    if rollout_ids is None:
        return None
    if isinstance(rollout_ids, str):
        return [rollout_ids]
    return [str(i) for i in rollout_ids]


def selection_sql(
    where: str | None = None,
    rollout_ids: Sequence[str] | str | None = None,
    rollout_run_id: str | None = None,
) -> tuple[str | None, list[Any]]:
    """``(condition, params)``: one SQL condition over the ``rollouts`` view that keeps the
    rollouts matching ``where`` AND whose id is in ``rollout_ids`` AND whose metadata holds
    ``run_id = rollout_run_id`` (the filters that are not ``None``), with the parameters its
    ``?`` placeholders take, in order; ``(None, [])`` selects everything. ``where`` is spliced as
    it is (the callers check it); the ids and the run id are only ever parameters, so any text
    (quotes included) is a plain value. An empty ``rollout_ids`` selects nothing."""
    conditions: list[str] = [f"({where})"] if where else []
    params: list[Any] = []
    ids = rollout_id_list(rollout_ids)
    if ids is not None:
        conditions.append("rollout_id IN (SELECT unnest(CAST(? AS VARCHAR[])))")
        params.append(ids)
    if rollout_run_id is not None:
        conditions.append(f"(CASE WHEN json_valid(metadata) THEN metadata->>'$.{RUN_ID_KEY}' END) = ?")
        params.append(str(rollout_run_id))
    return (" AND ".join(conditions) or None), params


def describe_selection(
    where: str | None = None,
    rollout_ids: Sequence[str] | str | None = None,
    rollout_run_id: str | None = None,
) -> str | None:
    """The filters in words, for messages (``None`` when there is none): ``where "..."``,
    ``rollout ids ['a', 'b'] (2)``, ``rollout run id 'x'`` joined by ``and``."""
    parts: list[str] = [f"where {where!r}"] if where else []
    ids = rollout_id_list(rollout_ids)
    if ids is not None:
        shown = ", ".join(repr(i) for i in ids[:3]) + (", ..." if len(ids) > 3 else "")
        parts.append(f"rollout ids [{shown}] ({len(ids)})")
    if rollout_run_id is not None:
        parts.append(f"rollout run id {str(rollout_run_id)!r}")
    return " and ".join(parts) or None


def table_report(table: pa.Table) -> dict[str, Any]:
    """The report stored in ``table``'s schema metadata by :func:`episode_rewards` or
    :func:`steps_for_gigpo` (``{}`` when there is none)."""
    raw = (table.schema.metadata or {}).get(REPORT_KEY)
    return json.loads(raw) if raw else {}


def _with_report(table: pa.Table, report: dict[str, Any]) -> pa.Table:
    return table.replace_schema_metadata({REPORT_KEY: json.dumps(report).encode()})


class _Selection:
    """The selected rollouts registered as ``_arl_adv_sel`` (and the reward rows that count as
    ``_arl_adv_latest``) for the duration of a ``with`` block."""

    def __init__(
        self,
        connection: duckdb.DuckDBPyConnection,
        where: str | None,
        reward_names: Sequence[str] | None,
        weights: Mapping[str, float] | None,
        rollout_ids: Sequence[str] | None = None,
        rollout_run_id: str | None = None,
        failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
    ) -> None:
        self.connection = connection
        self.policy = check_failed_rollouts(failed_rollouts)
        self.where = where
        self.condition, self.params = selection_sql(where, rollout_ids, rollout_run_id)
        self.reward_names = list(reward_names) if reward_names else None
        from agent_rl_plugin.rewards.weights import stored_weights

        # the weights the store records (rollouts.total_reward's), under those given explicitly
        weights = {**stored_weights(connection), **(weights or {})}
        self.engine = RewardEngine(weights)
        self.registered: list[str] = []

    def register(self, name: str, table: pa.Table) -> None:
        self.connection.register(name, table)
        self.registered.append(name)

    def __enter__(self) -> _Selection:
        try:
            return self._enter()
        except BaseException:
            self.__exit__()
            raise

    def _enter(self) -> _Selection:
        sql = "SELECT rollout_id, coalesce(group_id, task_id, rollout_id) AS group_id, task_id, input FROM rollouts" + (
            f" WHERE {self.condition}" if self.condition else ""
        )
        try:
            self.rollouts = _arrow(self.connection, sql, self.params)
        except duckdb.Error as exc:
            raise AdvantageInputError(f"bad where {self.where!r}: {str(exc).splitlines()[0]}", WHERE_HINT) from None
        #: how many rollouts the filters matched, before the failed-rollout policy
        self.n_matched = self.rollouts.num_rows
        self.rollouts, self.failed_ids, self.failed_report = split_failed(self.connection, self.rollouts, self.policy)
        self.register("_arl_adv_sel", self.rollouts)
        names = self.reward_names
        self.register("_arl_adv_names", pa.table({"name": pa.array(names or [], pa.string())}))
        name_filter = "AND name IN (SELECT name FROM _arl_adv_names)" if names else ""
        # Episode rows: the episode_rewards view (the one definition of the episode reward);
        # step rows: the same rule per (rollout, step, name), read from the rewards table.
        self.latest = _arrow(
            self.connection,
            f"""SELECT rollout_id, CAST(NULL AS INTEGER) AS step_index, name, value
                FROM episode_rewards
                WHERE rollout_id IN (SELECT rollout_id FROM _arl_adv_sel) {name_filter}
                UNION ALL
                (SELECT rollout_id, step_index, name, value
                 FROM rewards
                 WHERE rollout_id IN (SELECT rollout_id FROM _arl_adv_sel) AND step_index IS NOT NULL
                   AND value IS NOT NULL AND error IS NULL {name_filter}
                 QUALIFY row_number() OVER (PARTITION BY rollout_id, step_index, name
                                            ORDER BY created_at DESC, reward_id DESC) = 1)""",
        )
        self.register("_arl_adv_latest", self.latest)
        bad = _arrow(
            self.connection,
            "SELECT rollout_id, name, step_index, value FROM _arl_adv_latest "
            "WHERE isnan(value) OR isinf(value) ORDER BY rollout_id, name LIMIT 1",
        ).to_pylist()
        if bad:
            row = bad[0]
            where = "episode" if row["step_index"] is None else f"step {row['step_index']}"
            raise AdvantageInputError(
                f"reward {row['name']!r} of rollout {row['rollout_id']} ({where}) is {row['value']}",
                "fix or re-score that reward (agent-rl score --rescore), or leave it out with the where condition or the reward names",
            )
        if names:
            asked = set(self.latest.column("name").to_pylist())
            absent = [n for n in names if n not in asked]
            if absent:
                present = self._present_names()
                raise AdvantageInputError(
                    f"no usable reward named {', '.join(map(repr, absent))} in the selected rollouts "
                    f"(present: {', '.join(present) or 'none'})",
                    ("pick reward names among those present, or score " if present else "score ")
                    + f"them with {', '.join(absent)} first (agent-rl score --reward {absent[0]})",
                )
        weights = pa.table(
            {
                "name": pa.array(list(self.engine.weights), pa.string()),
                "weight": pa.array(list(self.engine.weights.values()), pa.float64()),
            }
        )
        self.register("_arl_adv_weights", weights)
        return self

    def _present_names(self) -> list[str]:
        """Every reward name with a usable row (episode or step) in the selected rollouts."""
        return sorted(
            _arrow(
                self.connection,
                "SELECT DISTINCT name FROM rewards WHERE rollout_id IN (SELECT rollout_id FROM _arl_adv_sel) "
                "AND value IS NOT NULL AND error IS NULL",
            )
            .column("name")
            .to_pylist()
        )

    def __exit__(self, *exc: Any) -> None:
        for name in reversed(self.registered):
            try:
                self.connection.unregister(name)
            except duckdb.Error:  # pragma: no cover - connection already closed
                pass

    def combined_episode_rewards(self) -> tuple[pa.Table, list[str]]:
        """(rollout_id, episode_reward) for rollouts with a usable episode reward, and the
        selected rollouts without one."""
        episode = self.latest.filter(pc.is_null(self.latest.column("step_index")))
        combined = self.engine.combine(episode.select(["rollout_id", "name", "value"]).to_pylist())
        if self.policy == "zero_reward":  # a failed rollout's episode reward is 0, rows or not
            combined.update(dict.fromkeys(self.failed_ids, 0.0))
        ids = [r for r, v in combined.items() if v is not None]
        table = pa.table(
            {
                "rollout_id": pa.array(ids, pa.string()),
                "episode_reward": pa.array([combined[r] for r in ids], pa.float64()),
            }
        )
        scored = set(ids)
        unscored = [r for r in self.rollouts.column("rollout_id").to_pylist() if r not in scored]
        return table, unscored


def _examples(ids: Sequence[str]) -> dict[str, Any]:
    return {"count": len(ids), "examples": list(ids[:MAX_EXAMPLES])}


def episode_rewards(
    connection: duckdb.DuckDBPyConnection,
    where: str | None = None,
    reward_names: Sequence[str] | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
) -> pa.Table:
    """One row per selected rollout with a usable episode reward: ``rollout_id``, ``group_id``,
    ``task_id``, ``reward`` (the combined episode reward), ordered by group then rollout id.
    The report lists the rollouts left out for lack of an episode reward (``unscored``) and
    what ``failed_rollouts`` did (``failed_rollouts``, see the module docstring); ``selected``
    counts the rollouts the filters matched, failed ones included.

    The selection: ``where`` AND ``rollout_ids`` AND ``rollout_run_id`` (see
    :func:`selection_sql`)."""
    with _Selection(connection, where, reward_names, weights, rollout_ids, rollout_run_id, failed_rollouts) as sel:
        combined, unscored = sel.combined_episode_rewards()
        sel.register("_arl_adv_episode", combined)
        table = _arrow(
            connection,
            """SELECT s.rollout_id, s.group_id, s.task_id, e.episode_reward AS reward
               FROM _arl_adv_sel s JOIN _arl_adv_episode e USING (rollout_id)
               ORDER BY s.group_id, s.rollout_id""",
        )
        report = {
            "selected": sel.n_matched,
            "unscored": _examples(unscored),
            "failed_rollouts": sel.failed_report,
        }
    return _with_report(table, report)


def _task_input_sql(column: str) -> str:
    """SQL for a rollout's input as a state: the runner's task dict (a JSON object whose keys
    are exactly ``TASK_PAYLOAD_FIELDS``) without its per-sample fields (``PER_SAMPLE_FIELDS``),
    as compact JSON; any other input as it is."""
    keys = ", ".join(f"'{k}'" for k in sorted(TASK_PAYLOAD_FIELDS))
    patch = json.dumps({k: None for k in PER_SAMPLE_FIELDS})
    return (
        f"CASE WHEN json_valid({column}) AND json_type({column}) = 'OBJECT' "
        f"AND list_sort(json_keys({column})) = [{keys}] "
        f"THEN CAST(json_merge_patch({column}, '{patch}') AS VARCHAR) ELSE {column} END"
    )


_ACTIONS_SQL = """
WITH s AS (
    SELECT st.rollout_id, st.step_index, st.kind, st.name, st.input, st.output, st.status, st.error,
           nullif(st.state_key, '') AS state_key
    FROM steps st
    WHERE st.rollout_id IN (SELECT rollout_id FROM _arl_adv_sel)
),
o AS (
    SELECT *,
        last_value(CASE WHEN kind = 'tool' THEN
                        CASE WHEN status = 'error' THEN 'error: ' || coalesce(error, '') ELSE coalesce(output, '') END
                   END IGNORE NULLS)
            OVER (PARTITION BY rollout_id ORDER BY step_index
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS tool_observation,
        max(CASE WHEN kind = 'llm' THEN step_index END)
            OVER (PARTITION BY rollout_id ORDER BY step_index ROWS UNBOUNDED PRECEDING) AS action_step
    FROM s
),
first_state AS (
    SELECT rollout_id, {task_input} AS input FROM _arl_adv_sel
),
credited AS (
    SELECT l.rollout_id, o.action_step, sum(l.value * coalesce(w.weight, ?)) AS reward
    FROM _arl_adv_latest l
    JOIN o ON o.rollout_id = l.rollout_id AND o.step_index = l.step_index
    LEFT JOIN _arl_adv_weights w ON w.name = l.name
    WHERE l.step_index IS NOT NULL AND o.action_step IS NOT NULL
    GROUP BY l.rollout_id, o.action_step
),
actions AS (
    SELECT o.rollout_id, sel.group_id, sel.task_id, o.step_index AS view_step_index,
           CAST(row_number() OVER (PARTITION BY o.rollout_id ORDER BY o.step_index) - 1 AS INTEGER) AS step_index,
           CAST(count(*) OVER (PARTITION BY o.rollout_id) AS INTEGER) AS n_actions,
           o.name, o.input, o.state_key AS recorded_key,
           CASE WHEN o.tool_observation IS NOT NULL THEN 'tool'
                WHEN f.input IS NOT NULL THEN 'rollout_input'
                WHEN o.input IS NOT NULL THEN 'llm_input' ELSE 'none' END AS observation_source,
           coalesce(o.tool_observation, f.input, o.input) AS observation
    FROM o JOIN _arl_adv_sel sel USING (rollout_id) JOIN first_state f USING (rollout_id)
    WHERE o.kind = 'llm'
)
SELECT a.group_id, a.rollout_id AS trajectory_id, a.step_index, a.view_step_index, a.task_id,
       a.step_index = a.n_actions - 1 AS is_last,
       coalesce(c.reward, 0.0) AS step_reward,
       a.recorded_key,
       left(md5(coalesce(a.observation, '')), {digits}) AS default_key,
       a.observation_source,
       {extra}
FROM actions a
LEFT JOIN credited c ON c.rollout_id = a.rollout_id AND c.action_step = a.view_step_index
ORDER BY a.group_id, a.rollout_id, a.step_index
"""

_UNCREDITED_SQL = """
SELECT count(*) AS n, list(DISTINCT l.rollout_id)[1:5] AS examples
FROM _arl_adv_latest l
LEFT JOIN (
    SELECT rollout_id, step_index,
           max(CASE WHEN kind = 'llm' THEN step_index END)
               OVER (PARTITION BY rollout_id ORDER BY step_index ROWS UNBOUNDED PRECEDING) AS action_step
    FROM steps WHERE rollout_id IN (SELECT rollout_id FROM _arl_adv_sel)
) o ON o.rollout_id = l.rollout_id AND o.step_index = l.step_index
WHERE l.step_index IS NOT NULL AND o.action_step IS NULL
"""


def _hook_keys(table: pa.Table, pm: pluggy.PluginManager) -> tuple[list[str], list[str]]:
    """Keys from the ``agent_rl_state_key`` hook for rows without a recorded key (one call
    per such row), and where each came from (``plugin`` or ``default``)."""
    keys: list[str] = []
    sources: list[str] = []
    columns = (
        "trajectory_id",
        "task_id",
        "group_id",
        "view_step_index",
        "step_index",
        "name",
        "input",
        "observation",
        "observation_source",
        "recorded_key",
        "default_key",
    )
    for row in table.select(list(columns)).to_pylist():
        if row["recorded_key"] is not None:
            keys.append(row["recorded_key"])
            sources.append("recorded")
            continue
        step = {
            "rollout_id": row["trajectory_id"],
            "task_id": row["task_id"],
            "group_id": row["group_id"],
            "step_index": row["view_step_index"],
            "action_index": row["step_index"],
            "name": row["name"],
            "input": row["input"],
            "observation": row["observation"],
            "observation_source": row["observation_source"],
            "state_key": None,
        }
        try:
            key = pm.hook.agent_rl_state_key(step=step)
        except Exception as exc:
            raise AdvantageInputError(
                f"a state key plugin failed on rollout {row['trajectory_id']} step {row['view_step_index']}: "
                f"{type(exc).__name__}: {exc}",
                "fix or uninstall that plugin (agent-rl plugins lists them)",
            ) from exc
        key = row["default_key"] if key is None or key == "" else str(key)
        keys.append(key)
        sources.append("default" if key == row["default_key"] else "plugin")
    return keys, sources


def steps_for_gigpo(
    connection: duckdb.DuckDBPyConnection,
    where: str | None = None,
    reward_names: Sequence[str] | None = None,
    *,
    weights: Mapping[str, float] | None = None,
    terminal_reward: bool = True,
    pm: pluggy.PluginManager | None = None,
    rollout_ids: Sequence[str] | None = None,
    rollout_run_id: str | None = None,
    failed_rollouts: FailedRollouts = DEFAULT_FAILED_ROLLOUTS,
) -> pa.Table:
    """The GiGPO steps table of the selected rollouts, ready for :func:`gigpo_advantages`.

    The selection: ``where`` AND ``rollout_ids`` AND ``rollout_run_id`` (see
    :func:`selection_sql`), then ``failed_rollouts`` (see the module docstring: ``zero_reward``
    makes a failed rollout's episode reward 0 and keeps its step rewards).

    One row per LLM step (an *action*) with ``group_id``, ``trajectory_id`` (the rollout id),
    ``step_index`` (0-based position among the rollout's actions), ``view_step_index`` (its
    ``step_index`` in the ``steps`` view), ``task_id``, ``state_key``, ``state_key_source``
    (``recorded``, ``plugin`` or ``default``), ``reward`` and, when the selection has episode
    rewards, ``episode_reward``.

    * ``state_key``: the recorded ``agent_rl.state.key``, else the ``agent_rl_state_key`` hook's
      answer (the built-in default hashes the observation, see
      :mod:`agent_rl_plugin.rl.state_keys`; computed in SQL when no other plugin implements the
      hook).
    * ``reward`` (``r_t``): the weighted sum of the step rewards credited to the action. A step
      reward on an LLM step is credited to it; one on a tool or event step to the latest LLM
      step at or before it in the rollout (the action whose tool call it scores). Step rewards
      before the rollout's first action, or on a step the rollout does not have, are not
      credited (counted in the report). With ``terminal_reward`` the rollout's combined
      episode reward is added to its last action's ``reward`` too, so the discounted returns
      carry the outcome (as the success reward of the paper's environments arrives at the
      final step).
    * ``episode_reward`` (``R``): the rollout's combined episode reward. Rollouts without one
      are left out (listed in the report) when others have one; when none has, the column is
      absent and ``R`` is the sum of the step rewards.

    Raises :class:`AdvantageInputError` for bad ``where`` SQL, a NaN or infinite reward, a
    ``reward_names`` entry with no usable row, or when the selection has no reward at all.
    """
    if pm is None:
        from agent_rl_plugin.plugins import get_plugin_manager

        pm = get_plugin_manager()
    impls = pm.hook.agent_rl_state_key.get_hookimpls() if hasattr(pm.hook, "agent_rl_state_key") else []
    use_hook = any(impl.plugin is not state_keys for impl in impls)
    default = RewardEngine(weights).default_weight
    with _Selection(connection, where, reward_names, weights, rollout_ids, rollout_run_id, failed_rollouts) as sel:
        zeroed = sel.policy == "zero_reward" and bool(sel.failed_ids)
        if sel.latest.num_rows == 0 and sel.rollouts.num_rows and not zeroed:
            n = sel.rollouts.num_rows
            if not _with_llm_steps(connection):  # scoring would not help: say what is missing first
                raise AdvantageInputError(
                    f"the {n} selected rollouts have no LLM steps (GiGPO's actions) and no usable reward",
                    LLM_STEPS_HINT,
                )
            raise AdvantageInputError(
                f"the {n} selected rollouts have no usable reward"
                + (f" named {', '.join(sel.reward_names)}" if sel.reward_names else ""),
                SCORE_HINT,
            )
        combined, unscored = sel.combined_episode_rewards()
        has_episode = combined.num_rows > 0
        sel.register("_arl_adv_episode", combined)
        extra = "a.name, a.input, a.observation" if use_hook else "NULL AS name"
        table = _arrow(
            connection,
            _ACTIONS_SQL.format(digits=state_keys.KEY_DIGITS, extra=extra, task_input=_task_input_sql("input")),
            [default],
        )
        uncredited = _arrow(connection, _UNCREDITED_SQL).to_pylist()[0]
        n_rollouts_with_actions = pc.count_distinct(table.column("trajectory_id")).as_py()
        if has_episode:
            table = _join_episode(connection, sel, table, terminal_reward)
    if use_hook:
        keys, sources = _hook_keys(table, pm)
    else:
        recorded = table.column("recorded_key")
        keys = pc.coalesce(recorded, table.column("default_key"))
        sources = pc.if_else(pc.is_null(recorded), "default", "recorded")
    out = {
        "group_id": table.column("group_id"),
        "trajectory_id": table.column("trajectory_id"),
        "step_index": table.column("step_index"),
        "view_step_index": table.column("view_step_index"),
        "task_id": table.column("task_id"),
        "state_key": pa.array(keys, pa.string()) if isinstance(keys, list) else keys,
        "state_key_source": pa.array(sources, pa.string()) if isinstance(sources, list) else sources,
        "reward": table.column("reward") if has_episode else table.column("step_reward"),
    }
    if has_episode:
        out["episode_reward"] = table.column("episode_reward")
    result = pa.table(out)
    source_counts = {s: 0 for s in ("recorded", "plugin", "default")}
    if result.num_rows:
        for item in pc.value_counts(result.column("state_key_source")).to_pylist():
            source_counts[item["values"]] = item["counts"]
    report = {
        "selected": sel.n_matched,
        "rollouts": pc.count_distinct(result.column("trajectory_id")).as_py(),
        "without_actions": sel.rollouts.num_rows - n_rollouts_with_actions,
        "unscored": _examples(unscored if has_episode else []),
        "uncredited_step_rewards": {"count": uncredited["n"], "examples": uncredited["examples"] or []},
        "state_keys": source_counts,
        "episode_reward": "combined episode rewards" if has_episode else "sum of step rewards (no episode rewards)",
        "terminal_reward": bool(terminal_reward and has_episode),
        "failed_rollouts": sel.failed_report,
    }
    return _with_report(result, report)


def _with_llm_steps(connection: duckdb.DuckDBPyConnection) -> int:
    """How many of the selected rollouts (``_arl_adv_sel``) have at least one LLM step."""
    sql = (
        "SELECT count(DISTINCT rollout_id) AS n FROM steps "
        "WHERE kind = 'llm' AND rollout_id IN (SELECT rollout_id FROM _arl_adv_sel)"
    )
    return int(_arrow(connection, sql).column("n")[0].as_py())


def _join_episode(connection: duckdb.DuckDBPyConnection, sel: _Selection, table: pa.Table, terminal: bool) -> pa.Table:
    """Keep the actions of rollouts with an episode reward; add it (and the terminal reward)."""
    sel.register("_arl_adv_actions", table)
    return _arrow(
        connection,
        f"""SELECT a.*, e.episode_reward,
                   a.step_reward + CASE WHEN {"a.is_last" if terminal else "false"} THEN e.episode_reward ELSE 0 END
                       AS reward
            FROM _arl_adv_actions a JOIN _arl_adv_episode e ON e.rollout_id = a.trajectory_id
            ORDER BY a.group_id, a.trajectory_id, a.step_index""",
    )
