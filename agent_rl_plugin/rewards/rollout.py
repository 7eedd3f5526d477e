"""The rollout read model that reward plugins score, built from the store's SQL views.

:func:`load_rollouts` reads the selected rows of ``rollouts`` with their ``steps`` (LLM turns,
tool calls with arguments, results and errors, coordination events), token usage, the task's
ground truth (from the rollout's metadata, else the ``tasks`` table), the latest human label and
the rewards the agent emitted, in a fixed number of queries whatever the number of rollouts.

JSON content recorded by the instrumentation (arguments, results, messages, outputs) is parsed;
a value that was cut at ``max_attribute_size`` is kept as its text.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Sequence

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from agent_rl_plugin import semconv as sc
from agent_rl_plugin.rewards.labels import CURRENT_LABEL_ROWS

if TYPE_CHECKING:  # a recording agent registers the built-in rewards without DuckDB
    import duckdb


def parse_json(value: Any) -> Any:
    """``json.loads(value)`` for JSON text; anything else (or invalid JSON) unchanged."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def text_of(value: Any) -> str | None:
    """A value as text: strings stay, message lists give their last content, others JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        content = value[-1].get("content")
        return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return json.dumps(value, ensure_ascii=False, default=str)


class Step(BaseModel):
    """One step of a rollout: an LLM turn, a tool call or a coordination event.

    ``index`` is the ``step_index`` of the ``steps`` view (0-based, time order): the index a
    :class:`~agent_rl_plugin.rewards.result.StepOutput` refers to.
    """

    model_config = ConfigDict(frozen=True)

    index: int
    kind: Literal["llm", "tool", "event"]
    name: str | None = Field(None, description="Model (llm), tool name (tool) or event type (event).")
    input: Any = Field(None, description="LLM input messages, tool arguments, or event data.")
    output: Any = Field(None, description="LLM output messages, tool result, or event fields.")
    status: str = "ok"
    error: str | None = None
    start_time: datetime | None = None
    duration_ms: float | None = None
    state_key: str | None = None
    span_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning: str | None = None

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    # tool steps
    @property
    def arguments(self) -> Any:
        return self.input if self.kind == "tool" else None

    @property
    def result(self) -> Any:
        return self.output if self.kind == "tool" else None

    # event steps
    def _event_field(self, key: str) -> Any:
        return self.output.get(key) if self.kind == "event" and isinstance(self.output, dict) else None

    @property
    def event_type(self) -> str | None:
        return self.name if self.kind == "event" else None

    @property
    def agent_id(self) -> str | None:
        return self._event_field("agent_id")

    @property
    def target(self) -> str | None:
        return self._event_field("target")

    @property
    def reason(self) -> str | None:
        return self._event_field("reason")

    @property
    def content(self) -> str | None:
        return self._event_field("content")

    @property
    def round(self) -> int | None:
        value = self._event_field("round")
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None


class Rollout(BaseModel):
    """Everything a reward may look at about one rollout."""

    model_config = ConfigDict(frozen=True)

    rollout_id: str
    task_id: str | None = None
    group_id: str | None = None
    name: str | None = None
    agent_name: str | None = None
    status: str = "ok"
    error: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    duration_ms: float | None = None
    input: Any = Field(None, description="The agent's arguments (parsed JSON).")
    output: Any = Field(None, description="The agent's return value or streamed text (parsed).")
    final_output: str | None = Field(None, description="The final answer as text.")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="The conversation.")
    steps: list[Step] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)
    ground_truth: Any = None
    task_prompt: str | None = None
    task_metadata: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(None, description="Latest human label: good, bad or skip.")
    label_value: float | None = None
    emitted_rewards: dict[str, float] = Field(
        default_factory=dict, description="Rewards the agent emitted (episode level), by name."
    )

    @property
    def tool_calls(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "tool"]

    @property
    def llm_calls(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "llm"]

    @property
    def events(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "event"]

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def prompt(self) -> str | None:
        """The task's prompt, else the first user message, else the input as text."""
        if self.task_prompt:
            return self.task_prompt
        for message in self.messages:
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
        return text_of(self.input)

    def content_hash(self, include_labels: bool = True) -> str:
        """sha256 of everything a reward can see: equal hashes mean equal inputs.

        ``include_labels=False`` leaves out the human label, for rewards that do not read it
        (labelling a rollout then does not make them score it again).
        """
        exclude = None if include_labels else {"label", "label_value"}
        return hashlib.sha256(self.model_dump_json(exclude=exclude).encode()).hexdigest()


