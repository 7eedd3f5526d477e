"""The growth curve as an SVG (docs/assets/growth.svg) and a markdown table, from the JSON that
``python bench/growth.py --json FILE`` writes.

    python bench/growth_plot.py FILE [--svg docs/assets/growth.svg]

Two panels on log-log axes against spans in the file: the one-rollout lookups and the list
(milliseconds, with the 50 ms target), and ingest (spans/s into the large file and into the
reference file of the same run). Needs matplotlib (a development tool, not a dependency).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

LOOKUPS = {
    "rollout_row_ms": "rollouts: one rollout",
    "rollout_steps_ms": "steps: one rollout",
    "rewards_join_ms": "rollouts x episode_rewards: one rollout",
    "llm_calls_task_ms": "llm_calls: one task (1/1000)",
    "rollouts_list_ms": "traces list (newest 20)",
}


def _size(spans: int) -> str:
    return f"{spans / 1e6:g}M" if spans >= 1_000_000 else f"{spans // 1000}k"


def _num(value: Any, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def markdown(sizes: list[dict[str, Any]]) -> str:
    """One row per size."""
    head = ["spans", "ingest spans/s (reference file)", "slow-down", "bytes/span"]
    head += [LOOKUPS[k] + " ms" for k in LOOKUPS] + ["KTO, one task, s", "KTO, every rollout, s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sizes:
        cells = [
            _size(s["spans"]),
            f"{_num(s['ingest_spans_per_s'])} ({_num(s['reference_spans_per_s'])} into {_size(s['reference_spans'])})",
            f"{s['ingest_slowdown']:.2f}x",
            _num(s["bytes_per_span"]),
        ]
        cells += [_num(s[k], 0 if s[k] >= 10 else 1) for k in LOOKUPS]
        cells += [_num(s["kto_task_s"], 2), _num(s["kto_all_s"], 2)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(sizes: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "agent-rl-growth"  # stable ids: the file changes only with the data
    spans = [s["spans"] for s in sizes]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label in LOOKUPS.items():
        left.plot(spans, [s[key] for s in sizes], marker="o", label=label)
    left.axhline(50, color="grey", linestyle="--", linewidth=1, label="target: 50 ms (one rollout)")
    left.set(xscale="log", yscale="log", xlabel="spans in the file", ylabel="ms (median)", title="lookups")
    left.legend(fontsize=7)
    right.plot(spans, [s["ingest_spans_per_s"] for s in sizes], marker="o", label="into the large file")
    right.plot(spans, [s["reference_spans_per_s"] for s in sizes], marker="s", label="into the reference file")
    right.set(xscale="log", xlabel="spans in the file", ylabel="spans/s (median)", title="bulk ingest, same rounds")
    right.set_ylim(bottom=0)
    right.legend(fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", metadata={"Date": None})
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json_path")
    parser.add_argument("--svg", default="docs/assets/growth.svg")
    parser.add_argument("--title", default="agent-rl store growth (python bench/growth.py)")
    args = parser.parse_args()
    sizes = json.loads(Path(args.json_path).read_text(encoding="utf-8"))["sizes"]
    plot(sizes, Path(args.svg), args.title)
    print(markdown(sizes))


if __name__ == "__main__":
    main()
