"""Every error and warning hint names its cause (issue 18, item 3).

Each case plants exactly one cause in a real DuckDB store, recorded with the public API
(``arl.rollout``, ``arl.record_llm_call``, ``arl.record_tool_call``, ``arl.emit_reward``), runs
the real command line in this process (``agent_rl_plugin.cli.main.main``, so errors go through
the same handler as ``agent-rl``), and asserts that the message and its fix name that cause and
not another (``absent``): the hints that once sent users the wrong way (GiGPO saying "score
first" for rollouts without LLM steps, GRPO datasets without rewards suggesting group ids, an
empty store blamed on the filter) are cases here. A few library calls are checked the same way,
on the exception's ``hint``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import tracing
from agent_rl_plugin.cli.main import main
from agent_rl_plugin.store import connect_writer

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


@dataclass
class Rollout:
    """One rollout to record: its ids, what it did and its reward."""

    rid: str
    task: str = "t1"
    group: str | None = "g1"
    llm: bool = True
    tool: bool = False
    reward: float | None = 1.0
    fails: bool = False


def record(path: Path, rollouts: list[Rollout]) -> None:
    """Record ``rollouts`` into ``path`` with the public API, then release the file."""
    tracing.configure(db_path=str(path), export_delay_ms=20)
    for r in rollouts:
        try:
            with arl.rollout(task_id=r.task, group_id=r.group, rollout_id=r.rid):
                if r.llm:
                    arl.record_llm_call("tiny", QUESTION, "4")
                if r.tool:
                    arl.record_tool_call("calculator", {"expression": "2+2"}, "4")
                if r.reward is not None:
                    arl.emit_reward(r.reward, "correct")
                if r.fails:
                    raise RuntimeError("planted failure")
        except RuntimeError:
            pass
    assert arl.flush()
    arl.shutdown()


def pair(**kw: Any) -> list[Rollout]:
    """Two rollouts of one task in one group, rewards 0 and 1 unless ``reward`` is given."""
    rewards = [kw.pop("reward")] * 2 if "reward" in kw else [0.0, 1.0]
    return [Rollout(f"r{i}", reward=rewards[i], **kw) for i in range(2)]


def empty(path: Path) -> None:
    """A store with its tables and no rollout (a fresh database)."""
    connect_writer(str(path)).close()


#: The planted causes: name -> how to build a store that has exactly that cause.
STORES: dict[str, Callable[[Path], None]] = {
    "empty": empty,
    "good": lambda p: record(p, pair()),
    "no_llm_scored": lambda p: record(p, pair(llm=False, tool=True)),
    "no_llm_unscored": lambda p: record(p, pair(llm=False, tool=True, reward=None)),
    "unscored": lambda p: record(p, pair(reward=None)),
    "singletons": lambda p: record(p, [Rollout("r0", task="t0", group="g0", reward=0.0), Rollout("r1", reward=1.0)]),
    "all_failed": lambda p: record(p, pair(fails=True)),
    "equal_rewards": lambda p: record(p, pair(reward=1.0)),
    # one rollout has LLM steps and no reward, the other a reward and no LLM step
    "llm_xor_reward": lambda p: record(
        p, [Rollout("r0", reward=None), Rollout("r1", llm=False, tool=True, reward=1.0)]
    ),
    # one group of two without rewards, one scored rollout alone in its group
    "unscored_and_single": lambda p: record(p, [*pair(reward=None), Rollout("r9", task="t9", group="g9", reward=1.0)]),
}


@dataclass
class Case:
    """``argv`` on a store with the planted cause ``store``: exit code ``code``, every text of
    ``present`` in the output (message and fix, whitespace collapsed), none of ``absent``."""

    id: str
    store: str
    argv: list[str]
    present: list[str]
    absent: list[str] = field(default_factory=list)
    code: int = 1
    marks: tuple[Any, ...] = ()


RECORD = ["the store holds no rollouts", "record rollouts first", "arl.rollout", "agent-rl rollouts run"]
NOT_THE_FILTER = ["filter", "widen"]
ADV = ["advantages", "compute", "--method"]
OUT = "{tmp}/out.jsonl"

CASES = [
    # -- agent-rl advantages compute -------------------------------------------------------
    Case("adv-empty-store", "empty", [*ADV, "grpo"], RECORD, NOT_THE_FILTER),
    Case("adv-empty-store-with-where", "empty", [*ADV, "grpo", "-w", "task_id = 't1'"], RECORD, NOT_THE_FILTER),
    Case(
        "adv-where-matches-nothing",
        "good",
        [*ADV, "grpo", "-w", "task_id = 'zz'"],
        [
            "no rollouts to compute advantages for matching where",
            "(the store holds 2)",
            "filter matched nothing",
            "agent-rl query",
        ],
        ["record rollouts first"],
    ),
    Case(
        "adv-bad-where",
        "good",
        [*ADV, "grpo", "-w", "no_such_column = 1"],
        ["bad where 'no_such_column = 1'", "rollouts view", "task_id, group_id"],
    ),
    Case(
        "adv-gigpo-no-llm-steps",
        "no_llm_scored",
        [*ADV, "gigpo"],
        ["have no LLM steps", "record them", "record_llm_call", "grpo, rloo, dr_grpo"],
        ["score them", "agent-rl score"],
    ),
    Case(
        "adv-gigpo-no-llm-steps-nor-reward",
        "no_llm_unscored",
        [*ADV, "gigpo"],
        ["no LLM steps", "record_llm_call"],
        ["agent-rl score"],
    ),
    Case("adv-gigpo-unscored", "unscored", [*ADV, "gigpo"], ["no usable reward", "agent-rl score"], ["LLM"]),
    Case(
        "adv-gigpo-llm-xor-reward",
        "llm_xor_reward",
        [*ADV, "gigpo"],
        ["1 have no LLM steps", "1 with LLM steps have no usable episode reward", "agent-rl score", "record_llm_call"],
    ),
    Case(
        "adv-grpo-unscored",
        "unscored",
        [*ADV, "grpo"],
        ["none of the 2 selected rollouts has a usable episode reward", "agent-rl score", "arl.emit_reward"],
        ["group", "filter"],
    ),
    Case(
        "adv-all-failed",
        "all_failed",
        [*ADV, "grpo"],
        ["all 2 selected rollouts failed", "--failed-rollouts", "zero_reward"],
        ["agent-rl score"],
    ),
    Case(
        "adv-unknown-reward-name",
        "good",
        [*ADV, "grpo", "-r", "nope"],
        ["no usable reward named 'nope'", "present: correct", "agent-rl score --reward nope"],
    ),
    Case(
        "adv-unknown-reward-name-nothing-scored",
        "unscored",
        [*ADV, "grpo", "-r", "nope"],
        ["no usable reward named 'nope'", "present: none", "score them with nope first"],
        ["among those present"],
    ),
    Case("adv-bad-reward-item", "good", [*ADV, "grpo", "-r", "=2"], ["bad --reward '=2'", "--reward NAME=WEIGHT"]),
    Case("adv-bad-reward-weight", "good", [*ADV, "grpo", "-r", "correct=x"], ["bad weight in --reward 'correct=x'"]),
    Case(
        "adv-bad-weight-alias", "good", [*ADV, "gigpo", "--weight", "oops"], ["bad --weight 'oops'", "--reward NAME=W"]
    ),
    Case("adv-unknown-method", "good", [*ADV, "ppo"], ["unknown method 'ppo'", "grpo, rloo, dr_grpo, gigpo"]),
    Case("adv-unknown-mode", "good", [*ADV, "gigpo", "--mode", "zscore"], ["unknown mode 'zscore'", "mean_norm"]),
    Case(
        "adv-groups-of-one-note",
        "singletons",
        [*ADV, "grpo", "--dry-run"],
        ["2 group(s) of one rollout", "Every group has one rollout", "group_id", "--group-size"],
        code=0,
    ),
    Case("adv-no-database", "none", [*ADV, "grpo"], ["no database at", "agent-rl demo"]),
    # -- agent-rl dataset build ---------------------------------------------------------------
    Case("kto-empty-store", "empty", ["dataset", "build", "kto", "-o", OUT], RECORD, NOT_THE_FILTER),
    Case(
        "kto-empty-store-with-where",
        "empty",
        ["dataset", "build", "kto", "-w", "task_id = 't1'", "-o", OUT],
        RECORD,
        NOT_THE_FILTER,
    ),
    Case(
        "kto-where-matches-nothing",
        "good",
        ["dataset", "build", "kto", "-w", "task_id = 'zz'", "-o", OUT],
        ["no rollouts match where", "(the store holds 2)", "filter matched nothing", "agent-rl query"],
        ["record rollouts first"],
    ),
    Case(
        "kto-sql-matches-nothing",
        "good",
        ["dataset", "build", "kto", "--sql", "select rollout_id from rollouts where false", "-o", OUT],
        ["no rollouts match the query", "filter matched nothing"],
    ),
    Case(
        "grpo-unscored",
        "unscored",
        ["dataset", "build", "grpo", "-o", OUT],
        ["formed a GRPO group", "2 no usable episode reward", "agent-rl score"],
        ["group_id", "min_group_size (--"],
    ),
    Case(
        "kto-unscored",
        "unscored",
        ["dataset", "build", "kto", "-o", OUT],
        ["gave a KTO row", "2 no usable episode reward", "agent-rl score"],
        ["label rule"],
    ),
    Case(
        "grpo-groups-of-one",
        "singletons",
        ["dataset", "build", "grpo", "-o", OUT],
        ["2 in a group smaller than min_group_size (2)", "group_id", "--group-size", "--min-group-size"],
        ["agent-rl score"],
    ),
    Case(
        "grpo-unscored-and-groups-of-one",
        "unscored_and_single",
        ["dataset", "build", "grpo", "-o", OUT],
        ["2 no usable episode reward", "1 in a group smaller", "agent-rl score", "--group-size"],
    ),
    Case(
        "grpo-all-failed",
        "all_failed",
        ["dataset", "build", "grpo", "-o", OUT],
        ["2 failed rollout", "--failed-rollouts", "zero_reward"],
        ["agent-rl score", "group_id"],
    ),
    Case(
        "kto-all-failed",
        "all_failed",
        ["dataset", "build", "kto", "-o", OUT],
        ["2 failed rollout", "--failed-rollouts"],
        ["agent-rl score"],
    ),
    Case(
        "kto-group-label-equal-rewards",
        "equal_rewards",
        ["dataset", "build", "kto", "--label", "group", "-o", OUT],
        ["label None", "all equal", "--label"],
        ["agent-rl score"],
    ),
    Case(
        "kto-no-llm-messages",
        "no_llm_scored",
        ["dataset", "build", "kto", "-o", OUT],
        ["no LLM messages and no agent output", "record the agent's LLM calls"],
        ["agent-rl score"],
    ),
    Case(
        "steps-no-llm-calls",
        "no_llm_scored",
        ["dataset", "build", "steps", "-o", OUT],
        ["have no LLM calls", "record_llm_call"],
        ["agent-rl score"],
    ),
    Case(
        "steps-unscored",
        "unscored",
        ["dataset", "build", "steps", "-o", OUT],
        ["no usable reward", "agent-rl score"],
        ["LLM calls"],
    ),
    Case(
        "steps-from-table-without-runs",
        "good",
        ["dataset", "build", "steps", "--from-table", "-o", OUT],
        ["no stored advantage run covers these rollouts", "agent-rl advantages compute --method gigpo"],
    ),
    Case(
        "steps-unknown-advantages-run",
        "good",
        ["dataset", "build", "steps", "--advantages-run", "nope", "-o", OUT],
        ["no advantage run 'nope'", "agent-rl advantages runs"],
    ),
    Case(
        "steps-unknown-run-id-old-spelling",
        "good",
        ["dataset", "build", "steps", "--run-id", "nope", "-o", OUT],
        ["no advantage run 'nope'", "agent-rl advantages runs"],
    ),
    Case(
        "steps-failed-policy",
        "good",
        ["dataset", "build", "steps", "--failed-rollouts", "keep", "-o", OUT],
        ["not applied by the steps dataset", "advantages compute --method gigpo --failed-rollouts keep"],
    ),
    Case(
        "dataset-where-and-sql",
        "good",
        ["dataset", "build", "kto", "-w", "true", "--sql", "select rollout_id from rollouts", "-o", OUT],
        ["give --where or --sql, not both"],
    ),
    Case(
        "adv-where-reads-a-file",
        "good",
        [*ADV, "grpo", "-w", "(select count(*) from read_csv('/etc/passwd')) > 0"],
        ["bad --where", "refused table function read_csv()", "agent-rl ingest"],
        ["condition over the rollouts view"],
    ),
    Case(
        "dataset-where-reads-a-file",
        "good",
        ["dataset", "build", "kto", "-w", "(select count(*) from read_csv('/etc/passwd')) > 0", "-o", OUT],
        ["only reads the store", "refused table function read_csv()", "agent-rl ingest"],
    ),
    Case(
        "dataset-query-writes",
        "good",
        ["dataset", "build", "kto", "--sql", "delete from spans", "-o", OUT],
        ["the query must only read the store", "use SELECT"],
    ),
    Case(
        "dataset-unknown-output-format",
        "good",
        ["dataset", "build", "kto", "-o", "{tmp}/out.txt"],
        ["cannot tell the output format", ".jsonl, .parquet, or /"],
    ),
    Case("dataset-bad-where", "good", ["dataset", "build", "kto", "-w", "nope = 1", "-o", OUT], ["SQL error in where"]),
    Case(
        "dataset-query-without-rollout-id",
        "good",
        ["dataset", "build", "kto", "--sql", "select 1 as x", "-o", OUT],
        ["must return a rollout_id column", "it returns x"],
    ),
    Case(
        "dataset-bad-reward-item",
        "good",
        ["dataset", "build", "kto", "-r", "=1", "-o", OUT],
        ["bad --reward '=1'", "--reward NAME=WEIGHT"],
    ),
    Case("dataset-no-database", "none", ["dataset", "build", "kto", "-o", OUT], ["no database at", "agent-rl demo"]),
    # -- agent-rl train: offline paths build the same datasets, so they give the same hints -------
    Case(
        "train-grpo-offline-unscored",
        "unscored",
        ["train", "grpo", "--offline", "-m", "{model}", "-o", "{tmp}/run"],
        ["formed a GRPO group", "no usable episode reward", "agent-rl score"],
        ["group_id"],
    ),
    Case(
        "train-kto-unscored",
        "unscored",
        ["train", "kto", "-m", "{model}", "-o", "{tmp}/run"],
        ["gave a KTO row", "agent-rl score"],
    ),
    Case(
        "train-gigpo-no-llm-calls",
        "no_llm_scored",
        ["train", "gigpo", "-m", "{model}", "-o", "{tmp}/run"],
        ["have no LLM calls", "record_llm_call"],
        ["agent-rl score"],
    ),
    Case(
        "train-gigpo-unscored",
        "unscored",
        ["train", "gigpo", "-m", "{model}", "-o", "{tmp}/run"],
        ["no usable reward", "agent-rl score"],
    ),
    # -- agent-rl doctor ------------------------------------------------------------------------
    Case("doctor-empty-store", "empty", ["doctor"], ["no_rollouts", "no finished rollout", "arl.rollout"]),
    Case("doctor-empty-store-with-where", "empty", ["doctor", "-w", "task_id = 't1'"], RECORD, NOT_THE_FILTER, code=2),
    Case(
        "doctor-where-matches-nothing",
        "good",
        ["doctor", "-w", "task_id = 'zz'"],
        ["no rollouts match where", "(the store holds 2)", "agent-rl query"],
        code=2,
    ),
    Case("doctor-bad-where", "good", ["doctor", "-w", "nope = 1"], ["SQL error in where", "rollouts view"], code=2),
    Case("doctor-unscored", "unscored", ["doctor"], ["no_reward", "no episode reward", "agent-rl score"]),
    Case("doctor-no-llm", "no_llm_scored", ["doctor"], ["no_llm_calls", "no LLM call", "record_llm_call"]),
    Case(
        "doctor-groups-of-one",
        "singletons",
        ["doctor"],
        ["singleton_groups", "single rollout", "--group-size"],
        code=0,
    ),
    Case("doctor-failed", "all_failed", ["doctor"], ["failed_rollouts", "raised", "--status error"], code=0),
    # -- agent-rl traces show / query / score / label / export (their hints, not edited here) --
    Case("traces-show-unknown-id", "good", ["traces", "show", "nope"], ["no rollout with id 'nope'", "traces list"]),
    Case(
        "traces-show-empty-store",
        "empty",
        ["traces", "show", "abc"],
        ["the store holds no rollouts"],
        ["traces list"],
    ),
    Case("query-empty", "good", ["query", ""], ["the query is empty", "select * from rollouts"]),
    Case("query-write", "good", ["query", "delete from spans"], ["only reads the database", "agent-rl score"]),
    Case("query-unknown-table", "good", ["query", "select * from nosuch"], ["nosuch does not exist", "show tables"]),
    Case(
        "score-empty-store",
        "empty",
        ["score", "--workers", "0"],
        ["the store holds no rollouts", "record"],
        code=0,
    ),
    Case(
        "score-where-matches-nothing",
        "good",
        ["score", "--workers", "0", "-w", "task_id = 'zz'"],
        ["No rollouts to score", "matching", "task_id = 'zz'"],
        code=0,
    ),
    Case(
        "score-empty-store-with-where",
        "empty",
        ["score", "--workers", "0", "-w", "task_id = 't1'"],
        ["the store holds no rollouts", "record"],
        ["matching"],
        code=0,
    ),
    Case("label-unknown-id", "good", ["label", "--set", "nope=good"], ["no rollout with id 'nope'", "traces list"]),
    Case(
        "label-empty-store",
        "empty",
        ["label", "--set", "abc=good"],
        ["the store holds no rollouts"],
        ["traces list"],
    ),
    Case("label-bad-set", "good", ["label", "--set", "abc"], ["is not ROLLOUT_ID=LABEL", "--set"]),
    Case(
        "export-unknown-run",
        "good",
        ["export", "--run", "nope", "-o", "{tmp}/x"],
        ["no training run 'nope'", "training_runs"],
    ),
    Case(
        "export-adapter-and-run",
        "good",
        ["export", "--adapter", "{tmp}", "--run", "x", "-o", "{tmp}/x"],
        ["give --adapter or --run, not both"],
    ),
]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``agent-rl ARGV`` in this process, through ``main`` (the handler users get): (exit code,
    stdout + stderr with whitespace collapsed, so table wrapping does not split words)."""
    capsys.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, " ".join((out + "\n" + err).split())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each planted store is recorded once per module (then copied): name -> its file."""
    return {}


def planted(name: str, built: dict[str, Path], factory: pytest.TempPathFactory, dest: Path) -> None:
    """Copy the store with the planted cause ``name`` to ``dest``, recording it the first time."""
    if name not in built:
        path = factory.mktemp(name) / "store.duckdb"
        STORES[name](path)
        built[name] = path
    shutil.copyfile(built[name], dest)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny local model directory, for the train commands (which load it before the data)."""
    from agent_rl_plugin.train.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_model(path, hidden_size=32, layers=1)
    return str(path)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_hint_names_the_planted_cause(
    case: Case, tmp_path: Path, plugin_manager, capsys, monkeypatch, built, tmp_path_factory, request
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "store.duckdb"
    if case.store != "none":
        planted(case.store, built, tmp_path_factory, db)
    model = request.getfixturevalue("tiny_model") if "{model}" in case.argv else ""
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{model}", model) for a in case.argv] + ["--db", str(db)]
    code, text = run_cli(argv, capsys)
    assert code == case.code, text
    for words in case.present:
        assert words in text, f"{words!r} missing from: {text}"
    for words in case.absent:
        assert words not in text, f"{words!r} should not be in: {text}"


# -- rollouts run: its causes are files and agents, not stores --------------------------------


def test_rollouts_run_hints_name_the_file_or_agent_at_fault(tmp_path: Path, plugin_manager, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "r.duckdb")
    tasks = tmp_path / "tasks.jsonl"
    agent = tmp_path / "agent.py"
    agent.write_text(
        "def fails(task):\n    raise RuntimeError('planted agent bug')\n\n\ndef ok(task):\n    return 'x'\n"
    )

    def run(*args: str) -> tuple[int, str]:
        return run_cli(["rollouts", "run", *args, "--db", db], capsys)

    code, text = run(f"{agent}:ok", "--tasks", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "no task file at" in text and ".jsonl, .json or .csv" in text, text
    tasks.write_text("")
    code, text = run(f"{agent}:ok", "--tasks", str(tasks))
    assert code == 1 and f"no tasks in {tasks}" in text and "one JSON object per line" in text, text
    tasks.write_text('{"task_id": "t1", "prompt": "2+2?"}\n')
    code, text = run("no_such_module_here:f", "--tasks", str(tasks))
    assert code == 1 and "no module named 'no_such_module_here'" in text and "run from the folder" in text, text
    code, text = run(f"{agent}:nope", "--tasks", str(tasks))
    assert code == 1 and "has no attribute 'nope'" in text and "fails, ok" in text, text
    code, text = run(f"{agent}:fails", "--tasks", str(tasks), "-g", "2", "-j", "2")
    assert code == 1 and "planted agent bug" in text and "Every rollout failed" in text, text
    code, text = run(f"{agent}:ok", "--tasks", str(tasks), "-g", "2", "-j", "2")
    assert code == 0 and "2 ok" in text and "agent-rl score" in text, text


# -- the library calls under the commands: the hint is on the exception -----------------------


def test_library_errors_carry_the_hint_of_their_cause(tmp_path: Path, plugin_manager) -> None:
    from agent_rl_plugin.data import DatasetError, build_table
    from agent_rl_plugin.rl import compute_advantages
    from agent_rl_plugin.rl.store import AdvantageInputError

    no_llm, unscored, nothing = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "c.duckdb"
    STORES["no_llm_scored"](no_llm)
    STORES["unscored"](unscored)
    empty(nothing)
    with pytest.raises(AdvantageInputError, match="no LLM steps") as caught:
        compute_advantages(str(no_llm), "gigpo", write=False)
    assert "record_llm_call" in (caught.value.hint or "") and "score" not in (caught.value.hint or "")
    with pytest.raises(DatasetError, match="formed a GRPO group") as data_caught:
        build_table("grpo", str(unscored))
    assert "agent-rl score" in (data_caught.value.hint or "") and "group_id" not in (data_caught.value.hint or "")
    with pytest.raises(AdvantageInputError, match="the store holds no rollouts") as empty_caught:
        compute_advantages(str(nothing), "rloo", rollout_ids=["x"])
    assert "record rollouts first" in (empty_caught.value.hint or "")
    with pytest.raises(DatasetError, match="the store holds no rollouts") as data_empty:
        build_table("steps", str(nothing), where="task_id = 'x'")
    assert "filter" not in (data_empty.value.hint or "")