_ROLLOUT_COLUMNS = (
    "rollout_id, task_id, group_id, name, agent_name, status, error, start_time, end_time, "
    "duration_ms, input, output, metadata, input_tokens, output_tokens"
)


def load_rollouts(
    connection: duckdb.DuckDBPyConnection,
    *,
    where: str | None = None,
    rollout_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Rollout]:
    """The rollouts matching ``where`` (SQL over the ``rollouts`` view's columns) and/or
    ``rollout_ids``, oldest first, as :class:`Rollout` objects.

    ``where`` is the user's SQL; a bad one raises ``duckdb.Error`` from DuckDB.
    """
    conditions = []
    if where:
        conditions.append(f"({where})")
    if rollout_ids is not None:
        connection.register("_arl_wanted_ids", pa.table({"rollout_id": pa.array(list(rollout_ids), pa.string())}))
        conditions.append("rollout_id IN (SELECT rollout_id FROM _arl_wanted_ids)")
    sql = f"SELECT {_ROLLOUT_COLUMNS} FROM rollouts"
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    sql += " ORDER BY start_time, rollout_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    try:
        relation = connection.sql(sql)
        selected = (getattr(relation, "to_arrow_table", None) or relation.arrow)()  # duckdb 2 / 1.x
    finally:
        if rollout_ids is not None:
            connection.unregister("_arl_wanted_ids")
    if selected.num_rows == 0:
        return []
    connection.register("_arl_selected", selected)
    try:
        steps = _load_steps(connection)
        tasks = _load_tasks(connection)
        labels = _load_labels(connection)
        emitted = _load_emitted(connection)
    finally:
        connection.unregister("_arl_selected")
    return [_build(row, steps.get(row["rollout_id"], []), tasks, labels, emitted) for row in selected.to_pylist()]


def _rows(connection: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    result = connection.execute(sql)
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row)) for row in result.fetchall()]


def _load_steps(connection: duckdb.DuckDBPyConnection) -> dict[str, list[Step]]:
    rows = _rows(
        connection,
        """
        SELECT s.rollout_id, s.step_index, s.kind, s.name, s.input, s.output, s.status, s.error,
               s.start_time, s.duration_ms, s.state_key, s.span_id,
               l.input_tokens, l.output_tokens, l.reasoning
        FROM steps s
        LEFT JOIN llm_calls l ON s.kind = 'llm' AND l.span_id = s.span_id AND l.rollout_id = s.rollout_id
        WHERE s.rollout_id IN (SELECT rollout_id FROM _arl_selected)
        ORDER BY s.rollout_id, s.step_index
        """,
    )
    by_rollout: dict[str, list[Step]] = {}
    for row in rows:
        by_rollout.setdefault(row["rollout_id"], []).append(
            Step(
                index=row["step_index"],
                kind=row["kind"],
                name=row["name"],
                input=parse_json(row["input"]),
                output=parse_json(row["output"]),
                status=row["status"] or "ok",
                error=row["error"],
                start_time=row["start_time"],
                duration_ms=row["duration_ms"],
                state_key=row["state_key"],
                span_id=row["span_id"],
                input_tokens=row["input_tokens"],
                output_tokens=row["output_tokens"],
                reasoning=row["reasoning"],
            )
        )
    return by_rollout


