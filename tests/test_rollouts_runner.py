"""``run_rollouts``: any agent over a task list, in groups, concurrently, each run a rollout.

Each test records into a real DuckDB file (the ``db_path`` fixture), then reads it back
through the views after ``arl.shutdown()`` releases it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from score_support import rows

import agent_rl_plugin as arl
from agent_rl_plugin.rollouts import RolloutOutcome, TaskFileError, run_rollouts, run_rollouts_async

TASKS = [
    {"task_id": "t1", "prompt": "2+2?", "ground_truth": 4},
    {"task_id": "t2", "prompt": "capital of France?", "answer": "Paris", "difficulty": "easy"},
    {"task_id": "t3", "prompt": "list primes < 6", "ground_truth": [2, 3, 5], "metadata": {"topic": "math"}},
]


class InFlight:
    """Counts calls running at the same time (thread-safe), and the peak."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.now -= 1


def read(db, sql: str):
    arl.shutdown()  # flush and release the file
    return rows(db, sql)


def check_groups(db, outcomes: list[RolloutOutcome]) -> None:
    """12 rollouts: 3 groups of 4 with the task's id and ground truth, as the outcomes say."""
    stored = {r["rollout_id"]: r for r in read(db, "select * from rollouts")}
    assert set(stored) == {o.rollout_id for o in outcomes}
    run_ids = {o.group_id.split("/")[1] for o in outcomes}
    assert len(run_ids) == 1  # one run: group_id = task_id/run_id
    run_id = run_ids.pop()
    groups: dict[str, list[str]] = {}
    for outcome in outcomes:
        row = stored[outcome.rollout_id]
        assert (row["task_id"], row["group_id"]) == (outcome.task_id, outcome.group_id)
        assert outcome.group_id == f"{outcome.task_id}/{run_id}"
        groups.setdefault(row["group_id"], []).append(row["task_id"])
        metadata = json.loads(row["metadata"])
        assert metadata["sample_index"] == outcome.sample_index
        assert metadata["ground_truth"] == {"t1": 4, "t2": "Paris", "t3": [2, 3, 5]}[outcome.task_id]
    assert sorted(len(members) for members in groups.values()) == [4, 4, 4]
    assert all(len(set(members)) == 1 for members in groups.values())
    tasks = {r["task_id"]: r for r in rows(db, "select * from tasks")}
    assert {k: json.loads(v["ground_truth"]) for k, v in tasks.items()} == {"t1": 4, "t2": "Paris", "t3": [2, 3, 5]}
    assert json.loads(tasks["t2"]["metadata"]) == {"difficulty": "easy"}
    assert tasks["t1"]["prompt"] == "2+2?"


def test_async_agent_three_tasks_in_groups_of_four(db_path):
    seen = InFlight()

    async def agent(task):
        with seen:
            await asyncio.sleep(0.02)
        info = arl.current_rollout()  # the rollout context reaches the agent
        return {"answer": task["ground_truth"], "rollout_id": info.rollout_id, "prompt": task["prompt"]}

    outcomes = run_rollouts(agent, TASKS, group_size=4, concurrency=16)
    assert [o.status for o in outcomes] == ["ok"] * 12
    assert [(o.task_id, o.sample_index) for o in outcomes] == [(t, i) for t in ("t1", "t2", "t3") for i in range(4)]
    assert all(o.output["rollout_id"] == o.rollout_id for o in outcomes)
    assert outcomes[4].output["prompt"] == "capital of France?" and outcomes[4].duration_s > 0
    assert 1 < seen.peak <= 12
    check_groups(db_path, outcomes)


def test_sync_agent_runs_in_threads_with_the_rollout_context(db_path):
    seen = InFlight()
    main = threading.get_ident()

    def agent(task):
        with seen:
            time.sleep(0.05)
        assert threading.get_ident() != main
        return arl.current_rollout().rollout_id

    outcomes = run_rollouts(agent, TASKS, group_size=4, concurrency=5)
    assert [o.status for o in outcomes] == ["ok"] * 12
    assert all(o.output == o.rollout_id for o in outcomes)
    assert 1 < seen.peak <= 5
    check_groups(db_path, outcomes)


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_concurrency_is_capped(db_path, kind):
    seen = InFlight()

    async def async_agent(task):
        with seen:
            await asyncio.sleep(0.03)

    def sync_agent(task):
        with seen:
            time.sleep(0.03)

    agent = async_agent if kind == "async" else sync_agent
    outcomes = run_rollouts(agent, TASKS, group_size=4, concurrency=3)
    assert len(outcomes) == 12 and all(o.ok for o in outcomes)
    assert seen.peak == 3


