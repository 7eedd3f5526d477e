"""Building KTO and GRPO datasets from the store vs. pandas over one JSON file per trace.

Both sides build the same rows (prompt and completion message lists split at the first
assistant message of the last LLM call's conversation, the combined episode reward: per
reward name the latest value, emitted ones summed, then the mean over names; KTO label
``reward >= 0.5``; GRPO groups of ``group_id`` with at least 2 rollouts, oldest first, the
first rollout's prompt, advantages ``(r - mean) / (std + 1e-4)``, 0 for all-equal groups):

* **ours**: :func:`agent_rl_plugin.data.build_datasets` (KTO and GRPO from one pass: the
  episode rows built once, as the baseline builds its episodes once) on a DuckDB store holding
  ``--rollouts`` synthetic rollouts of 10 spans each (1M spans for 100k rollouts), written by
  :func:`agent_rl_plugin.data.synthetic.synthesize_store`, plus 2 rewards each; one
  :func:`~agent_rl_plugin.data.build_kto_dataset` plus one
  :func:`~agent_rl_plugin.data.build_grpo_dataset` call (episodes built twice) is measured and
  shown too, and must give the same tables;
* **baseline**: the same traces as one JSON file per trace (spans with their attributes, and
  the trace's rewards: the layout of the MassGen RL design's JSON trace store), loaded into
  pandas DataFrames (``json.load`` per file, then ``DataFrame.from_records``: faster than
  ``pd.read_json`` per file, which is measured on a sample and reported), turned into the
  same rows with pandas (filters, sorts, group-bys) and plain Python for the message lists,
  then into ``datasets.Dataset`` (with a random fingerprint, as ours).

Only the builds are timed (the store and the files are made first). Both results are
compared row by row. A plain-Python baseline without pandas (:func:`baseline_rows`) is kept
for ``tests/test_dataset_bench.py``.

    python bench/dataset_build.py                      # 100k rollouts, 1M spans
    python bench/dataset_build.py --rollouts 10000 --threads 1   # DuckDB on one core
    python -m bench --only dataset [--quick]           # as a row of the benchmark table
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent_rl_plugin.data import BuildReport, build_datasets, build_grpo_dataset, build_kto_dataset  # noqa: E402
from agent_rl_plugin.data.synthetic import synthesize_store  # noqa: E402
from bench.harness import Context, Measure, Row, interleave, ratio  # noqa: E402

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
INPUT_MESSAGES, OUTPUT_MESSAGES = "gen_ai.input.messages", "gen_ai.output.messages"
THRESHOLD = 0.5
TRL_EPSILON = 1e-4


# --- set-up -------------------------------------------------------------------------------
def make_store(path: Path, rollouts: int) -> float:
    started = time.perf_counter()
    synthesize_store(path, rollouts=rollouts, llm_calls=5, group_size=4)
    return time.perf_counter() - started


def export_files(store: Path, folder: Path) -> float:
    """One JSON file per trace: ``{"spans": [...], "rewards": [...]}`` (attributes as objects)."""
    started = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    connection = duckdb.connect(str(store), read_only=True)
    try:
        result = connection.execute(
            """
            WITH s AS (
                SELECT trace_id, to_json(list(struct_pack(
                    trace_id := trace_id, span_id := span_id, parent_span_id := parent_span_id, name := name,
                    start_unix_nano := start_unix_nano, end_unix_nano := end_unix_nano,
                    status_code := status_code, operation := operation, span_kind := span_kind,
                    rollout_id := rollout_id, task_id := task_id, group_id := group_id,
                    is_rollout_root := is_rollout_root, attributes := attributes))) AS spans
                FROM spans GROUP BY trace_id
            ),
            r AS (
                SELECT rollout_id, to_json(list(struct_pack(rollout_id := rollout_id, step_index := step_index,
                    name := name, value := value, source := source, error := error,
                    created_at := CAST(created_at AS VARCHAR)))) AS rewards
                FROM rewards GROUP BY rollout_id
            )
            SELECT s.trace_id, '{"spans": ' || s.spans || ', "rewards": ' || coalesce(r.rewards, '[]') || '}'
            FROM s LEFT JOIN r ON r.rollout_id = s.trace_id
            """
        )
        while True:
            batch = result.fetchmany(10_000)
            if not batch:
                break
            for trace_id, text in batch:
                (folder / f"{trace_id}.json").write_text(text, encoding="utf-8")
    finally:
        connection.close()
    return time.perf_counter() - started


# --- message lists (shared by both baselines) ---------------------------------------------
def _arguments(value: Any) -> str:
    if value is None:
        return "{}"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text") or p.get("content") or "" for p in value if isinstance(p, dict))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def normalize(text: str | None) -> list[dict[str, Any]]:
    try:
        messages = json.loads(text) if text else []
    except ValueError:
        return []
    out = []
    for m in messages if isinstance(messages, list) else []:
        calls = None
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                f = c.get("function") or {}
                calls.append(
                    {
                        "id": c.get("id"),
                        "type": "function",
                        "function": {
                            "name": f.get("name") or c.get("name") or "",
                            "arguments": _arguments(f.get("arguments", c.get("arguments"))),
                        },
                    }
                )
        out.append(
            {
                "role": m.get("role") or "user",
                "content": _content(m.get("content")),
                "tool_calls": calls,
                "tool_call_id": m.get("tool_call_id"),
                "name": m.get("name"),
            }
        )
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["role"] == b["role"] and a["content"] == b["content"]


def conversation_of(
    last_attributes: dict[str, Any], llm_spans: list[dict[str, Any]] | None, n_llm: int
) -> list[dict[str, Any]]:
    """The last LLM call's input + output; earlier assistant turns the agent did not send back
    are restored from the earlier calls' outputs (``llm_spans``: the trace's LLM spans in
    time order, needed only then)."""
    base = normalize(last_attributes.get(INPUT_MESSAGES))
    out = normalize(last_attributes.get(OUTPUT_MESSAGES))
    assistants = sum(1 for m in base if m["role"] == "assistant")
    if n_llm > 1 and assistants < n_llm - 1 and llm_spans:
        inserts = {}
        for span in llm_spans[:-1]:
            seen = normalize(span["attributes"].get(INPUT_MESSAGES))
            msgs = normalize(span["attributes"].get(OUTPUT_MESSAGES))
            n = len(seen)
            if (
                1 <= n < len(base)
                and msgs
                and base[n]["role"] != "assistant"
                and _same(base[n - 1], seen[-1])
                and _same(base[0], seen[0])
            ):
                inserts[n] = msgs
        conversation = []
        for i, message in enumerate(base):
            conversation.extend(inserts.get(i, []))
            conversation.append(message)
        return conversation + out
    return base + out


def _split(conversation: list[dict[str, Any]]) -> int | None:
    return next((i for i, m in enumerate(conversation) if m["role"] == "assistant"), None)


# --- the plain-Python baseline (KTO only; kept for tests/test_dataset_bench.py) ------------
def baseline_rows(folder: Path, threshold: float = THRESHOLD) -> list[dict[str, Any]]:
    """KTO rows from the per-trace JSON files, with the store builder's rules, in plain Python."""
    episodes = []
    for file in os.scandir(folder):
        with open(file.path, encoding="utf-8") as handle:
            trace = json.load(handle)
        spans = trace["spans"]
        root = min((s for s in spans if s["is_rollout_root"]), key=lambda s: s["start_unix_nano"], default=None)
        if root is None:
            continue
        llm = sorted(
            (s for s in spans if s["operation"] in LLM_OPERATIONS or s["span_kind"] == "llm"),
            key=lambda s: (s["start_unix_nano"], s["span_id"]),
        )
        if not llm:
            continue
        conversation = conversation_of(llm[-1]["attributes"], llm, len(llm))
        k = _split(conversation)
        if not k:
            continue
        latest: dict[str, tuple[str, float]] = {}
        emitted: dict[str, float] = {}
        for reward in trace["rewards"]:
            if reward["step_index"] is not None or reward["error"] is not None or reward["value"] is None:
                continue
            if reward["source"] == "emitted":
                emitted[reward["name"]] = emitted.get(reward["name"], 0.0) + reward["value"]
            elif reward["name"] not in latest or reward["created_at"] > latest[reward["name"]][0]:
                latest[reward["name"]] = (reward["created_at"], reward["value"])
        values = [v for _, v in latest.values()] + list(emitted.values())
        if not values:
            continue
        reward = sum(values) / len(values)
        episodes.append(
            (
                root["start_unix_nano"],
                root["rollout_id"],
                {
                    "prompt": conversation[:k],
                    "completion": conversation[k:],
                    "label": reward >= threshold,
                    "rollout_id": root["rollout_id"],
                    "group_id": root["group_id"],
                    "task_id": root["task_id"],
                    "reward": reward,
                },
            )
        )
    episodes.sort(key=lambda e: (e[0], e[1]))
    return [row for _, _, row in episodes]


