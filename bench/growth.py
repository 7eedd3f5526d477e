"""Growth: how ingest and the views users query most cost as one store grows (100k, 1M, 10M spans).

One DuckDB file, made by the store's migrations (schema, views, indexes), is grown through the
sizes with synthetic rollouts of 10 spans and 2 emitted rewards each (:mod:`bench.growth_data`;
ids random-looking like real ones), in time order. Timed batches are rows of the exporter's
Arrow schemas written with :func:`agent_rl_plugin.store.batch.insert_batch` (the exporter's
insert); the untimed bulk of each size goes through the store's own column derivation in one
``INSERT ... SELECT`` per chunk (:meth:`Growth.build_to`: the same rows, ~3x faster, so that 10M
spans build in minutes on 2 cores). At each size:

* **ingest**: spans/s of the last batches (``TIMED_ROUNDS`` rounds of 2 batches of
  ``TIMED_ROLLOUTS`` rollouts) appended to the already-large file, alternating batch by batch
  with the same appends to a reference file of the smallest size (so the machine's load hits
  both alike: the slow-down ratio is measured in the same minute, not minutes apart). The Arrow
  tables are made before the clock; the insert, its duplicate checks, the commit and the
  checkpoints DuckDB makes on the way are timed; a sample is one round's spans/s;
* **lookups** (a read-only connection, literal SQL as the CLI sends it, median of ``REPEATS``
  runs, each on another rollout spread over the whole file):

  - ``rollouts_list``: ``agent-rl traces list``: the newest 20 rows of ``rollouts``;
  - ``rollout_row``: ``rollouts`` where rollout_id = one id (``traces show``, the report);
  - ``rollout_steps``: ``steps`` of one rollout (what GiGPO and ``traces show`` read);
  - ``rewards_join``: ``rollouts`` joined with its ``episode_rewards`` for one rollout;
  - ``llm_calls_task``: ``llm_calls`` of one task (a 1/1000 slice spread over the whole file);
  - ``kto_task``: :func:`~agent_rl_plugin.data.build_kto_dataset` with ``where task_id = ...``;
  - ``kto_all``: :func:`~agent_rl_plugin.data.build_kto_dataset` over the whole store (sizes up
    to ``KTO_ALL_MAX_SPANS``: a dataset of every rollout of a 10M-span store is not a query a
    user waits on);

* **file size** per span (after a checkpoint).

Every lookup's rows are checked against what the generator wrote (ids, counts, rewards, labels).
Targets: ingest at the largest size >= 1/1.5 of the smallest; one-rollout lookups (row, steps,
rewards join) < 50 ms at the largest size; a KTO build over 1M spans < 5 s.

    python bench/growth.py                       # 100k, 1M, 10M spans (~10 min idle; ~3.5 GB of disk)
    python bench/growth.py --sizes 10000,50000   # any sizes (multiples of 10)
    python -m bench --only growth [--quick]      # quick: 10k, 50k, 100k
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import duckdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.growth_data import (  # noqa: E402
    GROUP_SIZE,
    LLM_CALLS,
    N_TASKS,
    SPANS_PER_ROLLOUT,
    Generator,
    reward_of,
    rewards_of,
    rewards_sql,
    rollout_id,
    span_id,
    spans_sql,
    task_of,
)
from bench.harness import Context, Measure, Row, interleave, median, ratio  # noqa: E402

BUILD_ROLLOUTS = 50_000  # 500,000 spans per untimed INSERT ... SELECT
TIMED_ROLLOUTS = 1_000  # 10,000 spans per timed batch: a busy writer's batch
TIMED_ROUNDS = 4  # each: 2 timed batches into the big file and 2 into the reference file
REPEATS = 5
LIST_LIMIT = 20
KTO_ALL_MAX_SPANS = 1_000_000
FULL_SIZES = (100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000, 50_000, 100_000)
LOOKUP_TARGET_MS = 50.0
INGEST_GROWTH_LIMIT = 1.5
KTO_1M_TARGET_S = 5.0
ONE_ROLLOUT = ("rollout_row", "rollout_steps", "rewards_join")


# --- growing the file ----------------------------------------------------------------------
@dataclass
class Growth:
    """The file being grown and what it holds."""

    path: Path
    rollouts: int = 0
    inserted: int = 0
    build_s: float = 0.0
    generate_s: float = 0.0
    generator: Generator = field(default_factory=Generator)

    def append(self, connection: duckdb.DuckDBPyConnection, count: int) -> float:
        """Append ``count`` rollouts in one ``insert_batch``; returns the seconds of the insert
        alone (the Arrow tables are made first)."""
        from agent_rl_plugin.store.batch import insert_batch

        started = time.perf_counter()
        spans, rewards = self.generator.batch(self.rollouts, count)
        self.generate_s += time.perf_counter() - started
        started = time.perf_counter()
        self.inserted += insert_batch(connection, spans, rewards)
        seconds = time.perf_counter() - started
        self.rollouts += count
        self.build_s += seconds
        return seconds

    def build_to(self, connection: duckdb.DuckDBPyConnection, rollouts: int) -> None:
        """Append untimed chunks of ``BUILD_ROLLOUTS`` until the file holds ``rollouts``: the
        generator's SQL straight into one ``INSERT ... SELECT`` per chunk through the store's own
        column derivation (:func:`~agent_rl_plugin.store.batch.spans_select_sql`,
        :func:`~agent_rl_plugin.store.batch.rewards_select_sql`), without the round trip through
        Arrow and the duplicate checks (the ids are new): the same rows as :meth:`append`
        writes, about 3x faster, so that 10M spans build in minutes on 2 cores."""
        from agent_rl_plugin.store.batch import REWARD_COLUMNS, SPAN_COLUMNS, rewards_select_sql, spans_select_sql

        while self.rollouts < rollouts:
            count = min(BUILD_ROLLOUTS, rollouts - self.rollouts)
            started = time.perf_counter()
            connection.execute("BEGIN TRANSACTION")
            connection.execute(
                f"INSERT INTO spans ({', '.join(SPAN_COLUMNS)}) "
                + spans_select_sql(f"({spans_sql(self.rollouts, count)})", "timezone('UTC', now())")
            )
            connection.execute(
                f"INSERT INTO rewards ({', '.join(REWARD_COLUMNS)}) "
                + rewards_select_sql(f"({rewards_sql(self.rollouts, count)})", "timezone('UTC', now())")
            )
            connection.execute("COMMIT")
            self.rollouts += count
            self.inserted += count * SPANS_PER_ROLLOUT
            self.build_s += time.perf_counter() - started

    def file_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, Path(f"{self.path}.wal")) if p.exists())


# --- the lookups ---------------------------------------------------------------------------
def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def list_sql(limit: int = LIST_LIMIT) -> str:
    """``agent-rl traces list`` (agent_rl_plugin/cli/traces.py), as it sends it."""
    return (
        "select rollout_id, task_id, group_id, status, start_time, round(duration_ms, 1) as duration_ms, "
        "n_llm_calls, n_tool_calls, n_tool_errors, total_reward "
        f"from rollouts order by start_time desc limit {int(limit)}"
    )


LOOKUP_SQL: dict[str, Callable[[str], str]] = {
    "rollouts_list": lambda _: list_sql(),
    "rollout_row": lambda rid: (
        f"select rollout_id, n_spans, n_llm_calls, n_tool_calls, total_reward, status "
        f"from rollouts where rollout_id = {_q(rid)}"
    ),
    "rollout_steps": lambda rid: (
        f"select step_index, kind, name, span_id from steps where rollout_id = {_q(rid)} order by step_index"
    ),
    "rewards_join": lambda rid: (
        "select r.rollout_id, r.total_reward, r.n_spans, e.name, e.value "
        "from rollouts r join episode_rewards e on e.rollout_id = r.rollout_id "
        f"where r.rollout_id = {_q(rid)} order by e.name"
    ),
    "llm_calls_task": lambda task: (
        "select rollout_id, span_id, input_tokens from llm_calls "
        f"where task_id = {_q(task)} order by start_time, span_id"
    ),
}


def check_lookup(name: str, r: int, rows: list[tuple], total_rollouts: int) -> str | None:
    """``None`` when ``rows`` (of :data:`LOOKUP_SQL` ``name`` for rollout ``r``) are what the
    generator wrote, else what is wrong."""
    rid = rollout_id(r)
    if name == "rollouts_list":
        newest = list(range(total_rollouts - 1, total_rollouts - 1 - LIST_LIMIT, -1))
        want = [(rollout_id(n), LLM_CALLS, LLM_CALLS - 1, round(reward_of(n), 9)) for n in newest]
        got = [(row[0], row[6], row[7], None if row[9] is None else round(row[9], 9)) for row in rows]
        return None if got == want else f"newest {LIST_LIMIT}: got {got[:2]}..., want {want[:2]}..."
    if name == "rollout_row":
        want_row = [(rid, SPANS_PER_ROLLOUT, LLM_CALLS, LLM_CALLS - 1, round(reward_of(r), 9), "ok")]
        got_row = [(*row[:4], round(row[4], 9), row[5]) for row in rows]
        return None if got_row == want_row else f"rollout {r}: {got_row} != {want_row}"
    if name == "rollout_steps":
        want_steps = [(i, "llm" if s % 2 else "tool", span_id(r, s)) for i, s in enumerate(range(1, SPANS_PER_ROLLOUT))]
        got_steps = [(row[0], row[1], row[3]) for row in rows]
        return None if got_steps == want_steps else f"steps of rollout {r}: {got_steps} != {want_steps}"
    if name == "rewards_join":
        values = rewards_of(r)
        want_join = [(rid, round(reward_of(r), 9), SPANS_PER_ROLLOUT, n, values[n]) for n in sorted(values)]
        got_join = [(row[0], round(row[1], 9), row[2], row[3], row[4]) for row in rows]
        return None if got_join == want_join else f"rewards of rollout {r}: {got_join} != {want_join}"
    if name == "llm_calls_task":
        task = task_of(r)
        members = [n for n in _task_rollouts(task, total_rollouts)]
        want_calls = [(rollout_id(n), span_id(n, s)) for n in members for s in range(1, SPANS_PER_ROLLOUT, 2)]
        got_calls = [(row[0], row[1]) for row in rows]
        return (
            None if got_calls == want_calls else f"llm calls of {task}: {len(got_calls)} rows, want {len(want_calls)}"
        )
    raise KeyError(name)


def _task_rollouts(task: str, total_rollouts: int) -> list[int]:
    """Rollout numbers of ``task``, in time order."""
    t = int(task.split("-")[1])
    out: list[int] = []
    for first in range(t * GROUP_SIZE, total_rollouts, GROUP_SIZE * N_TASKS):
        out.extend(range(first, min(first + GROUP_SIZE, total_rollouts)))
    return out


def picks(total_rollouts: int, repeats: int) -> list[int]:
    """``repeats`` rollout numbers spread over the file, oldest to newest."""
    if repeats <= 1:
        return [total_rollouts - 1]
    return [round(i * (total_rollouts - 1) / (repeats - 1)) for i in range(repeats)]


def time_lookups(path: Path, total_rollouts: int, repeats: int) -> tuple[dict[str, list[float]], list[str]]:
    """Milliseconds of each lookup (``repeats`` runs, interleaved, one warm-up round), and the
    failures of the row checks."""
    from agent_rl_plugin.store import open_reader

    connection = open_reader(str(path))
    failures: list[str] = []
    chosen = picks(total_rollouts, repeats + 1)
    turn = {name: iter(chosen) for name in LOOKUP_SQL}

    def runner(name: str) -> Callable[[], float]:
        def run_once() -> float:
            r = next(turn[name])
            sql = LOOKUP_SQL[name](task_of(r) if name == "llm_calls_task" else rollout_id(r))
            started = time.perf_counter()
            rows = connection.execute(sql).fetchall()
            seconds = time.perf_counter() - started
            problem = check_lookup(name, r, rows, total_rollouts)
            if problem:
                failures.append(f"{name}: {problem}")
            return seconds * 1000

        return run_once

    try:
        lookups = [name for name in LOOKUP_SQL if name != "rollouts_list"]
        samples = interleave({name: runner(name) for name in lookups}, repeats=repeats, warmup=1)
        # the list aggregates every span (seconds at 10M spans): fewer runs
        samples.update(interleave({"rollouts_list": runner("rollouts_list")}, repeats=min(3, repeats)))
    finally:
        connection.close()
    return samples, failures


def time_kto(path: Path, total_rollouts: int, where: str | None, repeats: int) -> tuple[list[float], str | None]:
    """Seconds of ``build_kto_dataset(path, where)`` (``repeats`` runs) and a check of its rows
    (ids, labels and rewards of every row against the generator's)."""
    from agent_rl_plugin.data import build_kto_dataset

    samples, problem = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        dataset = build_kto_dataset(str(path), where=where)
        samples.append(time.perf_counter() - started)
    members = range(total_rollouts) if where is None else _task_rollouts(where.split("'")[1], total_rollouts)
    want = {rollout_id(r): (reward_of(r) >= 0.5, round(reward_of(r), 9)) for r in members}
    got = {
        row["rollout_id"]: (row["label"], round(row["reward"], 9))
        for row in dataset.select_columns(["rollout_id", "label", "reward"]).to_list()
    }
    if got != want:
        problem = f"{len(got)} rows, want {len(want)}; first differing: " + str(
            next(((k, got.get(k), v) for k, v in want.items() if got.get(k) != v), None)
        )
    return samples, problem


# --- the row -------------------------------------------------------------------------------
@dataclass
class SizeResult:
    """What one size measured."""

    spans: int
    ingest_rates: list[float]
    reference_rates: list[float]
    reference_spans: int
    lookups_ms: dict[str, list[float]]
    kto_task_s: list[float]
    kto_all_s: list[float]
    file_bytes: int
    failures: list[str]

    def summary(self) -> dict[str, Any]:
        return {
            "spans": self.spans,
            "ingest_spans_per_s": median(self.ingest_rates),
            "reference_spans_per_s": median(self.reference_rates),
            "reference_spans": self.reference_spans,
            "ingest_slowdown": ratio(median(self.reference_rates), median(self.ingest_rates)),
            **{f"{name}_ms": median(values) for name, values in self.lookups_ms.items()},
            "kto_task_s": median(self.kto_task_s),
            "kto_all_s": median(self.kto_all_s),
            "bytes_per_span": self.file_bytes / self.spans,
            "file_mb": self.file_bytes / 2**20,
        }


def timed_ingest(
    big: Growth, reference: Growth, rounds: int, batch_rollouts: int, per_round: int = 2
) -> tuple[list[float], list[float]]:
    """Spans/s of ``rounds`` rounds of ``per_round`` timed batches into each file, alternating
    (big, reference, big, ... then reference first): the same load hits both. Each sample is
    a round's spans over its seconds, so the checkpoints DuckDB makes along the way count."""
    from agent_rl_plugin.store.connection import connect_writer

    connections = {id(g): connect_writer(str(g.path)) for g in (big, reference)}
    rates: dict[int, list[float]] = {id(big): [], id(reference): []}
    spans = batch_rollouts * SPANS_PER_ROLLOUT * per_round
    try:
        for i in range(rounds):
            seconds = {id(big): 0.0, id(reference): 0.0}
            order = [big, reference] if i % 2 == 0 else [reference, big]
            for _ in range(per_round):
                for growth in order:
                    seconds[id(growth)] += growth.append(connections[id(growth)], batch_rollouts)
            for key, value in seconds.items():
                rates[key].append(spans / value)
        for connection in connections.values():
            connection.execute("CHECKPOINT")
    finally:
        for connection in connections.values():
            connection.close()
    return rates[id(big)], rates[id(reference)]


def _build(growth: Growth, rollouts: int) -> None:
    from agent_rl_plugin.store.connection import connect_writer

    connection = connect_writer(str(growth.path))
    try:
        growth.build_to(connection, rollouts)
    finally:
        connection.close()


def measure(
    sizes: tuple[int, ...],
    folder: Path,
    repeats: int = REPEATS,
    rounds: int = TIMED_ROUNDS,
    batch_rollouts: int = TIMED_ROLLOUTS,
    kto_repeats: int = 3,
    kto_all_max: int = KTO_ALL_MAX_SPANS,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[list[SizeResult], dict[str, float]]:
    """Grow one file in ``folder`` through ``sizes`` (spans, ascending, multiples of 10) and
    measure each size, timing ingest against a reference file of ``sizes[0]`` spans (see
    :func:`timed_ingest`); returns the results and the build's totals. The files are removed."""
    big, reference = Growth(folder / "growth.duckdb"), Growth(folder / "reference.duckdb")
    timed = rounds * 2 * batch_rollouts
    if sizes[0] // SPANS_PER_ROLLOUT < timed or list(sizes) != sorted(sizes):
        raise ValueError(f"sizes must be ascending and at least {timed * SPANS_PER_ROLLOUT} spans")
    results = []
    try:
        _build(reference, sizes[0] // SPANS_PER_ROLLOUT - timed)
        for spans in sizes:
            rollouts = spans // SPANS_PER_ROLLOUT
            started = time.perf_counter()
            _build(big, rollouts - timed)
            built = time.perf_counter() - started
            rates, reference_rates = timed_ingest(big, reference, rounds, batch_rollouts)
            log(
                f"growth: {spans:,} spans (built in {built:.1f} s): ingest {median(rates):,.0f} spans/s, "
                f"into the {reference.rollouts * SPANS_PER_ROLLOUT:,}-span reference {median(reference_rates):,.0f}"
            )
            size = big.file_bytes()
            lookups, failures = time_lookups(big.path, rollouts, repeats)
            task = task_of(rollouts // 2)
            kto_task, problem = time_kto(big.path, rollouts, f"task_id = {_q(task)}", kto_repeats)
            failures += [f"kto_task: {problem}"] if problem else []
            kto_all: list[float] = []
            if spans <= kto_all_max:
                kto_all, problem = time_kto(big.path, rollouts, None, kto_repeats)
                failures += [f"kto_all: {problem}"] if problem else []
            counted = _counts(big.path)
            if counted != (spans, 2 * rollouts) or big.inserted != spans:
                failures.append(
                    f"store holds {counted} (spans, rewards), {big.inserted} inserted; want ({spans}, {2 * rollouts})"
                )
            results.append(
                SizeResult(
                    spans,
                    rates,
                    reference_rates,
                    reference.rollouts * SPANS_PER_ROLLOUT,
                    lookups,
                    kto_task,
                    kto_all,
                    size,
                    failures,
                )
            )
            log(
                "growth: "
                + json.dumps(
                    {
                        k: round(v, 3) if isinstance(v, float) and not math.isnan(v) else v
                        for k, v in results[-1].summary().items()
                    }
                )
            )
    finally:
        for growth in (big, reference):
            growth.generator.close()
            for leftover in (growth.path, Path(f"{growth.path}.wal")):
                leftover.unlink(missing_ok=True)
            shutil.rmtree(f"{growth.path}.spool", ignore_errors=True)
    totals = {"insert_s": big.build_s, "generate_s": big.generate_s}
    return results, totals


def _counts(path: Path) -> tuple[int, int]:
    connection = duckdb.connect(str(path), read_only=True)
    try:
        row = connection.execute("select (select count(*) from spans), (select count(*) from rewards)").fetchone()
    finally:
        connection.close()
    assert row is not None
    return int(row[0]), int(row[1])


def fill_row(row: Row, results: list[SizeResult], totals: dict[str, float], batch_rollouts: int) -> None:
    """Measures, ratios, targets, checks and info of the ``growth`` row from ``results``."""
    row.sizes.update(
        spans=[r.spans for r in results],
        timed_batch_spans=batch_rollouts * SPANS_PER_ROLLOUT,
        build_batch_spans=BUILD_ROLLOUTS * SPANS_PER_ROLLOUT,
    )
    first, last = results[0], results[-1]
    label = {r.spans: f"{r.spans / 1e6:g}M" if r.spans >= 1_000_000 else f"{r.spans // 1000}k" for r in results}
    batch = row.sizes["timed_batch_spans"]
    row.value = Measure(
        f"ingest into the {label[last.spans]}-span file",
        "spans/s",
        last.ingest_rates,
        note=f"rounds of 2 batches of {batch:,} spans, interleaved with the reference",
    )
    row.baselines.append(
        Measure(
            f"ingest into a {last.reference_spans // 1000}k-span reference file, same rounds",
            "spans/s",
            last.reference_rates,
        )
    )
    row.baselines.append(
        Measure(
            f"ingest into the {label[first.spans]}-span file",
            "spans/s",
            first.ingest_rates,
            note="measured earlier in the run",
        )
    )
    for name in ONE_ROLLOUT + ("rollouts_list",):
        row.baselines.append(Measure(f"{name} at {label[last.spans]}", "ms", last.lookups_ms[name]))
    for result in results:
        row.ratios[f"ingest reference / {label[result.spans]} file"] = ratio(
            median(result.reference_rates), median(result.ingest_rates)
        )
    slowdown = row.ratios[f"ingest reference / {label[last.spans]} file"]
    row.target(f"ingest slow-down at {label[last.spans]} vs the reference", slowdown, "<=", INGEST_GROWTH_LIMIT)
    for name in ONE_ROLLOUT:
        row.target(f"{name} ms at {label[last.spans]}", median(last.lookups_ms[name]), "<", LOOKUP_TARGET_MS)
    at_1m = next((r for r in results if r.spans == 1_000_000), None)
    if at_1m is not None and at_1m.kto_all_s:
        row.baselines.append(Measure("build_kto_dataset at 1M", "s", at_1m.kto_all_s))
        row.target("build_kto_dataset s at 1M", median(at_1m.kto_all_s), "<", KTO_1M_TARGET_S)
    for result in results:
        row.check(
            f"{label[result.spans]}: every lookup returned the generator's rows",
            not result.failures,
            "; ".join(result.failures)[:2000],
        )
    row.info["sizes"] = [r.summary() for r in results]
    row.info.update({f"{k}_total": v for k, v in totals.items()})


def free_gb(folder: Path) -> float:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize / 2**30


def run(ctx: Context) -> Row:
    sizes = ctx.size(FULL_SIZES, QUICK_SIZES)
    row = Row(id="growth")
    folder = ctx.folder("growth")
    need_gb = sizes[-1] * 600 / 2**30 + 1  # ~450 bytes per span on disk, and room to spare
    if free_gb(folder) < need_gb:
        row.skipped = f"needs ~{need_gb:.0f} GB free in {folder}, has {free_gb(folder):.0f} GB"
        return row
    results, totals = measure(
        sizes,
        folder,
        repeats=ctx.size(REPEATS, 5),
        rounds=ctx.size(TIMED_ROUNDS, 2),
        batch_rollouts=ctx.size(TIMED_ROLLOUTS, 250),
        kto_repeats=ctx.size(3, 2),
        log=ctx.log,
    )
    fill_row(row, results, totals, ctx.size(TIMED_ROLLOUTS, 250))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(str(s) for s in FULL_SIZES), help="spans, comma-separated")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="runs of each lookup (median)")
    parser.add_argument("--rounds", type=int, default=TIMED_ROUNDS, help="timed ingest rounds per size")
    parser.add_argument("--batch-rollouts", type=int, default=TIMED_ROLLOUTS, help="rollouts per timed batch")
    parser.add_argument("--json", dest="json_path", default=None, help="write the per-size results here")
    parser.add_argument("--dir", default=None, help="folder for the store file (default: a temporary one)")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="agent-rl-growth-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        results, totals = measure(
            sizes,
            folder,
            repeats=args.repeats,
            rounds=args.rounds,
            batch_rollouts=args.batch_rollouts,
            log=lambda m: print(m, file=sys.stderr),
        )
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    summaries = [r.summary() for r in results]
    for s in summaries:
        print(json.dumps(s))
    for r in results:
        for failure in r.failures:
            print(f"FAILED at {r.spans:,}: {failure}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"sizes": summaries, **totals}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
