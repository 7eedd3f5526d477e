"""Capture health: which recorded traces are unfit for training, and the one-line fix for each.

:func:`check_traces` runs every check of :data:`CHECKS` on a store and returns a
:class:`HealthReport`; ``agent-rl doctor`` prints it and the HTML report shows it.

Contract:

* Every check is SQL over the store's views and ``spans``, one query per family of checks
  (rollouts, LLM calls, groups, spans); no Python runs per row, except the tokenizer checks
  (``tokenizer=``, :mod:`agent_rl_plugin.data.health_tokens`), which decode and encode at most
  ``max_token_checks`` LLM calls; a call they cannot judge (ids the tokenizer cannot decode) is a
  finding (``out_of_vocab``, ``token_ids_mismatch``), never an exception.
* Each :class:`Finding` has a ``code`` of :data:`CHECKS`, its ``severity`` (``error``: the
  rows cannot be trained on as they are; ``warning``: they can, but the result is weaker or
  wrong in part; ``info``: worth knowing), how many rows it concerns out of how many were
  checked, up to :data:`MAX_EXAMPLES` example ids (rollout, span or group ids, sorted), a
  message and a one-line fix. One finding has ``agent=None`` (the whole selection); one more per
  agent that has such rows (rows whose agent is unknown only count in the overall finding).
  Checks that find nothing give no finding.
* The agent of a rollout is ``rollouts.agent_name``; of an LLM call its own ``gen_ai.agent.name``
  (else ``gen_ai.agent.id``), else its parent agent span's name, else its rollout's agent.
* ``where`` (an SQL condition over the ``rollouts`` view, checked to only read the store)
  limits the rollout, LLM call and group checks to the rollouts it selects; the store-wide
  span checks (``open_rollouts``, ``orphan_spans``, ``no_rollout_id``) are then skipped,
  since such spans are not in the ``rollouts`` view (:attr:`HealthReport.skipped` says so).
* Rollouts that did not end ``ok`` (raised, timed out, cancelled) count in ``failed_rollouts``
  only, not in ``no_llm_calls`` / ``no_reward``: datasets leave them out by default.
* Reading never changes the store. A bad ``where`` or a tokenizer that cannot be loaded raise
  :class:`~agent_rl_plugin.data.report.DatasetError`; a store that cannot be opened raises the
  store's error (both are :class:`~agent_rl_plugin.errors.AgentRLError`).
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, Sequence

import duckdb

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data.health_tokens import TOKEN_CODES, agent_of_sql, load_tokenizer_arg, token_flags
from agent_rl_plugin.data.report import DatasetError
from agent_rl_plugin.data.sql import arrow, attr, open_store, registered, select_rollouts
from agent_rl_plugin.store.views import AGENT_CONDITION, LLM_CONDITION

__all__ = [
    "CHECKS",
    "MAX_EXAMPLES",
    "Check",
    "Finding",
    "HealthReport",
    "Severity",
    "check_traces",
]

Severity = Literal["error", "warning", "info"]
#: Example ids kept per finding.
MAX_EXAMPLES = 3
#: LLM calls with stored token ids that the tokenizer checks encode by default (oldest first).
MAX_TOKEN_CHECKS = 2000


@dataclass(frozen=True)
class Check:
    """One check: its ``code``, ``severity``, what a row it counts is (``unit``, plural), what
    is wrong with such a row (``title``, a predicate: "N of M {unit} {title}") and the ``fix`` (``{db}`` is replaced by `` --db PATH`` when the path is known)."""

    code: str
    severity: Severity
    unit: str
    title: str
    fix: str


#: Every check, in the order findings are listed (most severe first within each family).
CHECKS: tuple[Check, ...] = (
    Check(
        "no_rollouts",
        "error",
        "rollouts",
        "the store holds no finished rollout",
        "wrap each episode in `with arl.rollout(task_id=..., group_id=...):` and call arl.flush() before exit",
    ),
    Check(
        "no_llm_calls",
        "error",
        "rollouts",
        "ended ok but have no LLM call (nothing to train on)",
        'capture the client: arl.configure(instrument_clients="auto"), or call arl.record_llm_call(...)',
    ),
    Check(
        "no_reward",
        "error",
        "rollouts",
        "ended ok but have no episode reward",
        "score them: agent-rl score{db}, or call arl.emit_reward(value) inside the rollout",
    ),
    Check(
        "llm_no_input",
        "error",
        "LLM calls",
        "have no input messages",
        "keep arl.configure(capture_content=True) and pass input_messages= to record_llm_call",
    ),
    Check(
        "llm_no_output",
        "error",
        "LLM calls",
        "succeeded but have no output messages",
        "keep arl.configure(capture_content=True) and pass output= to record_llm_call",
    ),
    Check(
        "llm_truncated",
        "error",
        "LLM calls",
        "have messages cut at the attribute size limit",
        "raise the limit: arl.configure(max_attribute_size=262144) (default 32768 characters)",
    ),
    Check(
        "out_of_vocab",
        "error",
        "LLM calls",
        "have stored token ids outside this tokenizer's vocabulary (negative or >= its length)",
        "give the tokenizer of the model that generated them (--tokenizer); the trainer re-tokenises these calls",
    ),
    Check(
        "token_ids_mismatch",
        "error",
        "LLM calls",
        "have stored completion ids that do not decode to the recorded output with this tokenizer",
        "give the tokenizer of the model that generated them (--tokenizer), or record the ids of the same call",
    ),
    Check(
        "llm_incomplete",
        "warning",
        "LLM calls",
        "are streamed answers the agent stopped reading early (cut text; step datasets leave them out)",
        "read each stream to its end (or record the call after the last chunk) so the full answer is stored",
    ),
    Check(
        "retokenization_differs",
        "warning",
        "LLM calls",
        "have an output that re-tokenises to other ids than the stored (sampled) ones",
        "train from the stored ids (agent_rl.token_ids), not from re-tokenised text",
    ),
    Check(
        "prompt_ids_mismatch",
        "warning",
        "LLM calls",
        "have stored prompt ids that differ from the tokenizer's chat template of their input messages",
        "train with the chat template the server used, or from the stored prompt ids",
    ),
    Check(
        "singleton_groups",
        "warning",
        "groups",
        "have a single rollout (GRPO needs at least 2 to compare)",
        "run several rollouts per task under one group_id: agent-rl rollouts run ... --group-size 4",
    ),
    Check(
        "open_rollouts",
        "warning",
        "rollouts",
        "never ended: their root span is not stored (still running, or the process died)",
        "end every rollout (`with arl.rollout(...):`) and call arl.flush() or arl.shutdown() before exit",
    ),
    Check(
        "orphan_spans",
        "warning",
        "spans",
        "point to a parent span that is not in the store",
        "end parent spans before the process exits, and flush: arl.flush()",
    ),
    Check(
        "no_rollout_id",
        "warning",
        "spans",
        "were recorded outside any rollout",
        "make the calls inside `with arl.rollout(...):` (or a traced agent) so they carry a rollout id",
    ),
    Check(
        "failed_rollouts",
        "info",
        "rollouts",
        "raised, timed out or were cancelled (datasets leave them out by default)",
        "see why: agent-rl traces list{db} --status error (or --status cancelled)",
    ),
    Check(
        "no_token_ids",
        "info",
        "LLM calls",
        "have no stored token ids (training re-tokenises their text)",
        "ask a vLLM/SGLang server for them (logprobs=True, extra_body={'return_token_ids': True}); "
        "record_llm_call takes token_ids= and logprobs=",
    ),
)
_BY_CODE: dict[str, Check] = {check.code: check for check in CHECKS}
_SPAN_CODES = ("open_rollouts", "orphan_spans", "no_rollout_id")


@dataclass(frozen=True)
class Finding:
    """``count`` of ``total`` rows (of the check's unit) are affected; ``agent`` is ``None`` for
    the whole selection. ``examples``: up to :data:`MAX_EXAMPLES` ids of affected rows."""

    code: str
    severity: Severity
    count: int
    total: int
    agent: str | None
    examples: list[str]
    message: str
    fix: str


@dataclass
class HealthReport:
    """What :func:`check_traces` found. ``findings`` lists the overall finding of each check
    first (in :data:`CHECKS` order), then the per-agent ones (by agent name)."""

    database: str
    where: str | None
    rollouts: int = 0
    llm_calls: int = 0
    spans: int = 0
    token_checks: int = 0
    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def overall(self) -> list[Finding]:
        """The findings over the whole selection (``agent is None``), one per check that found rows."""
        return [f for f in self.findings if f.agent is None]

    def by_agent(self, code: str) -> dict[str, Finding]:
        """The per-agent findings of ``code``, by agent."""
        return {f.agent: f for f in self.findings if f.code == code and f.agent is not None}

    def get(self, code: str) -> Finding | None:
        """The overall finding of ``code``, ``None`` when that check found nothing (or did not run)."""
        return next((f for f in self.findings if f.code == code and f.agent is None), None)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.overall() if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.overall() if f.severity == "warning"]

    @property
    def healthy(self) -> bool:
        """True when no check found errors or warnings (info findings may remain)."""
        return not self.errors and not self.warnings

    @property
    def exit_code(self) -> int:
        """``agent-rl doctor``'s exit code: 1 with any error finding, else 0."""
        return 1 if self.errors else 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["healthy"] = self.healthy
        data["exit_code"] = self.exit_code
        return data


# --- SQL pieces -------------------------------------------------------------------------------------


def _marker_regex() -> str:
    """RE2 pattern of :data:`~agent_rl_plugin.semconv.TRUNCATION_MARKER` (any original size)."""
    prefix, _, suffix = sc.TRUNCATION_MARKER.partition("{original}")

    def escape(text: str) -> str:
        return "".join(ch if ch.isalnum() or ch == " " else "\\" + ch for ch in text)

    return escape(prefix) + "[0-9]+" + escape(suffix)


_MARKER_RE = _marker_regex()
#: The marker's fixed start (a cheap ``contains`` before the regular expression).
_MARKER_HEAD = sc.TRUNCATION_MARKER.partition("{original}")[0].replace("'", "''")
_EMPTY = "(({x}) IS NULL OR trim({x}) IN ('', '[]', 'null', '\"\"'))"


_agent_of = agent_of_sql

_AGENT_SPAN_NAME = f"coalesce({attr(sc.GEN_AI_AGENT_NAME)}, regexp_replace(name, '^{sc.OP_INVOKE_AGENT} ', ''))"


def _tally(source: str, flags: Sequence[str], id_column: str = "id") -> str:
    """Per agent and overall (``GROUPING SETS``): how many rows of ``source`` (columns ``agent``,
    ``id_column`` and one boolean per flag) there are, and for each flag how many are set and
    the first example ids."""
    parts = ["count(*) AS total, GROUPING(agent) AS overall"]
    for flag in flags:
        parts.append(f"count(*) FILTER (WHERE {flag}) AS n_{flag}")
        parts.append(f"list({id_column} ORDER BY {id_column}) FILTER (WHERE {flag})[1:{MAX_EXAMPLES}] AS ex_{flag}")
    return f"SELECT agent, {', '.join(parts)} FROM ({source}) AS _t GROUP BY GROUPING SETS ((agent), ())"


class _Collector:
    def __init__(self, report: HealthReport, db_flag: str) -> None:
        self.report = report
        self.db_flag = db_flag
        self.found: list[Finding] = []

    def add(self, code: str, count: int, total: int, agent: str | None, examples: Sequence[Any]) -> None:
        if count <= 0:
            return
        check = _BY_CODE[code]
        who = "" if agent is None else f" of agent {agent}"
        message = check.title if code == "no_rollouts" else f"{count:,} of {total:,} {check.unit}{who} {check.title}"
        fix = check.fix.replace("{db}", self.db_flag)
        self.found.append(
            Finding(code, check.severity, int(count), int(total), agent, [str(e) for e in examples], message, fix)
        )

    def tally(self, connection: duckdb.DuckDBPyConnection, source: str, codes: Mapping[str, str]) -> None:
        """Run :func:`_tally` over ``source`` for ``codes`` ({code: flag column}) and add the findings."""
        for code in codes:
            self.report.checked.append(code)
        for row in arrow(connection, _tally(source, list(codes.values()))).to_pylist():
            agent = None if row["overall"] else row["agent"]
            if not row["overall"] and agent is None:
                continue  # agent unknown: counted in the overall finding only
            for code, flag in codes.items():
                self.add(code, row[f"n_{flag}"], row["total"], agent, row[f"ex_{flag}"] or [])


# --- the checks -------------------------------------------------------------------------------------


def _rollout_checks(connection: duckdb.DuckDBPyConnection, rollouts: str, found: _Collector) -> None:
    source = (
        f"SELECT rollout_id AS id, agent_name AS agent, status <> 'ok' AS failed, "
        f"status = 'ok' AND n_llm_calls = 0 AS no_llm, "
        f"status = 'ok' AND rollout_id NOT IN (SELECT rollout_id FROM episode_rewards) AS no_reward FROM {rollouts}"
    )
    found.tally(connection, source, {"no_llm_calls": "no_llm", "no_reward": "no_reward", "failed_rollouts": "failed"})
    groups = (
        f"SELECT coalesce(group_id, task_id, rollout_id) AS id, min(agent_name) AS agent, count(*) = 1 AS single "
        f"FROM {rollouts} GROUP BY 1"
    )
    found.tally(connection, groups, {"singleton_groups": "single"})


def _llm_source(rollouts: str) -> str:
    """One row per LLM call of the selected rollouts: its agent and its defect flags."""
    ins, outs = attr(sc.GEN_AI_INPUT_MESSAGES), attr(sc.GEN_AI_OUTPUT_MESSAGES)
    return f"""
        WITH llm AS (
            SELECT trace_id, span_id, parent_span_id, rollout_id, status_code, {_agent_of()} AS own_agent,
                   {ins} AS ins, {outs} AS outs, {attr(sc.TOKEN_IDS)} AS token_ids,
                   {attr(sc.LLM_INCOMPLETE)} AS incomplete
            FROM spans
            WHERE {LLM_CONDITION} AND rollout_id IN (SELECT rollout_id FROM {rollouts})
        ),
        agent_spans AS (
            SELECT trace_id, span_id, {_AGENT_SPAN_NAME} AS agent_name FROM spans WHERE {AGENT_CONDITION}
        )
        SELECT l.span_id AS id,
               coalesce(l.own_agent, a.agent_name, r.agent_name) AS agent,
               {_EMPTY.format(x="l.ins")} AS no_input,
               l.status_code <> 'ERROR' AND {_EMPTY.format(x="l.outs")} AS no_output,
               coalesce((contains(l.ins, '{_MARKER_HEAD}') AND regexp_matches(l.ins, '{_MARKER_RE}'))
                        OR (contains(l.outs, '{_MARKER_HEAD}') AND regexp_matches(l.outs, '{_MARKER_RE}')), false)
                   AS truncated,
               l.token_ids IS NULL AS no_ids,
               coalesce(lower(l.incomplete) = 'true', false) AS incomplete
        FROM llm l
        LEFT JOIN agent_spans a ON a.trace_id = l.trace_id AND a.span_id = l.parent_span_id
        LEFT JOIN {rollouts} r ON r.rollout_id = l.rollout_id"""


def _llm_checks(connection: duckdb.DuckDBPyConnection, rollouts: str, found: _Collector) -> None:
    codes = {
        "llm_no_input": "no_input",
        "llm_no_output": "no_output",
        "llm_truncated": "truncated",
        "llm_incomplete": "incomplete",
        "no_token_ids": "no_ids",
    }
    found.tally(connection, _llm_source(rollouts), codes)


def _span_checks(connection: duckdb.DuckDBPyConnection, found: _Collector) -> None:
    """Open rollouts (spans carry a rollout id that no stored root has), spans outside any
    rollout (no rollout id and no root in their trace), and spans of a finished rollout whose
    parent span id is not stored. One pass over ``spans``; both tallies read its result."""
    facts = arrow(
        connection,
        f"""
        WITH rooted AS (SELECT DISTINCT rollout_id FROM spans WHERE is_rollout_root)
        SELECT sp.span_id, sp.rollout_id, {_agent_of("sp.attributes")} AS agent,
               sp.is_rollout_root, {attr(sc.ROLLOUT_ID, "sp.attributes")} IS NOT NULL AS has_rid,
               r.rollout_id IS NOT NULL AS is_rooted,
               sp.parent_span_id IS NOT NULL AND p.span_id IS NULL AS dangling
        FROM spans sp
        LEFT JOIN rooted r ON r.rollout_id = sp.rollout_id
        LEFT JOIN (SELECT trace_id, span_id FROM spans) p ON p.trace_id = sp.trace_id AND p.span_id = sp.parent_span_id""",
    )
    with registered(connection, facts, "health_spans") as s:
        per_span = (
            f"SELECT span_id AS id, agent, is_rooted AND NOT is_rollout_root AND dangling AS orphan, "
            f"NOT is_rooted AND NOT has_rid AS outside FROM {s}"
        )
        found.tally(connection, per_span, {"orphan_spans": "orphan", "no_rollout_id": "outside"})
        open_rollouts = (
            f"SELECT rollout_id AS id, min(agent) AS agent, bool_or(NOT is_rooted AND has_rid) AS open "
            f"FROM {s} WHERE is_rooted OR has_rid GROUP BY rollout_id"
        )
        found.tally(connection, open_rollouts, {"open_rollouts": "open"})


# --- tokenizer checks (agent_rl_plugin.data.health_tokens) ----------------------------------------


def _token_checks(
    connection: duckdb.DuckDBPyConnection, rollouts: str, tokenizer: Any, limit: int | None, found: _Collector
) -> int:
    """Run :func:`~agent_rl_plugin.data.health_tokens.token_flags` and add its findings."""
    for code in TOKEN_CODES:
        found.report.checked.append(code)
    judged, flags = token_flags(connection, rollouts, tokenizer, limit)
    for code, items in flags.items():
        _add_python_tally(found, code, items)
    return judged


def _add_python_tally(found: _Collector, code: str, items: Sequence[tuple[str | None, str, bool]]) -> None:
    """The tally of :func:`_tally` for rows judged in Python: ``(agent, id, flagged)``."""
    groups: dict[str | None, list[tuple[str, bool]]] = {None: []}
    for agent, item_id, flagged in items:
        groups[None].append((item_id, flagged))
        if agent is not None:
            groups.setdefault(agent, []).append((item_id, flagged))
    for agent, rows in groups.items():
        bad = sorted(item_id for item_id, flagged in rows if flagged)
        found.add(code, len(bad), len(rows), agent, bad[:MAX_EXAMPLES])


# --- entry point ------------------------------------------------------------------------------------


def check_traces(
    db_or_connection: Any,
    *,
    tokenizer: Any = None,
    where: str | None = None,
    max_token_checks: int | None = MAX_TOKEN_CHECKS,
) -> HealthReport:
    """Check a store's traces for what makes them unfit for training (see the module docstring).

    ``db_or_connection``: a store path or an open DuckDB connection (left open). ``tokenizer``:
    a path (``AutoTokenizer.from_pretrained``) or a tokenizer object; with it the stored token
    ids of up to ``max_token_checks`` LLM calls (``None``: all) are compared with it. ``where``:
    an SQL condition over the ``rollouts`` view. Raises
    :class:`~agent_rl_plugin.data.report.DatasetError` for a bad ``where``, a ``where`` that
    matches nothing, or a tokenizer that cannot be loaded; a store that cannot be opened raises
    the store's error.
    """
    started = time.perf_counter()
    if isinstance(db_or_connection, duckdb.DuckDBPyConnection):
        database, db_flag = "(connection)", ""
    else:
        database = os.path.abspath(os.fspath(db_or_connection))
        db_flag = f" --db {shlex.quote(os.fspath(db_or_connection))}"
    if max_token_checks is not None and (isinstance(max_token_checks, bool) or int(max_token_checks) < 0):
        raise DatasetError(f"max_token_checks must be >= 0 or None, got {max_token_checks!r}")
    loaded = load_tokenizer_arg(tokenizer) if tokenizer is not None else None
    report = HealthReport(database=database, where=where)
    found = _Collector(report, db_flag)
    with open_store(db_or_connection) as connection:
        condition = ""
        if where is not None:
            selection = select_rollouts(connection, where=where)
            with registered(connection, selection.select(["rollout_id"]), "health_sel") as sel:
                condition = f" WHERE rollout_id IN (SELECT rollout_id FROM {sel})"
                table = arrow(connection, _ROLLOUTS_SQL + condition)
        else:
            table = arrow(connection, _ROLLOUTS_SQL)
        report.rollouts = table.num_rows
        with registered(connection, table, "health_rollouts") as rollouts:
            in_selection = f"rollout_id IN (SELECT rollout_id FROM {rollouts})"
            report.llm_calls = _count(
                connection, f"SELECT count(*) FROM spans WHERE {LLM_CONDITION} AND {in_selection}"
            )
            if where is None:
                report.spans = _count(connection, "SELECT count(*) FROM spans")
                report.checked.append("no_rollouts")
                if report.rollouts == 0:
                    found.add("no_rollouts", 1, 1, None, [])
            else:
                report.spans = _count(connection, f"SELECT count(*) FROM spans WHERE {in_selection}")
            if report.rollouts:
                _rollout_checks(connection, rollouts, found)
                _llm_checks(connection, rollouts, found)
            if where is None:
                _span_checks(connection, found)
            else:
                for code in _SPAN_CODES:
                    report.skipped[code] = "store-wide check, skipped with where (such spans have no rollouts row)"
            if loaded is not None:
                report.token_checks = _token_checks(connection, rollouts, loaded, max_token_checks, found)
            else:
                for code in TOKEN_CODES:
                    report.skipped[code] = "needs a tokenizer"
    order = {check.code: i for i, check in enumerate(CHECKS)}
    found.found.sort(key=lambda f: (f.agent is not None, f.agent or "", order[f.code]))
    report.findings = found.found
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _count(connection: duckdb.DuckDBPyConnection, sql: str) -> int:
    return int(arrow(connection, sql).column(0)[0].as_py())


_ROLLOUTS_SQL = "SELECT rollout_id, agent_name, group_id, task_id, status, n_llm_calls FROM rollouts"