# --- the pandas baseline ------------------------------------------------------------------
REWARD_COLUMNS = ["rollout_id", "step_index", "name", "value", "source", "error", "created_at"]


def load_traces_pandas(folder: Path):
    """``(spans, rewards)`` DataFrames from the per-trace JSON files."""
    import pandas as pd

    spans: list[dict[str, Any]] = []
    rewards: list[dict[str, Any]] = []
    for entry in os.scandir(folder):
        with open(entry.path, encoding="utf-8") as handle:
            trace = json.load(handle)
        spans.extend(trace["spans"])
        rewards.extend(trace["rewards"])
    return pd.DataFrame.from_records(spans), pd.DataFrame.from_records(rewards, columns=REWARD_COLUMNS)


def pandas_episodes(spans, rewards, threshold: float = THRESHOLD):
    """One row per usable rollout, oldest first: prompt, completion, reward, label, ids."""
    import pandas as pd

    roots = spans[spans["is_rollout_root"]].sort_values("start_unix_nano", kind="stable")
    roots = roots.drop_duplicates("trace_id")[["trace_id", "rollout_id", "group_id", "task_id", "start_unix_nano"]]
    llm = spans[spans["operation"].isin(LLM_OPERATIONS) | (spans["span_kind"] == "llm")]
    llm = llm.sort_values(["trace_id", "start_unix_nano", "span_id"])
    counts = llm.groupby("trace_id", sort=False).size()
    last = llm.drop_duplicates("trace_id", keep="last")
    n_llm = counts.reindex(last["trace_id"]).to_numpy()
    needs_all = set()  # traces whose earlier turns may need restoring: their LLM spans, by trace
    for trace_id, attributes, n in zip(last["trace_id"], last["attributes"], n_llm):
        if n > 1 and sum(1 for m in normalize(attributes.get(INPUT_MESSAGES)) if m["role"] == "assistant") < n - 1:
            needs_all.add(trace_id)
    by_trace = (
        {t: g.to_dict("records") for t, g in llm[llm["trace_id"].isin(needs_all)].groupby("trace_id")}
        if needs_all
        else {}
    )
    ids, prompts, completions = [], [], []
    for trace_id, attributes, n in zip(last["trace_id"], last["attributes"], n_llm):
        conversation = conversation_of(attributes, by_trace.get(trace_id), int(n))
        k = _split(conversation)
        if not k:
            continue
        ids.append(trace_id)
        prompts.append(conversation[:k])
        completions.append(conversation[k:])
    conversations = pd.DataFrame({"trace_id": ids, "prompt": prompts, "completion": completions})

    usable = rewards[rewards["step_index"].isna() & rewards["error"].isna() & rewards["value"].notna()]
    usable = usable.sort_values("created_at", kind="stable").assign(emitted=lambda d: d["source"] == "emitted")
    per = usable.groupby(["rollout_id", "name"], sort=False)
    per_name = per["value"].sum().where(per["emitted"].all(), per["value"].last())
    combined = per_name.groupby(level=0).mean().rename("reward").reset_index()

    episodes = roots.merge(conversations, on="trace_id").merge(combined, on="rollout_id")
    episodes = episodes.sort_values(["start_unix_nano", "rollout_id"], kind="stable").reset_index(drop=True)
    episodes["label"] = episodes["reward"] >= threshold
    return episodes


