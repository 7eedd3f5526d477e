"""Append-only, named schema migrations, tracked in ``_agent_rl_migrations``.

Contract (the pattern of simonw/llm's ``migrations.py``):

* :data:`MIGRATIONS` is an ordered list. A migration, once released, is never edited or
  removed: a schema change is a **new** migration appended at the end (a view change is a new
  ``CREATE OR REPLACE VIEW``). ``tests/test_store_migrations.py`` pins a hash of each one's SQL.
* :func:`migrate` applies, in order, every migration whose name is not yet in the tracking
  table, each in its own transaction together with its tracking row, and returns the names it
  applied. Running it again is a no-op. Names the code does not know (written by a newer
  version) are left alone.
* Column documentation lives in the migrations (``COMMENT ON COLUMN``), so the generated
  ``docs/schema.md`` is read from a database built by these migrations.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Sequence, Union

import duckdb

from agent_rl_plugin.store.views import AGENT_EVENT_SQL, VIEWS_V1, VIEWS_V2, VIEWS_V3, VIEWS_V4, VIEWS_V5

MIGRATIONS_TABLE = "_agent_rl_migrations"

#: The tables the migrations create, in the order they appear (views are in views.VIEW_NAMES).
TABLE_NAMES: tuple[str, ...] = (
    "spans",
    "rewards",
    "tasks",
    "labels",
    "advantages",
    "training_runs",
    "training_metrics",
    "loop_rounds",
    "reward_weights",
)

Apply = Union[str, Callable[[duckdb.DuckDBPyConnection], None]]


@dataclass(frozen=True)
class Migration:
    """One schema step: a unique ``name``, what it does, and SQL (or a function) applying it."""

    name: str
    description: str
    apply: Apply

    def run(self, connection: duckdb.DuckDBPyConnection) -> None:
        if callable(self.apply):
            self.apply(connection)
        else:
            connection.execute(self.apply)


def _comments(table: str, comments: dict[str, str]) -> str:
    return "\n".join(
        f"COMMENT ON COLUMN {table}.{column} IS '{text.replace(chr(39), chr(39) * 2)}';"
        for column, text in comments.items()
    )


_SPANS_COMMENTS = {
    "trace_id": "Trace id, 32 lower-case hex characters.",
    "span_id": "Span id, 16 lower-case hex characters.",
    "parent_span_id": "Parent span id (16 hex), NULL for a root span.",
    "name": "Span name, e.g. 'invoke_agent planner', 'chat gpt-4o', 'execute_tool search'.",
    "kind": "OTel span kind: INTERNAL, CLIENT, SERVER, PRODUCER or CONSUMER.",
    "start_time": "Start, UTC (microseconds).",
    "end_time": "End, UTC (microseconds).",
    "duration_ms": "end - start in milliseconds (from the nanosecond timestamps).",
    "status_code": "UNSET, OK or ERROR.",
    "status_message": "Status description (for errors: 'ExceptionType: message').",
    "attributes": "All span attributes as a JSON object (values as recorded; content attributes are JSON text).",
    "events": "Span events: JSON list of {name, time (ns since epoch), attributes}.",
    "links": "Span links: JSON list of {trace_id, span_id, attributes}.",
    "resource": "Resource attributes as a JSON object.",
    "scope_name": "Instrumentation scope (tracer) name.",
    "scope_version": "Instrumentation scope version.",
    "service_name": "Resource service.name.",
    "rollout_id": "Rollout (episode) id: the agent_rl.rollout.id attribute, else the trace id.",
    "task_id": "agent_rl.task.id attribute.",
    "group_id": "agent_rl.group.id attribute (GRPO/GiGPO group).",
    "is_rollout_root": "True for the span that is its rollout's root (agent_rl.rollout.root, or a parentless "
    "span with gen_ai.operation.name and no rollout id).",
    "operation": "gen_ai.operation.name attribute (chat, execute_tool, invoke_agent, ...).",
    "span_kind": "agent_rl.span.kind attribute (rollout, agent, llm, tool, event, reward).",
    "start_unix_nano": "Start in nanoseconds since the epoch (exact).",
    "end_unix_nano": "End in nanoseconds since the epoch (exact).",
    "ingested_at": "When the row was written, UTC.",
}

SPANS_SQL = f"""CREATE TABLE spans (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    name VARCHAR NOT NULL,
    kind VARCHAR,
    start_time TIMESTAMP,
    end_time TIMESTAMP,
    duration_ms DOUBLE,
    status_code VARCHAR NOT NULL,
    status_message VARCHAR,
    attributes JSON,
    events JSON,
    links JSON,
    resource JSON,
    scope_name VARCHAR,
    scope_version VARCHAR,
    service_name VARCHAR,
    rollout_id VARCHAR,
    task_id VARCHAR,
    group_id VARCHAR,
    is_rollout_root BOOLEAN NOT NULL,
    operation VARCHAR,
    span_kind VARCHAR,
    start_unix_nano BIGINT,
    end_unix_nano BIGINT,
    ingested_at TIMESTAMP
);
COMMENT ON TABLE spans IS 'Every recorded span, one row each, written by the DuckDB exporter.';
{_comments("spans", _SPANS_COMMENTS)}"""

_REWARDS_COMMENTS = {
    "reward_id": "Unique id (uuid text); for emitted rewards derived from trace, span and event position.",
    "rollout_id": "The rollout the reward scores.",
    "step_index": "0-based step it scores (see the steps view), NULL for an episode reward.",
    "name": "Reward name (gen_ai.evaluation.name, or the plugin's reward name).",
    "value": "Score (gen_ai.evaluation.score.value).",
    "label": "Optional label (gen_ai.evaluation.score.label).",
    "reason": "Explanation (gen_ai.evaluation.explanation).",
    "metrics": "JSON object of extra fields (for emitted rewards: the metadata given to emit_reward).",
    "plugin": "Reward plugin that computed it, NULL for emitted rewards.",
    "plugin_version": "That plugin's version.",
    "source": "emitted (recorded by the agent), code, llm or human.",
    "input_hash": "Hash of what the plugin scored (makes re-scoring idempotent).",
    "created_at": "When the reward was produced, UTC.",
    "error": "Set when the plugin failed; value is then NULL.",
    "trace_id": "Trace of the span that carried the reward event, if any.",
    "span_id": "Span that carried the reward event, if any.",
}

REWARDS_SQL = f"""CREATE TABLE rewards (
    reward_id VARCHAR NOT NULL,
    rollout_id VARCHAR,
    step_index INTEGER,
    name VARCHAR,
    value DOUBLE,
    label VARCHAR,
    reason VARCHAR,
    metrics JSON,
    plugin VARCHAR,
    plugin_version VARCHAR,
    source VARCHAR NOT NULL,
    input_hash VARCHAR,
    created_at TIMESTAMP NOT NULL,
    error VARCHAR,
    trace_id VARCHAR,
    span_id VARCHAR
);
COMMENT ON TABLE rewards IS 'Episode and step rewards: emitted by agents, or computed by reward plugins.';
{_comments("rewards", _REWARDS_COMMENTS)}"""

VIEWS_V1_SQL = ";\n".join(VIEWS_V1.values()) + ";"

_TASKS_COMMENTS = {
    "task_id": "Task id, as given to rollout(task_id=...).",
    "prompt": "The task's input (text or JSON text).",
    "ground_truth": "JSON: the expected answer, read by rewards such as task_completion.",
    "metadata": "JSON object of anything else (rubrics, references, budgets).",
    "imported_at": "When the row was imported or last replaced, UTC.",
}

_LABELS_COMMENTS = {
    "label_id": "Unique id of this labelling act.",
    "rollout_id": "The labelled rollout.",
    "label": "good, bad or skip.",
    "value": "1.0 for good, 0.0 for bad, NULL for skip.",
    "labeller": "Who labelled it (user name or tool).",
    "note": "Free-text comment.",
    "created_at": "When it was labelled, UTC. The latest row of a rollout is its label.",
}

TASKS_AND_LABELS_SQL = f"""CREATE TABLE tasks (
    task_id VARCHAR PRIMARY KEY,
    prompt VARCHAR,
    ground_truth JSON,
    metadata JSON,
    imported_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE tasks IS 'Tasks with ground truth, filled by `agent-rl tasks import FILE`.';
{_comments("tasks", _TASKS_COMMENTS)}
CREATE TABLE labels (
    label_id VARCHAR NOT NULL,
    rollout_id VARCHAR NOT NULL,
    label VARCHAR NOT NULL,
    value DOUBLE,
    labeller VARCHAR,
    note VARCHAR,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE labels IS 'Human labels from `agent-rl label` (append-only; the latest row per rollout counts).';
{_comments("labels", _LABELS_COMMENTS)}"""

_ADVANTAGES_COMMENTS = {
    "advantage_id": "Unique id of the row (uuid text).",
    "run_id": "One computation (agent-rl advantages compute): every row it wrote shares this id.",
    "method": "grpo, rloo, dr_grpo or gigpo.",
    "parameters": "JSON object of everything the values depend on: method settings (scale, epsilon, omega, "
    "gamma, mode, baseline, terminal_reward), --where, reward names and weights.",
    "rollout_id": "The rollout (trajectory) the advantage belongs to.",
    "group_id": "Group the advantage is relative to (the rollout's group_id, else its task_id, else the rollout).",
    "step_index": "NULL for episode-level methods (one row per rollout); for gigpo the steps view's step_index "
    "of the LLM step (action) the row belongs to.",
    "action_index": "gigpo: 0-based position of the action among the rollout's LLM steps; NULL otherwise.",
    "value": "The advantage: for gigpo episode_advantage + omega * step_advantage.",
    "episode_advantage": "gigpo: A_E, the episode return relative to its group; NULL otherwise.",
    "step_advantage": "gigpo: A_S, the step's discounted return relative to its step group (before omega).",
    "reward": "The reward the advantage was computed from: the combined episode reward (episode methods), "
    "or the episode return R (gigpo).",
    "step_return": "gigpo: the discounted return G_t = sum_k gamma^k r_(t+k) from this action.",
    "state_key": "gigpo: the state key grouping this action with others of its group.",
    "step_group_size": "gigpo: how many actions share this action's step group (1: A_S is 0).",
    "input_hash": "sha256 (first 16 hex) of the inputs (ids, keys, rewards in a canonical order): equal "
    "inputs and parameters give equal values.",
    "created_at": "When the run wrote the row, UTC.",
}

ADVANTAGES_SQL = f"""CREATE TABLE advantages (
    advantage_id VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    parameters JSON,
    rollout_id VARCHAR NOT NULL,
    group_id VARCHAR,
    step_index INTEGER,
    action_index INTEGER,
    value DOUBLE NOT NULL,
    episode_advantage DOUBLE,
    step_advantage DOUBLE,
    reward DOUBLE,
    step_return DOUBLE,
    state_key VARCHAR,
    step_group_size INTEGER,
    input_hash VARCHAR,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE advantages IS 'Advantages computed by `agent-rl advantages compute` (GRPO, RLOO, Dr. GRPO per rollout; GiGPO per action), one run_id per computation.';
{_comments("advantages", _ADVANTAGES_COMMENTS)}"""

_TRAINING_RUNS_COMMENTS = {
    "run_id": "Unique id of the training run (uuid hex).",
    "method": "Training method, e.g. kto.",
    "model": "Base model: the local directory or model name it was loaded from.",
    "output_dir": "Directory of checkpoints, logs and the adapter.",
    "adapter_path": "Where the trained LoRA adapter was saved (NULL if the run failed).",
    "config": "JSON object of the full training configuration.",
    "dataset_sql": "The --where condition or --sql query (or dataset file) that selected the training rows.",
    "n_rows": "Rows in the training dataset.",
    "started_at": "When training started, UTC.",
    "finished_at": "When training ended (or failed), UTC.",
    "status": "ok or error.",
    "error": "The error message when status is error, else NULL.",
    "final_metrics": "JSON object: the last logged value of each metric, then the trainer's run summary.",
}

_TRAINING_METRICS_COMMENTS = {
    "run_id": "The training run (training_runs.run_id).",
    "step": "Optimizer step (global_step) at which the value was logged.",
    "epoch": "Epoch (fractional) at which the value was logged.",
    "name": "Metric name as logged by the trainer (loss, learning_rate, rewards/chosen_sum, ...).",
    "value": "The logged value.",
    "logged_at": "When the row was written, UTC.",
}

TRAINING_RUNS_SQL = f"""CREATE TABLE training_runs (
    run_id VARCHAR PRIMARY KEY,
    method VARCHAR NOT NULL,
    model VARCHAR,
    output_dir VARCHAR,
    adapter_path VARCHAR,
    config JSON,
    dataset_sql VARCHAR,
    n_rows INTEGER,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL,
    error VARCHAR,
    final_metrics JSON
);
COMMENT ON TABLE training_runs IS 'One row per training run (agent-rl train kto, agent-rl demo): model, data selection, config, outcome.';
{_comments("training_runs", _TRAINING_RUNS_COMMENTS)}
CREATE TABLE training_metrics (
    run_id VARCHAR NOT NULL,
    step INTEGER,
    epoch DOUBLE,
    name VARCHAR NOT NULL,
    value DOUBLE,
    logged_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE training_metrics IS 'Metrics logged during training runs: one row per (run, step, metric name).';
{_comments("training_metrics", _TRAINING_METRICS_COMMENTS)}"""

#: The ledger of merged spool segments (see :mod:`agent_rl_plugin.store.compaction`): a segment
#: is merged in the same transaction as its row here, so a crash between the commit and the
#: deletion of its files never inserts it twice.
SEGMENT_LEDGER_TABLE = "_agent_rl_segments"
SEGMENT_LEDGER_SQL = f"""CREATE TABLE {SEGMENT_LEDGER_TABLE} (
    name VARCHAR PRIMARY KEY,
    merged_at TIMESTAMP NOT NULL,
    dropped_rows BIGINT NOT NULL DEFAULT 0
);
COMMENT ON TABLE {SEGMENT_LEDGER_TABLE} IS 'Spool segments (<db>.spool/NAME.spans.parquet) merged into this file.'"""

_LOOP_ROUNDS_COMMENTS = {
    "loop_id": "The training loop (its name, or an id derived from its settings).",
    "round": "Round number: 0 is the starting policy (evaluated, not trained); round k trained on rollouts of policy k-1.",
    "status": "done (the round finished), skipped (no rollout group had a reward difference: nothing to train), or failed.",
    "env": "The environment the loop trains on.",
    "method": "Advantage method: grpo, rloo, dr_grpo or gigpo.",
    "seed": "The loop's seed.",
    "policy_version": "The policy version after this round (the agent_rl.policy.version of the next round's LLM calls).",
    "adapter_path": "The LoRA adapter the round ends with (NULL: the base model).",
    "rollout_run_id": "run_id of the round's rollouts (rollouts.metadata run_id).",
    "advantage_run_id": "advantages.run_id of the round.",
    "training_run_id": "training_runs.run_id of the round.",
    "train_success": "Share of the round's training rollouts that reached the goal (sampled, policy k-1).",
    "heldout_success": "Share of held-out starts the policy after this round solves, acting greedily.",
    "seconds": "Wall seconds per phase (JSON: rollouts, advantages, dataset, train, reload, eval).",
    "details": "JSON: counts and training metrics of the round.",
    "created_at": "When the round was recorded (UTC).",
}

LOOP_ROUNDS_SQL = f"""CREATE TABLE loop_rounds (
    loop_id VARCHAR NOT NULL,
    round INTEGER NOT NULL,
    status VARCHAR NOT NULL,
    env VARCHAR,
    method VARCHAR,
    seed BIGINT,
    policy_version VARCHAR,
    adapter_path VARCHAR,
    rollout_run_id VARCHAR,
    advantage_run_id VARCHAR,
    training_run_id VARCHAR,
    train_success DOUBLE,
    heldout_success DOUBLE,
    seconds JSON,
    details JSON,
    created_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE loop_rounds IS 'One row per round of a closed training loop (agent-rl loop, agent-rl demo): what it trained on and how well the policy did.';
{_comments("loop_rounds", _LOOP_ROUNDS_COMMENTS)}"""

_REWARD_WEIGHTS_COMMENTS = {
    "name": "Reward name (as in rewards.name).",
    "weight": "Its weight in the combined episode reward (episode_rewards.weight, rollouts.total_reward).",
    "set_by": "What recorded it: agent-rl score (the reward's configured weight: class default, "
    "[rewards.NAME] weight, or -r NAME=W).",
    "updated_at": "When this weight was recorded, UTC.",
}

_VIEWS_V4_SQL = ";\n".join(VIEWS_V4.values())
REWARD_WEIGHTS_SQL = f"""CREATE TABLE reward_weights (
    name VARCHAR PRIMARY KEY,
    weight DOUBLE NOT NULL,
    set_by VARCHAR,
    updated_at TIMESTAMP NOT NULL
);
COMMENT ON TABLE reward_weights IS 'The weight of each reward name in the combined episode reward, recorded by agent-rl score; a name without a row counts with weight 1.';
{_comments("reward_weights", _REWARD_WEIGHTS_COMMENTS)}
COMMENT ON COLUMN rewards.source IS 'emitted (recorded by the agent), code, llm, heuristic (a rough proxy such as answer_quality or the keyword judge) or human.';
{_VIEWS_V4_SQL};"""

#: Indexes for looking up one rollout in a large store (``bench/growth.py``): without them every
#: ``WHERE rollout_id = ...`` reads the whole column (rollout ids are random, so zone maps do not
#: help), ~30 ms per million spans, and ``steps`` also reads every span's events. The third
#: indexes the expression the events view filters on, which is true for few spans.
#: DuckDB refuses ``ALTER TABLE`` on a table that has an index: a later migration that alters
#: ``spans`` or ``rewards`` drops these indexes first and creates them again after.
_VIEWS_V5_SQL = ";\n".join(VIEWS_V5.values())
LOOKUP_INDEXES_SQL = f"""CREATE INDEX spans_rollout_id_idx ON spans (rollout_id);
CREATE INDEX rewards_rollout_id_idx ON rewards (rollout_id);
CREATE INDEX spans_agent_event_idx ON spans (({AGENT_EVENT_SQL}));
{_VIEWS_V5_SQL};"""

# labels has no index, so it can be altered (DuckDB refuses ALTER TABLE on indexed tables).
LABEL_DETAILS_SQL = """ALTER TABLE labels ADD COLUMN step_index INTEGER;
ALTER TABLE labels ADD COLUMN score INTEGER;
COMMENT ON TABLE labels IS 'Human labels from `agent-rl label` and `agent-rl ui` (append-only; a rollout''s current label is its latest row with step_index NULL and label good, bad, skip or score).';
COMMENT ON COLUMN labels.label IS 'good, bad or skip (a verdict), score (a 1-5 grade) or note (a comment only).';
COMMENT ON COLUMN labels.value IS '1.0 for good, 0.0 for bad, (score - 1) / 4 for a score, NULL for skip and note.';
COMMENT ON COLUMN labels.step_index IS 'The labelled step (steps.step_index), NULL when the label is about the whole rollout.';
COMMENT ON COLUMN labels.score IS 'The 1-5 grade of a score label, else NULL.';"""

#: Every migration, oldest first. Append only.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_spans", "Table spans: one row per recorded span.", SPANS_SQL),
    Migration("0002_rewards", "Table rewards: emitted and computed rewards.", REWARDS_SQL),
    Migration(
        "0003_views_v1",
        "Views llm_calls, tool_calls, agents, events, steps, rollouts.",
        VIEWS_V1_SQL,
    ),
    Migration("0004_tasks_labels", "Tables tasks (ground truth) and labels (human labels).", TASKS_AND_LABELS_SQL),
    Migration(
        "0005_advantages", "Table advantages: GRPO, RLOO, Dr. GRPO and GiGPO advantages per run.", ADVANTAGES_SQL
    ),
    Migration(
        "0006_rollouts_v2",
        "View rollouts without the IN filter that made DuckDB 2.0 hang on LIMIT over large stores.",
        ";\n".join(VIEWS_V2.values()) + ";",
    ),
    Migration(
        "0007_training_runs",
        "Tables training_runs and training_metrics: training runs and their logged metrics.",
        TRAINING_RUNS_SQL,
    ),
    Migration(
        "0008_segment_ledger", "Table _agent_rl_segments: the spool segments merged into this file.", SEGMENT_LEDGER_SQL
    ),
    Migration(
        "0009_episode_rewards",
        "View episode_rewards (the one definition of the episode reward); rollouts.total_reward reads it.",
        ";\n".join(VIEWS_V3.values()) + ";",
    ),
    Migration("0010_loop_rounds", "Table loop_rounds: the rounds of closed training loops.", LOOP_ROUNDS_SQL),
    Migration(
        "0011_reward_weights",
        "Table reward_weights; episode_rewards.weight and rollouts.total_reward weighted by it.",
        REWARD_WEIGHTS_SQL,
    ),
    Migration(
        "0012_lookup_indexes",
        "Indexes on spans.rollout_id, rewards.rollout_id and spans holding agent_rl.event events; views rollouts "
        "and events written so that one rollout's lookups use them (the same rows).",
        LOOKUP_INDEXES_SQL,
    ),
    Migration(
        "0013_label_details",
        "Columns labels.step_index (a label about one step) and labels.score (a 1-5 grade), for `agent-rl ui`.",
        LABEL_DETAILS_SQL,
    ),
)

_lock = threading.Lock()


def list_migrations() -> list[str]:
    """Names of all known migrations, in the order they apply."""
    return [m.name for m in MIGRATIONS]


def _ensure_table(connection: duckdb.DuckDBPyConnection) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )


def applied_migrations(connection: duckdb.DuckDBPyConnection) -> list[str]:
    """Names recorded in the tracking table, in the order they were applied ([] if none)."""
    exists = connection.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = current_database()",
        [MIGRATIONS_TABLE],
    ).fetchone()
    if not exists or not exists[0]:
        return []
    rows = connection.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY applied_at, name").fetchall()
    return [row[0] for row in rows]


def pending_migrations(
    connection: duckdb.DuckDBPyConnection, migrations: Sequence[Migration] = MIGRATIONS
) -> list[str]:
    """Names of ``migrations`` not yet applied to the database behind ``connection``."""
    done = set(applied_migrations(connection))
    return [m.name for m in migrations if m.name not in done]


def migrate(connection: duckdb.DuckDBPyConnection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the missing ``migrations`` in order; returns the names applied (empty: up to date).

    Each migration runs in a transaction with its tracking row; a failing one is rolled back and
    its exception propagates (earlier ones stay applied). Pass a prefix of :data:`MIGRATIONS` to
    build an older schema (tests do, to check upgrades).
    """
    applied: list[str] = []
    with _lock:  # two connections of one process to the same file must not race
        _ensure_table(connection)
        done = set(applied_migrations(connection))
        for migration in migrations:
            if migration.name in done:
                continue
            connection.execute("BEGIN TRANSACTION")
            try:
                migration.run(connection)
                connection.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, timezone('UTC', now()))",
                    [migration.name],
                )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            applied.append(migration.name)
    return applied