def test_an_agent_that_raises_fails_only_its_rollouts(db_path):
    def agent(task):
        if task["task_id"] == "t2":
            raise ValueError(f"cannot answer {task['prompt']!r}")
        return "fine"

    outcomes = run_rollouts(agent, TASKS, group_size=4, concurrency=4)
    by_task = {t: [o.status for o in outcomes if o.task_id == t] for t in ("t1", "t2", "t3")}
    assert by_task == {"t1": ["ok"] * 4, "t2": ["error"] * 4, "t3": ["ok"] * 4}
    failed = [o for o in outcomes if not o.ok]
    assert failed[0].error == "ValueError: cannot answer 'capital of France?'" and failed[0].output is None
    stored = read(db_path, "select task_id, status, error, output from rollouts order by task_id")
    assert {(r["task_id"], r["status"]) for r in stored} == {("t1", "ok"), ("t2", "error"), ("t3", "ok")}
    errors = [r for r in stored if r["status"] == "error"]
    assert len(errors) == 4 and all("ValueError: cannot answer" in r["error"] for r in errors)
    assert {json.loads(r["output"]) for r in stored if r["status"] == "ok"} == {"fine"}


def test_a_hanging_async_agent_times_out_and_the_batch_finishes(db_path):
    cleaned_up = []

    async def agent(task):
        if task["task_id"] != "t1":
            return "quick"
        try:
            await asyncio.sleep(60)
        finally:
            cleaned_up.append(task["sample_index"])  # cancelled, so its finally blocks run

    started = time.perf_counter()
    outcomes = run_rollouts(agent, TASKS, group_size=2, concurrency=6, timeout_s=0.2)
    assert time.perf_counter() - started < 3
    assert [o.status for o in outcomes] == ["timeout", "timeout", "ok", "ok", "ok", "ok"]
    assert outcomes[0].error == "TimeoutError: rollout timed out after 0.2 s"
    assert sorted(cleaned_up) == [0, 1]
    stored = read(db_path, "select status, error from rollouts where task_id = 't1'")
    assert [r["status"] for r in stored] == ["error", "error"]
    assert all(r["error"] == "TimeoutError: rollout timed out after 0.2 s" for r in stored)


def test_a_hanging_sync_agent_is_recorded_as_timed_out(db_path):
    release = threading.Event()

    def agent(task):
        if task["task_id"] == "t3":
            release.wait(30)  # a thread cannot be killed: it is left running, unobserved
            return "late"
        return "quick"

    try:
        started = time.perf_counter()
        outcomes = run_rollouts(agent, TASKS, group_size=2, concurrency=6, timeout_s=0.2)
        assert time.perf_counter() - started < 3
    finally:
        release.set()
    assert [o.status for o in outcomes] == ["ok", "ok", "ok", "ok", "timeout", "timeout"]
    assert outcomes[-1].output is None
    assert {r["status"] for r in read(db_path, "select status from rollouts where task_id = 't3'")} == {"error"}


def test_an_agent_that_raises_its_own_timeout_error_is_an_error_not_a_timeout(db_path):
    async def agent(task):
        raise TimeoutError("the model API timed out")

    outcomes = run_rollouts(agent, TASKS[:1], group_size=1, timeout_s=5)
    assert (outcomes[0].status, outcomes[0].error) == ("error", "TimeoutError: the model API timed out")


def test_streaming_agents_return_their_text(db_path):
    async def async_stream(task):
        for word in ("The ", "answer ", "is ", str(task["ground_truth"])):
            await asyncio.sleep(0)
            yield {"content": word}

    def sync_stream(task):
        yield "4"
        yield {"type": "done"}  # no text: ignored

    @arl.trace_agent(name="streamer")
    async def traced_stream(task):
        yield "traced "
        yield "4"

    assert [o.output for o in run_rollouts(async_stream, TASKS[:1], group_size=2)] == ["The answer is 4"] * 2
    assert [o.output for o in run_rollouts(sync_stream, TASKS[:1], group_size=1)] == ["4"]
    outcome = run_rollouts(traced_stream, TASKS[:1], group_size=1)[0]
    assert outcome.output == "traced 4"
    agents = read(db_path, f"select agent_name, output from agents where rollout_id = '{outcome.rollout_id}'")
    assert agents == [{"agent_name": "streamer", "output": '"traced 4"'}]