def pandas_kto(episodes):
    return episodes[["prompt", "completion", "label", "rollout_id", "group_id", "task_id", "reward"]]


def pandas_grpo(episodes, min_group_size: int = 2):
    import numpy as np

    ep = episodes.assign(group_key=episodes["group_id"].fillna(episodes["task_id"]).fillna(episodes["rollout_id"]))
    size = ep.groupby("group_key", sort=False)["reward"].transform("size")
    ep = ep[size >= min_group_size]
    g = ep.groupby("group_key", sort=False)["reward"]
    mean, std = g.transform("mean"), g.transform("std")
    equal = g.transform("min") == g.transform("max")
    ep = ep.assign(advantage=np.where(equal, 0.0, (ep["reward"] - mean) / (std + TRL_EPSILON)))
    grouped = ep.groupby("group_key", sort=False)
    out = (
        grouped.agg(
            prompt=("prompt", "first"),
            completions=("completion", list),
            rewards=("reward", list),
            advantages=("advantage", list),
            task_id=("task_id", "first"),
            rollout_ids=("rollout_id", list),
        )
        .reset_index()
        .rename(columns={"group_key": "group_id"})
    )
    return out[["prompt", "completions", "rewards", "advantages", "group_id", "task_id", "rollout_ids"]]


def _to_dataset(frame):
    import datasets
    import pyarrow as pa

    return datasets.Dataset(pa.Table.from_pandas(frame, preserve_index=False), fingerprint=uuid.uuid4().hex)


