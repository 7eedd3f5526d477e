"""What recording costs an agent before its first span: import, ``configure()``, one call.

Each sample is a fresh interpreter (interleaved):

* ``agent-rl``: ``import agent_rl_plugin``, ``configure(db=...)``, one ``@trace_agent`` call,
  ``flush()`` (the span is in the store when it returns);
* ``otel`` (the baseline): the same with the OpenTelemetry SDK alone: a ``TracerProvider``, a
  ``BatchSpanProcessor`` over an in-memory exporter, one span, ``force_flush()``.

Each child reports its wall time from its first line to the flush, its peak RSS and the modules
it loaded. Correctness: no CLI, typer, click, rich, pandas, torch, transformers, TRL, PEFT,
matplotlib or DuckDB module is loaded by the agent-rl child (its merges are the merger
process's; the contract ``tests/test_hot_path_imports.py`` also checks), and its span is stored.

    python bench/startup.py
    python -m bench --only startup [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, interleave, median  # noqa: E402

HEAVY = ("typer", "click", "rich", "pandas", "torch", "transformers", "trl", "peft", "matplotlib", "duckdb")

_REPORT = """
import json, resource, sys
heavy = {heavy!r}
print(json.dumps({{
    "seconds": elapsed,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "modules": len(sys.modules),
    "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy or m.startswith("agent_rl_plugin.cli")),
}}))
"""

AGENT_RL = """
import time
start = time.perf_counter()
import agent_rl_plugin as arl
arl.configure(db={db!r})

@arl.trace_agent
def agent(question):
    return question.upper()

agent("2 + 2?")
assert arl.flush()
elapsed = time.perf_counter() - start
"""

OTEL = """
import time
start = time.perf_counter()
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
with provider.get_tracer("bench").start_as_current_span("invoke_agent agent"):
    "2 + 2?".upper()
assert provider.force_flush()
elapsed = time.perf_counter() - start
"""


def run_child(code: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code + _REPORT.format(heavy=HEAVY)], capture_output=True,
                          text=True, timeout=300, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(f"startup child exited {proc.returncode}: {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stored_spans(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as connection:
        return connection.execute("select count(*) from spans").fetchone()[0]


def run(ctx: Context) -> Row:
    repeats = ctx.size(9, 3)
    row = Row(id="startup", sizes={"calls": 1})
    folder = ctx.folder("startup")
    ctx.log(f"startup: fresh interpreters, agent-rl and bare OTel, x{repeats}, interleaved")
    results: dict[str, list[dict[str, Any]]] = {"agent-rl": [], "otel": []}
    counter = iter(range(1000))
    dbs: list[Path] = []

    def agent_rl() -> float:
        db = folder / f"startup-{next(counter)}.duckdb"
        dbs.append(db)
        out = run_child(AGENT_RL.format(db=str(db)))
        results["agent-rl"].append(out)
        return out["seconds"]

    def otel() -> float:
        out = run_child(OTEL)
        results["otel"].append(out)
        return out["seconds"]

    samples = interleave({"agent-rl": agent_rl, "otel": otel}, repeats, warmup=1)
    ours = results["agent-rl"][-repeats:]
    base = results["otel"][-repeats:]
    row.value = Measure("import + configure() + 1 call + flush()", "s", samples["agent-rl"])
    row.baselines.append(Measure("bare OTel SDK: provider + 1 span + flush", "s", samples["otel"]))
    row.ratios["agent-rl / otel"] = median(samples["agent-rl"]) / median(samples["otel"])
    rss = [r["peak_rss_mb"] for r in ours]
    base_rss = [r["peak_rss_mb"] for r in base]
    row.target("added peak RSS over bare OTel, MB", median(rss) - median(base_rss), "<=", 100)
    heavy = sorted({m for r in ours for m in r["heavy"]})
    row.check(
        "no CLI, typer, rich, pandas, torch, transformers, TRL, PEFT, matplotlib or DuckDB loaded (the merger merges)",
        not heavy,
        f"loaded: {heavy[:20]}",
    )
    counts = [stored_spans(db) for db in dbs]
    row.check("every run stored its span", all(c >= 1 for c in counts), f"spans per run {counts}")
    row.info.update(
        peak_rss_mb=median(rss),
        otel_peak_rss_mb=median(base_rss),
        modules=median([r["modules"] for r in ours]),
        otel_modules=median([r["modules"] for r in base]),
    )
    return row


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-startup-"))
    print(json.dumps({"agent-rl": run_child(AGENT_RL.format(db=str(folder / "s.duckdb"))), "otel": run_child(OTEL)}))


if __name__ == "__main__":
    main()
