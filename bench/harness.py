"""The benchmark harness: repetitions, medians, ratios, targets, the machine, the table, the JSON.

Every row compares what we built with a baseline measured **in the same run** (same process
or same kind of subprocess, interleaved repetitions), so the ratio is what carries across
machines; absolute numbers on a shared 2-core machine are noisy.

A row module exposes ``run(ctx: Context) -> Row``; :data:`ROWS` lists them. A row fills:

* ``value``: our measurement (a :class:`Measure`: samples, median, unit);
* ``baselines``: the same work done another way (each a :class:`Measure`);
* ``ratios``: named ratios of medians (see :func:`ratio`);
* ``targets``: :class:`Target` checks on a value, a ratio or an info number (PASS / MISS);
* ``checks``: correctness checks (counts equal, results equal to 1e-6, zero loss); a failed
  check makes the row FAIL whatever the speed;
* ``info``: any other numbers worth keeping (sizes, breakdowns, shares).

Status of a row: ``ERROR`` (it raised or its process died), ``SKIP`` (``skipped`` set, e.g. no
GPU), ``FAIL`` (a correctness check failed), ``MISS`` (a target missed), else ``PASS``.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

SCHEMA_VERSION = 1

#: (row id, module, what it measures, its target in words). Order = order in the table.
ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("overhead", "bench.overhead", "time per decorated call (span + attributes + hand-off to the exporter)",
     "<= 1.25x a bare OTel span, <= 1.10x one with the same attributes"),
    ("capture", "bench.client_capture", "time per OpenAI SDK call captured by configure() (whole and streamed)",
     "<= 1.25x the same call uncaptured"),
    ("ingest", "bench.store_ingest", "finished OTel spans/s converted and committed to DuckDB by our exporter",
     ">= 150k spans/s, >= 0.85x bulk insert, >= 3x JSON files, >= 50x INSERT per span"),
    ("startup", "bench.startup", "import + configure() + one decorated call + flush(), fresh interpreter",
     "no CLI/pandas/torch loaded, <= 100 MB over bare OTel"),
    ("cli_startup", "bench.cli_startup", "fresh agent-rl query / traces list / --help on 200k spans vs python+duckdb",
     "<= 0.3 s wall each"),
    ("spool", "bench.spool", "spool segment write per span (agents never hold the file), merge, reader opens",
     "<= 10 us/span, merge of 100 segments <= 2 s"),
    ("receiver", "bench.receiver", "spans/s from 4 processes through OTLP/HTTP into agent-rl serve, zero loss",
     ">= 40k spans/s, zero loss"),
    ("dataset", "bench.dataset_build", "build KTO and GRPO datasets from 1M spans",
     ">= 20x pandas over per-trace JSON files"),
    ("gigpo", "bench.gigpo", "GiGPO advantages for 1M steps", ">= 20x per-row Python, equal to 1e-6"),
    ("train", "bench.train_kto", "agent-rl train kto wall time", "<= 1.05x a plain TRL script"),
    ("memory", "bench.memory", "peak RSS of an agent process exporting 100k and 1M spans",
     "<= +100 MB over uninstrumented, flat from 100k to 1M"),
    ("learning", "bench.learning", "closed loop: held-out success per round, GRPO vs GiGPO vs RLOO, 3 seeds, 2 envs",
     "GRPO on the grid +0.5 on every seed; keydoor: GiGPO rounds to 0.8 <= 0.75x GRPO's"),
    ("growth", "bench.growth", "ingest and one-rollout lookups as one file grows to 100k, 1M, 10M spans",
     "ingest at 10M >= 1/1.5 of a small file's; lookups < 50 ms at 10M; KTO over 1M < 5 s"),
    ("gpu_kto", "bench.gpu", "LoRA KTO tokens/s, Qwen2-0.5B shape, random weights (GPU)", ">= 0.95x plain TRL"),
    ("gpu_grpo", "bench.gpu", "LoRA GRPO tokens/s, Qwen2-0.5B shape, random weights (GPU)", ">= 0.95x plain TRL"),
    # Peers, each in its own virtualenv (bench/peers/); run with --peers or --only peers_...
    ("peers_mlflow", "bench.peers.mlflow_peer", "@trace_agent + DuckDB vs @mlflow.trace + SQLite, per call",
     "reported: ratio, traces persisted vs sent"),
    ("peers_phoenix", "bench.peers.phoenix_peer", "agent-rl serve vs Phoenix's OTLP receiver, 4 processes, until "
     "queryable", "reported: ratio, spans persisted vs sent"),
    ("peers_agentlightning", "bench.peers.agentlightning_peer", "decorator + store and receiver rows vs Agent "
     "Lightning 0.3.0", "reported: ratio, rows persisted vs sent"),
)
ROW_IDS = tuple(r[0] for r in ROWS)


# --- numbers ------------------------------------------------------------------------------
def median(samples: Sequence[float]) -> float:
    """The median of ``samples`` (NaN for none)."""
    values = [float(s) for s in samples if s is not None and not math.isnan(float(s))]
    return statistics.median(values) if values else math.nan


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when either is NaN or the denominator is 0."""
    if numerator is None or denominator is None:
        return math.nan
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return math.nan
    return numerator / denominator