def pandas_datasets(folder: Path) -> tuple[Any, Any, dict[str, float]]:
    """``(kto, grpo, timings)``: both datasets from the JSON files with pandas."""
    timings = {}
    started = time.perf_counter()
    spans, rewards = load_traces_pandas(folder)
    timings["load"] = time.perf_counter() - started
    episodes = pandas_episodes(spans, rewards)
    timings["episodes"] = time.perf_counter() - started - timings["load"]
    kto = _to_dataset(pandas_kto(episodes))
    grpo = _to_dataset(pandas_grpo(episodes))
    timings["total"] = time.perf_counter() - started
    return kto, grpo, timings


def read_json_per_file_s(folder: Path, sample: int = 200) -> float:
    """Seconds per file of ``pd.read_json`` on a sample (the pandas-native reader; slower than
    ``json.load`` + ``DataFrame.from_records``, so it is not the baseline's path)."""
    import pandas as pd

    files = [e.path for e in os.scandir(folder)][:sample]
    started = time.perf_counter()
    for path in files:
        pd.read_json(path, orient="columns", typ="series")
    return (time.perf_counter() - started) / max(1, len(files))


# --- ours ---------------------------------------------------------------------------------
def store_datasets(store: Path, threads: int | None = None) -> tuple[Any, Any]:
    """Both datasets from the store with :func:`agent_rl_plugin.data.build_datasets` (one open,
    the episode rows built once for both, as the pandas baseline builds its episodes once);
    ``threads`` limits DuckDB's threads."""
    if threads is None:
        both = build_datasets(store)
        return both["kto"], both["grpo"]
    from agent_rl_plugin.store import open_reader

    connection = open_reader(str(store))
    try:
        connection.execute(f"SET threads = {int(threads)}")
        both = build_datasets(connection)
    finally:
        connection.close()
    return both["kto"], both["grpo"]


def store_datasets_separately(store: Path) -> tuple[Any, Any]:
    """Both datasets with one call each (each opens the store and builds its episode rows, as
    two ``agent-rl dataset build`` commands do): reported next to the row, not its value."""
    return build_kto_dataset(store, report=BuildReport()), build_grpo_dataset(store, report=BuildReport())


def time_store(store: Path, threads: int | None = None) -> tuple[float, Any]:
    """Seconds to build the KTO dataset from the store (opening and closing it included)."""
    started = time.perf_counter()
    report = BuildReport()
    if threads is None:
        dataset = build_kto_dataset(store, report=report)
    else:
        from agent_rl_plugin.store import open_reader

        connection = open_reader(str(store))
        try:
            connection.execute(f"SET threads = {int(threads)}")
            dataset = build_kto_dataset(connection, report=report)
        finally:
            connection.close()
    return time.perf_counter() - started, dataset


def time_baseline(folder: Path) -> tuple[float, float, Any]:
    """The plain-Python KTO baseline: (seconds to rows, seconds to a Dataset, the Dataset)."""
    import datasets

    started = time.perf_counter()
    rows = baseline_rows(folder)
    rows_s = time.perf_counter() - started
    dataset = datasets.Dataset.from_list(rows)
    return rows_s, time.perf_counter() - started, dataset