def test_input_key_and_callable_objects(db_path):
    class Agent:
        async def __call__(self, prompt: str) -> str:
            return prompt.upper()

    outcomes = run_rollouts(Agent(), TASKS, group_size=1, input_key="prompt")
    assert [o.output for o in outcomes] == ["2+2?", "CAPITAL OF FRANCE?", "LIST PRIMES < 6"]
    topics = run_rollouts(lambda topic: topic, TASKS[2:], group_size=1, input_key="topic")
    assert topics[0].output == "math"  # a key of the task's metadata
    with pytest.raises(ValueError, match="input_key 'nope'"):
        run_rollouts(lambda task: task, TASKS, input_key="nope")


def test_seed_is_stable_per_task_and_sample_and_reruns_make_new_groups(db_path):
    def agent(task):
        return task["seed"]

    first = run_rollouts(agent, TASKS, group_size=3, seed=7)
    second = run_rollouts(agent, TASKS, group_size=3, seed=7)
    assert [o.output for o in first] == [o.output for o in second]
    assert len({o.output for o in first}) == 9
    assert {o.group_id for o in first}.isdisjoint({o.group_id for o in second})
    assert run_rollouts(agent, TASKS[:1], group_size=1)[0].output is None  # no seed: None
    named = run_rollouts(agent, TASKS[:1], group_size=2, run_id="epoch-1")
    assert {o.group_id for o in named} == {"t1/epoch-1"}


def test_progress_is_reported_and_its_failures_ignored(db_path):
    calls = []

    def progress(done, total, outcome):
        calls.append((done, total, outcome.status))
        raise RuntimeError("a broken progress bar")

    outcomes = run_rollouts(lambda task: 1, TASKS, group_size=2, progress=progress)
    assert len(outcomes) == 6
    assert [c[0] for c in calls] == [1, 2, 3, 4, 5, 6] and {c[1] for c in calls} == {6}


def test_tasks_from_a_file(db_path, tmp_path):
    file = tmp_path / "tasks.jsonl"
    file.write_text('{"task_id": "a", "prompt": "p", "ground_truth": 1}\n\n{"task_id": "b", "answer": 2}\n')
    outcomes = run_rollouts(lambda task: task["ground_truth"], file, group_size=2)
    assert [o.output for o in outcomes] == [1, 1, 2, 2]


def test_bad_tasks_are_named_and_nothing_runs(db_path, tmp_path):
    calls = []
    bad_file = tmp_path / "bad.jsonl"
    bad_file.write_text('{"task_id": "a"}\n{"prompt": "no id"}\nnot json\n')
    with pytest.raises(TaskFileError, match=r"2 bad lines in .*bad.jsonl: line 2: task_id is missing; line 3: invalid JSON"):
        run_rollouts(calls.append, bad_file)
    with pytest.raises(TaskFileError, match="item 2: expected an object with task_id"):
        run_rollouts(calls.append, [{"task_id": "a"}, "just a string"])
    with pytest.raises(TaskFileError, match=r"task_id 'a' appears twice \(items 1 and 2\)"):
        run_rollouts(calls.append, [{"task_id": "a"}, {"task_id": "a"}])
    with pytest.raises(TaskFileError, match="no task file at"):
        run_rollouts(calls.append, tmp_path / "missing.jsonl")
    assert calls == []
    assert run_rollouts(calls.append, []) == []


def test_bad_arguments(db_path):
    with pytest.raises(ValueError, match="group_size"):
        run_rollouts(lambda t: t, TASKS, group_size=0)
    with pytest.raises(ValueError, match="concurrency"):
        run_rollouts(lambda t: t, TASKS, concurrency=0)
    with pytest.raises(ValueError, match="timeout_s"):
        run_rollouts(lambda t: t, TASKS, timeout_s=0)
    with pytest.raises(TypeError, match="callable"):
        run_rollouts("not an agent", TASKS)

    async def inside_a_loop():
        with pytest.raises(RuntimeError, match="run_rollouts_async"):
            run_rollouts(lambda t: t, TASKS)
        return await run_rollouts_async(lambda t: t["task_id"], TASKS, group_size=1)

    assert [o.output for o in asyncio.run(inside_a_loop())] == ["t1", "t2", "t3"]


def test_db_argument_records_into_that_file(plugin_manager, tmp_path):
    db = tmp_path / "elsewhere.duckdb"
    outcomes = run_rollouts(lambda task: "x", TASKS, group_size=1, db=db)
    assert {r["task_id"] for r in read(db, "select task_id from rollouts")} == {o.task_id for o in outcomes}
    assert len(rows(db, "select * from tasks")) == 3