@dataclass
class Measure:
    """Repeated samples of one quantity; ``median`` is what the table shows."""

    name: str
    unit: str
    samples: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return median(self.samples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "median": _clean(self.median),
            "samples": [_clean(s) for s in self.samples],
            "n": len(self.samples),
            "note": self.note,
        }


OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda v, limit: v <= limit,
    ">=": lambda v, limit: v >= limit,
    "<": lambda v, limit: v < limit,
    ">": lambda v, limit: v > limit,
    "==": lambda v, limit: v == limit,
}


@dataclass
class Target:
    """``value op limit`` must hold; ``value`` is a ratio, a median or an info number."""

    label: str
    value: float
    op: str
    limit: float

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown comparison {self.op!r}; use one of {', '.join(OPS)}")

    @property
    def passed(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        return bool(OPS[self.op](self.value, self.limit))

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "value": _clean(self.value), "op": self.op, "limit": self.limit,
                "passed": self.passed}


@dataclass
class Row:
    """One row of the table (see the module doc)."""

    id: str
    title: str = ""
    value: Measure | None = None
    baselines: list[Measure] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)
    check_details: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sizes: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None
    seconds: float = math.nan

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        """Record a correctness check; returns ``passed``."""
        self.checks[name] = bool(passed)
        if detail:
            self.check_details[name] = detail
        return bool(passed)

    def target(self, label: str, value: float, op: str, limit: float) -> Target:
        t = Target(label, value, op, limit)
        self.targets.append(t)
        return t

    @property
    def status(self) -> str:
        if self.error is not None:
            return "ERROR"
        if self.skipped is not None:
            return "SKIP"
        if not all(self.checks.values()):
            return "FAIL"
        if not all(t.passed for t in self.targets):
            return "MISS"
        return "PASS"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "value": self.value.to_dict() if self.value is not None else None,
            "baselines": [b.to_dict() for b in self.baselines],
            "ratios": {k: _clean(v) for k, v in self.ratios.items()},
            "targets": [t.to_dict() for t in self.targets],
            "checks": dict(self.checks),
            "check_details": dict(self.check_details),
            "info": _clean(self.info),
            "notes": list(self.notes),
            "sizes": dict(self.sizes),
            "skipped": self.skipped,
            "error": self.error,
            "seconds": _clean(self.seconds),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Row":
        def measure(d: Mapping[str, Any] | None) -> Measure | None:
            if d is None:
                return None
            return Measure(d["name"], d["unit"], [math.nan if s is None else s for s in d.get("samples", [])],
                           d.get("note", ""))

        row = cls(
            id=data["id"],
            title=data.get("title", ""),
            value=measure(data.get("value")),
            baselines=[measure(b) for b in data.get("baselines", [])],  # type: ignore[misc]
            ratios={k: (math.nan if v is None else v) for k, v in data.get("ratios", {}).items()},
            targets=[Target(t["label"], math.nan if t["value"] is None else t["value"], t["op"], t["limit"])
                     for t in data.get("targets", [])],
            checks=dict(data.get("checks", {})),
            check_details=dict(data.get("check_details", {})),
            info=dict(data.get("info", {})),
            notes=list(data.get("notes", [])),
            sizes=dict(data.get("sizes", {})),
            skipped=data.get("skipped"),
            error=data.get("error"),
            seconds=math.nan if data.get("seconds") is None else data["seconds"],
        )
        return row


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become None, numpy scalars plain numbers, containers recursively."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        try:
            return _clean(value.item())
        except (TypeError, ValueError):
            return str(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


# --- repetitions --------------------------------------------------------------------------
def interleave(functions: Mapping[str, Callable[[], float]], repeats: int, warmup: int = 0) -> dict[str, list[float]]:
    """Call every function ``repeats`` times, in rotation (A B C, B C A, C A B, ...), so that
    noise from other work on the machine hits each about equally; each call returns its own
    sample (seconds, a rate, ...). ``warmup`` rounds run first and are not kept."""
    names = list(functions)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for i in range(warmup + repeats):
        shift = i % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            value = functions[name]()
            if i >= warmup:
                samples[name].append(float(value))
    return samples


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``(seconds, result)`` of one call."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


# --- context ------------------------------------------------------------------------------
@dataclass
class Context:
    """What a row gets: the mode, a scratch folder, a logger."""

    quick: bool = False
    workdir: Path = field(default_factory=lambda: Path.cwd())
    verbose: bool = True

    def size(self, full: Any, quick: Any) -> Any:
        """``quick`` in quick mode, else ``full``."""
        return quick if self.quick else full

    def log(self, message: str) -> None:
        if self.verbose:
            print(f"  {message}", file=sys.stderr, flush=True)

    def folder(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def scratch(self, name: str, need_mb: int) -> Path:
        """A folder in RAM (``/dev/shm``) when it has ``need_mb`` free with room to spare, else
        :meth:`folder`. For set-up data of many small files, which a shared disk makes slow and
        noisy to create and delete (the timed work reads them from the page cache either way).
        The caller removes it."""
        shm = Path("/dev/shm")
        try:
            stats = os.statvfs(shm)
            free_mb = stats.f_bavail * stats.f_frsize / 2**20
        except OSError:
            free_mb = 0
        if free_mb > 2 * need_mb:
            # Named after the run's folder, so ``python -m bench`` can remove what a killed row left.
            return Path(tempfile.mkdtemp(prefix=f"{self.workdir.parent.name}-{name}-", dir=shm))
        return self.folder(name)


def row_spec(row_id: str) -> tuple[str, str, str, str]:
    for spec in ROWS:
        if spec[0] == row_id:
            return spec
    raise KeyError(f"unknown row {row_id!r}; rows: {', '.join(ROW_IDS)}")


def run_row(row_id: str, ctx: Context) -> Row:
    """Run one row in this process (errors become an ``ERROR`` row)."""
    _, module_name, title, _ = row_spec(row_id)
    started = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
        runner = getattr(module, f"run_{row_id}", None) or getattr(module, "run")
        row = runner(ctx)
    except Exception as exc:  # a broken row must not hide the others
        import traceback

        row = Row(id=row_id, error=f"{type(exc).__name__}: {exc}")
        row.notes.append(traceback.format_exc(limit=6))
    row.id = row_id
    row.title = row.title or title
    row.seconds = time.perf_counter() - started
    return row


# --- the machine --------------------------------------------------------------------------
PACKAGES = ("agent-rl-plugin", "duckdb", "opentelemetry-sdk", "pyarrow", "numpy", "pandas", "torch", "transformers",
            "trl", "peft", "datasets", "accelerate")


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpu_info() -> dict[str, Any] | None:
    """The CUDA device torch sees, or ``None``. Without a driver (no ``nvidia-smi``, no
    ``/proc/driver/nvidia``) torch is not even imported."""
    if not (shutil.which("nvidia-smi") or os.path.exists("/proc/driver/nvidia")):
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "count": torch.cuda.device_count(),
        "cuda": torch.version.cuda,
        "bf16": bool(torch.cuda.is_bf16_supported()),
    }


def machine_info() -> dict[str, Any]:
    """Cores, RAM, CPU, load, Python and the versions of what the rows use."""
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    ram = _ram_bytes()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": _cpu_model(),
        "ram_gib": round(ram / 2**30, 1) if ram else None,
        "load_average": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in PACKAGES},
        "gpu": gpu_info(),
    }