# --- checks -------------------------------------------------------------------------------
def _sample_rows(n: int, limit: int | None) -> list[int]:
    if limit is None or n <= limit:
        return list(range(n))
    step = n / limit
    return sorted({int(i * step) for i in range(limit)} | {n - 1})


def check(store_ds: Any, baseline_ds: Any, limit: int | None = None) -> None:
    """KTO rows equal (all rows, or ``limit`` spread over the dataset; labels and rewards of
    every row)."""
    assert len(store_ds) == len(baseline_ds), f"{len(store_ds)} store rows vs {len(baseline_ds)} baseline rows"
    for column in ("rollout_id", "label"):
        assert store_ds[column] == baseline_ds[column], f"{column} differs"
    assert all(abs(a - b) < 1e-9 for a, b in zip(store_ds["reward"], baseline_ds["reward"])), "reward differs"
    rows = _sample_rows(len(store_ds), limit)
    left, right = store_ds.select(rows).to_list(), baseline_ds.select(rows).to_list()
    for a, b in zip(left, right):
        for key in ("prompt", "completion"):
            assert a[key] == b[key], f"rollout {a['rollout_id']}: {key} differs"


def check_grpo(store_ds: Any, baseline_ds: Any, limit: int | None = None) -> None:
    """GRPO groups equal: ids, rewards and advantages (1e-9) of every group, messages of all
    or ``limit`` groups."""
    assert len(store_ds) == len(baseline_ds), f"{len(store_ds)} store groups vs {len(baseline_ds)} baseline groups"
    assert store_ds["group_id"] == baseline_ds["group_id"], "group order differs"
    assert store_ds["rollout_ids"] == baseline_ds["rollout_ids"], "group members differ"
    for column in ("rewards", "advantages"):
        for a, b in zip(store_ds[column], baseline_ds[column]):
            assert len(a) == len(b) and all(abs(x - y) < 1e-9 for x, y in zip(a, b)), f"{column} differ"
    rows = _sample_rows(len(store_ds), limit)
    left, right = store_ds.select(rows).to_list(), baseline_ds.select(rows).to_list()
    for a, b in zip(left, right):
        for key in ("prompt", "completions"):
            assert a[key] == b[key], f"group {a['group_id']}: {key} differs"