def _load_tasks(connection: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    rows = _rows(
        connection,
        "SELECT task_id, prompt, ground_truth, metadata FROM tasks "
        "WHERE task_id IN (SELECT task_id FROM _arl_selected)",
    )
    return {row["task_id"]: row for row in rows}


def _load_labels(connection: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, float | None]]:
    rows = _rows(
        connection,
        "SELECT rollout_id, arg_max(label, created_at) AS label, arg_max(value, created_at) AS value "
        f"FROM labels WHERE {CURRENT_LABEL_ROWS} AND rollout_id IN (SELECT rollout_id FROM _arl_selected) "
        "GROUP BY rollout_id",
    )
    return {row["rollout_id"]: (row["label"], row["value"]) for row in rows}


def _load_emitted(connection: duckdb.DuckDBPyConnection) -> dict[str, dict[str, float]]:
    rows = _rows(
        connection,
        # The episode_rewards view's rule: of repeated emissions of one name the latest counts.
        "SELECT rollout_id, name, value FROM episode_rewards "
        "WHERE source = 'emitted' AND rollout_id IN (SELECT rollout_id FROM _arl_selected)",
    )
    emitted: dict[str, dict[str, float]] = {}
    for row in rows:
        emitted.setdefault(row["rollout_id"], {})[row["name"]] = row["value"]
    return emitted


def _build(
    row: dict[str, Any],
    steps: list[Step],
    tasks: dict[str, dict[str, Any]],
    labels: dict[str, tuple[str, float | None]],
    emitted: dict[str, dict[str, float]],
) -> Rollout:
    metadata = parse_json(row["metadata"])
    metadata = metadata if isinstance(metadata, dict) else {}
    task = tasks.get(row["task_id"]) if row["task_id"] is not None else None
    task_metadata = parse_json(task["metadata"]) if task else None
    ground_truth = metadata.get("ground_truth")
    if ground_truth is None and task is not None:
        ground_truth = parse_json(task["ground_truth"])
    agent_input = parse_json(row["input"])
    agent_output = parse_json(row["output"])
    label, label_value = labels.get(row["rollout_id"], (None, None))
    return Rollout(
        rollout_id=row["rollout_id"],
        task_id=row["task_id"],
        group_id=row["group_id"],
        name=row["name"],
        agent_name=row["agent_name"],
        status=row["status"] or "ok",
        error=row["error"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        duration_ms=row["duration_ms"],
        input=agent_input,
        output=agent_output,
        final_output=_final_output(steps, agent_output),
        messages=_messages(steps, agent_input, agent_output),
        steps=steps,
        input_tokens=int(row["input_tokens"] or 0),
        output_tokens=int(row["output_tokens"] or 0),
        metadata=metadata,
        ground_truth=ground_truth,
        task_prompt=task["prompt"] if task else None,
        task_metadata=task_metadata if isinstance(task_metadata, dict) else {},
        label=label,
        label_value=label_value,
        emitted_rewards=emitted.get(row["rollout_id"], {}),
    )


def _final_output(steps: list[Step], agent_output: Any) -> str | None:
    """The last ``final_answer`` event's content, else the agent's output, else the last LLM text."""
    for step in reversed(steps):
        if step.kind == "event" and step.name == sc.EVENT_TYPE_FINAL_ANSWER and step.content:
            return step.content
    if agent_output not in (None, ""):
        return text_of(agent_output)
    for step in reversed(steps):
        if step.kind == "llm":
            text = text_of(step.output)
            if text:
                return text
    return None


def _messages(steps: list[Step], agent_input: Any, agent_output: Any) -> list[dict[str, Any]]:
    """The conversation: the last LLM call's input and output messages, else input + output."""
    for step in reversed(steps):
        if step.kind == "llm" and isinstance(step.input, list):
            output = step.output if isinstance(step.output, list) else []
            return [m for m in [*step.input, *output] if isinstance(m, dict)]
    messages: list[dict[str, Any]] = []
    if isinstance(agent_input, dict) and isinstance(agent_input.get("messages"), list):
        messages.extend(m for m in agent_input["messages"] if isinstance(m, dict))
    elif agent_input is not None:
        messages.append({"role": "user", "content": text_of(agent_input)})
    if agent_output is not None:
        messages.append({"role": "assistant", "content": text_of(agent_output)})
    return messages