# --- output -------------------------------------------------------------------------------
def fmt_number(value: float | None, unit: str = "") -> str:
    """A short human number: 3 significant digits, thousands separators for big ones."""
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return "n/a"
    magnitude = abs(value)
    if magnitude >= 10_000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1:
        text = f"{value:.2f}"
    elif magnitude == 0:
        text = "0"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def fmt_ratio(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x" if value < 100 else f"{value:.0f}x"


def _measure_line(m: Measure) -> str:
    spread = ""
    values = [s for s in m.samples if not (isinstance(s, float) and math.isnan(s))]
    if len(values) > 1:
        spread = f" (n={len(values)})"
    return f"{m.name}: {fmt_number(m.median, m.unit)}{spread}"


def table_rows(rows: Iterable[Row]) -> list[list[str]]:
    """The cells of the table (also used for the markdown in docs/benchmarks.md)."""
    out = []
    for row in rows:
        if row.skipped is not None:
            out.append([row.id, f"skipped: {row.skipped}", "", "", _targets_text(row) or row_spec(row.id)[3], "SKIP", ""])
            continue
        if row.error is not None:
            out.append([row.id, f"error: {row.error}", "", "", row_spec(row.id)[3], "ERROR", ""])
            continue
        ours = _measure_line(row.value) if row.value else ""
        baselines = "\n".join(_measure_line(b) for b in row.baselines)
        ratios = "\n".join(f"{k}: {fmt_ratio(v)}" for k, v in row.ratios.items())
        checks = "\n".join(f"{'ok' if ok else 'FAILED'}: {name}" for name, ok in row.checks.items()) or "-"
        out.append([row.id, ours, baselines, ratios, _targets_text(row), row.status, checks])
    return out


def _got(value: float) -> str:
    """A target's value with enough digits to see which side of the limit it fell (1.051)."""
    if value is not None and not (isinstance(value, float) and math.isnan(value)) and abs(value) < 10:
        return f"{value:.3f}"
    return fmt_number(value)


def _targets_text(row: Row) -> str:
    return "\n".join(
        f"{'PASS' if t.passed else 'MISS'} {t.label} {t.op} {fmt_number(t.limit)} (got {_got(t.value)})"
        for t in row.targets
    )


HEADERS = ["row", "ours (median)", "baselines, same run (median)", "ratios", "targets", "result", "correctness"]


def print_table(rows: Sequence[Row], machine: Mapping[str, Any], mode: str, wall_s: float, file: Any = None) -> None:
    """The table with rich (plain text when rich is missing or output is not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=max(160, shutil.get_terminal_size((160, 40)).columns))
    title = f"agent-rl benchmarks ({mode}): every ratio against a baseline measured in the same run"
    if mode == "quick":
        title += "; the targets are set for the full sizes, so quick PASS/MISS is only indicative"
    table = Table(title=title, show_lines=True)
    colors = {"PASS": "green", "MISS": "yellow", "FAIL": "red", "ERROR": "red", "SKIP": "dim"}
    for header in HEADERS:
        table.add_column(header, overflow="fold")
    for cells, row in zip(table_rows(rows), rows):
        cells[5] = f"[{colors.get(row.status, 'white')}]{row.status}[/]"
        table.add_row(*[c if i == 5 else _escape(c) for i, c in enumerate(cells)])
    console.print(table)
    console.print(_escape(machine_line(machine)) + f"; wall time {wall_s:.1f} s")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def machine_line(machine: Mapping[str, Any]) -> str:
    packages = machine.get("packages", {})
    versions = ", ".join(f"{k} {v}" for k, v in packages.items() if v and k != "agent-rl-plugin")
    gpu = machine.get("gpu")
    gpu_text = f"GPU {gpu['name']} ({gpu['memory_gib']} GiB)" if gpu else "no GPU"
    return (
        f"machine: {machine.get('cpus_usable')} of {machine.get('cpus')} CPUs ({machine.get('cpu_model')}), "
        f"{machine.get('ram_gib')} GiB RAM, load {machine.get('load_average')}, {gpu_text}, "
        f"Python {machine.get('python')}; {versions}"
    )


def markdown_table(rows: Sequence[Row]) -> str:
    """The table as GitHub markdown (cells joined with ``<br>``)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for cells in table_rows(rows):
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", "<br>") for c in cells) + " |")
    return "\n".join(lines)


def report_dict(rows: Sequence[Row], machine: Mapping[str, Any], mode: str, command: str, wall_s: float,
                started_at: str) -> dict[str, Any]:
    """The JSON document ``--json`` writes."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    return {
        "schema": SCHEMA_VERSION,
        "mode": mode,
        "command": command,
        "started_at": started_at,
        "wall_s": _clean(wall_s),
        "machine": _clean(dict(machine)),
        "summary": counts,
        "rows": [row.to_dict() for row in rows],
    }


def write_json(path: str | os.PathLike[str], report: Mapping[str, Any]) -> None:
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


__all__ = [
    "Context",
    "Measure",
    "ROWS",
    "ROW_IDS",
    "Row",
    "Target",
    "fmt_number",
    "fmt_ratio",
    "interleave",
    "machine_info",
    "markdown_table",
    "median",
    "print_table",
    "ratio",
    "report_dict",
    "run_row",
    "timed",
    "write_json",
]