# --- the row ------------------------------------------------------------------------------
def run(ctx: Context) -> Row:
    rollouts = ctx.size(100_000, 2_000)
    repeats_ours, repeats_base = ctx.size((3, 2), (3, 2))
    row = Row(id="dataset", sizes={"rollouts": rollouts, "spans": rollouts * 10, "groups_of": 4})
    work = ctx.scratch("dataset", need_mb=rollouts * 15 // 1000 + 50)  # about 12 kB per trace, files and store
    try:
        return _run(ctx, row, work, rollouts, repeats_ours, repeats_base)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(ctx: Context, row: Row, work: Path, rollouts: int, repeats_ours: int, repeats_base: int) -> Row:
    store, folder = work / "store.duckdb", work / "traces"
    row.info["scratch"] = "RAM (/dev/shm)" if str(work).startswith("/dev/shm") else "disk"
    ctx.log(
        f"dataset: writing {rollouts:,} rollouts ({rollouts * 10:,} spans) and one JSON file per trace "
        f"into {row.info['scratch']}"
    )
    row.info["setup_store_s"] = make_store(store, rollouts)
    row.info["setup_files_s"] = export_files(store, folder)
    ctx.log(f"dataset: ours x{repeats_ours}, pandas x{repeats_base}, interleaved")

    import datasets  # noqa: F401  (imported before timing, by both sides)
    import pandas  # noqa: F401

    results: dict[str, Any] = {}
    pandas_timings: list[dict[str, float]] = []

    def ours() -> float:
        started = time.perf_counter()
        results["ours"] = store_datasets(store)
        return time.perf_counter() - started

    def baseline() -> float:
        kto, grpo, timings = pandas_datasets(folder)
        results["pandas"] = (kto, grpo)
        pandas_timings.append(timings)
        return timings["total"]

    def separately() -> float:
        started = time.perf_counter()
        results["separately"] = store_datasets_separately(store)
        return time.perf_counter() - started

    samples = interleave({"ours": ours, "pandas": baseline}, repeats=repeats_base)
    samples["ours"] += interleave({"ours": ours}, repeats=max(0, repeats_ours - repeats_base))["ours"]
    samples["separately"] = [separately()]  # once: shown, not part of the target
    row.value = Measure("KTO + GRPO from the store", "s", samples["ours"])
    row.baselines.append(Measure("pandas over JSON files", "s", samples["pandas"]))
    for part in ("load", "episodes"):
        row.baselines.append(Measure(f"  of which {part}", "s", [t[part] for t in pandas_timings]))
    speedup = ratio(row.baselines[0].median, row.value.median)
    row.ratios["pandas / ours"] = speedup
    separate = Measure("  ours, one call per dataset (episodes built twice)", "s", samples["separately"])
    row.baselines.append(separate)  # shown for transparency; the target is on build_datasets
    row.info["separate_calls_s"] = separate.median
    row.ratios["pandas / ours, one call per dataset"] = ratio(row.baselines[0].median, separate.median)
    row.target("speed-up over pandas", speedup, ">=", 20)

    (kto, grpo), (kto_b, grpo_b) = results["ours"], results["pandas"]
    kto_s, grpo_s = results["separately"]
    same = kto_s.data.table.equals(kto.data.table) and grpo_s.data.table.equals(grpo.data.table)
    row.check("one call per dataset: the same tables as build_datasets", same, "" if same else "tables differ")
    limit = ctx.size(5_000, None)
    for name, fn, a, b in (("KTO", check, kto, kto_b), ("GRPO", check_grpo, grpo, grpo_b)):
        try:
            fn(a, b, limit)
            ok, detail = True, ""
        except AssertionError as exc:
            ok, detail = False, str(exc)
        scope = "every row" if limit is None or len(a) <= limit else f"ids/rewards of every row, messages of {limit:,}"
        row.check(f"{name}: {len(a):,} rows equal to the baseline's ({scope})", ok, detail)
    row.info.update(
        kto_rows=len(kto),
        grpo_groups=len(grpo),
        spans_per_s_ours=rollouts * 10 / row.value.median,
        pd_read_json_per_file_s=read_json_per_file_s(folder),
        json_load_from_records_per_file_s=row.baselines[1].median / rollouts,
    )
    row.notes.append(
        f"pd.read_json per file: {row.info['pd_read_json_per_file_s'] * 1e3:.2f} ms vs json.load + "
        f"DataFrame.from_records {row.info['json_load_from_records_per_file_s'] * 1e3:.2f} ms per file: "
        "the baseline uses the faster"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000, help="rollouts (10 spans each)")
    parser.add_argument("--workdir", default=None, help="keep the store and files here (reused when present)")
    parser.add_argument("--repeat", type=int, default=3, help="builds of each side (medians reported)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: one per core)")
    parser.add_argument(
        "--check", action="store_true", help="(kept for old command lines: results are always compared)"
    )
    args = parser.parse_args()
    temporary = args.workdir is None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="arl-dsbench-")) / f"r{args.rollouts}"
    work.mkdir(parents=True, exist_ok=True)
    store, folder = work / "store.duckdb", work / "traces"
    try:
        if not store.exists():
            print(f"writing {args.rollouts} rollouts ({args.rollouts * 10} spans) into {store} ...", flush=True)
            print(f"  store: {make_store(store, args.rollouts):.1f} s", flush=True)
        if not folder.exists():
            print(f"  trace files: {export_files(store, folder):.1f} s", flush=True)
        ours, base = [], []
        for _ in range(max(1, args.repeat)):
            started = time.perf_counter()
            kto, grpo = store_datasets(store, args.threads)
            ours.append(time.perf_counter() - started)
            kto_b, grpo_b, timings = pandas_datasets(folder)
            base.append(timings["total"])
        ours.sort()
        base.sort()
        print(
            f"ours (store -> KTO + GRPO): median {ours[len(ours) // 2]:.2f} s; "
            f"pandas (JSON files -> KTO + GRPO): median {base[len(base) // 2]:.2f} s; "
            f"speed-up {base[len(base) // 2] / ours[len(ours) // 2]:.1f}x; {os.cpu_count()} CPUs"
        )
        check(kto, kto_b)
        check_grpo(grpo, grpo_b)
        print(f"check: {len(kto)} KTO rows and {len(grpo)} GRPO groups equal to the baseline's")
    finally:
        if temporary:
            shutil.rmtree(work.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
