"""Time to build a KTO dataset from the store vs. a plain-Python baseline over JSON files.

Both sides build the same rows (prompt and completion message lists split at the first
assistant message of the last LLM call's conversation, the mean of the latest episode rewards,
a threshold label):

* **store**: :func:`agent_rl_plugin.data.build_kto_dataset` on a DuckDB store holding
  ``--rollouts`` synthetic rollouts of 10 spans each (1M spans for the default 100k), written by
  :func:`agent_rl_plugin.data.synthetic.synthesize_store` with SQL inserts, plus 2 rewards each;
* **baseline**: the same traces as one JSON file per trace (spans with their attributes, and
  the trace's rewards), read with ``json`` and turned into the same rows with lists and dicts
  (pandas is not used), then handed to ``datasets.Dataset.from_list``.

Only the builds are timed (the store and the files are made first, and reused from
``--workdir`` on later runs). ``--check`` compares the two results row by row.

    python bench/dataset_build.py                      # 100k rollouts, 1M spans
    python bench/dataset_build.py --rollouts 10000 --check
    python bench/dataset_build.py --workdir /tmp/dsbench --threads 1   # DuckDB on one core
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from agent_rl_plugin.data import BuildReport, build_kto_dataset
from agent_rl_plugin.data.synthetic import synthesize_store

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


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


# --- the baseline -------------------------------------------------------------------------
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
        return "".join(
            p.get("text") or p.get("content") or "" for p in value if isinstance(p, dict)
        )
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


def baseline_rows(folder: Path, threshold: float = 0.5) -> list[dict[str, Any]]:
    """KTO rows from the per-trace JSON files, with the store builder's rules."""
    episodes = []
    for file in os.scandir(folder):
        with open(file.path, encoding="utf-8") as handle:
            trace = json.load(handle)
        spans = trace["spans"]
        root = min((s for s in spans if s["is_rollout_root"]), key=lambda s: s["start_unix_nano"], default=None)
        if root is None:
            continue
        llm = [s for s in spans if s["operation"] in LLM_OPERATIONS or s["span_kind"] == "llm"]
        if not llm:
            continue
        last = max(llm, key=lambda s: (s["start_unix_nano"], s["span_id"]))
        base = normalize(last["attributes"].get("gen_ai.input.messages"))
        out = normalize(last["attributes"].get("gen_ai.output.messages"))
        assistants = sum(1 for m in base if m["role"] == "assistant")
        if len(llm) > 1 and assistants < len(llm) - 1:
            inserts = {}
            for span in sorted(llm, key=lambda s: (s["start_unix_nano"], s["span_id"])):
                if span is last:
                    continue
                seen = normalize(span["attributes"].get("gen_ai.input.messages"))
                msgs = normalize(span["attributes"].get("gen_ai.output.messages"))
                n = len(seen)
                same = lambda a, b: a["role"] == b["role"] and a["content"] == b["content"]  # noqa: E731
                if 1 <= n < len(base) and msgs and base[n]["role"] != "assistant" and same(base[n - 1], seen[-1]) and same(base[0], seen[0]):
                    inserts[n] = msgs
            conversation = []
            for i, message in enumerate(base):
                conversation.extend(inserts.get(i, []))
                conversation.append(message)
            conversation.extend(out)
        else:
            conversation = base + out
        k = next((i for i, m in enumerate(conversation) if m["role"] == "assistant"), None)
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


# --- timing -------------------------------------------------------------------------------
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
    import datasets

    started = time.perf_counter()
    rows = baseline_rows(folder)
    rows_s = time.perf_counter() - started
    dataset = datasets.Dataset.from_list(rows)
    return rows_s, time.perf_counter() - started, dataset


def check(store_ds: Any, baseline_ds: Any) -> None:
    a, b = store_ds.to_list(), baseline_ds.to_list()
    assert len(a) == len(b), f"{len(a)} store rows vs {len(b)} baseline rows"
    for left, right in zip(a, b):
        for key in ("rollout_id", "label", "prompt", "completion"):
            assert left[key] == right[key], f"rollout {left['rollout_id']}: {key} differs"
        assert abs(left["reward"] - right["reward"]) < 1e-9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=100_000, help="rollouts (10 spans each)")
    parser.add_argument("--workdir", default=None, help="keep the store and files here (reused when present)")
    parser.add_argument("--repeat", type=int, default=3, help="store builds to time (the best is reported)")
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads (default: one per core)")
    parser.add_argument("--baseline-repeat", type=int, default=2, help="baseline runs (the best is reported)")
    parser.add_argument("--check", action="store_true", help="compare the two datasets row by row")
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
        store_times = []
        for _ in range(max(1, args.repeat)):
            elapsed, store_ds = time_store(store, args.threads)
            store_times.append(elapsed)
        baseline_runs = [time_baseline(folder) for _ in range(max(1, args.baseline_repeat))]
        rows_s = min(run[0] for run in baseline_runs)
        baseline_s = min(run[1] for run in baseline_runs)
        baseline_ds = baseline_runs[-1][2]
        best = min(store_times)
        print(
            f"rollouts {args.rollouts}, spans {args.rollouts * 10}, rows {store_ds.num_rows}, cpus {os.cpu_count()}, "
            f"duckdb threads {args.threads or 'default'}"
        )
        print(f"store (DuckDB -> Arrow -> datasets): best {best:.2f} s of {', '.join(f'{t:.2f}' for t in store_times)}")
        print(
            f"baseline (JSON files -> rows): best {rows_s:.2f} s of {', '.join(f'{r[0]:.2f}' for r in baseline_runs)}; "
            f"with Dataset.from_list: {baseline_s:.2f} s"
        )
        print(f"speed-up: {rows_s / best:.1f}x (rows only), {baseline_s / best:.1f}x (to a Dataset)")
        if args.check:
            check(store_ds, baseline_ds)
            print("check: the two datasets are equal row by row")
    finally:
        if temporary:
            shutil.rmtree(work.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
