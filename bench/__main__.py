"""``python -m bench``: every benchmark row, each against a baseline measured in the same run.

    python -m bench                          # full sizes (about an hour on 2 cores: learning, memory, growth)
    python -m bench --quick                  # the same measurements on small sizes (a few minutes)
    python -m bench --peers                  # also the peer rows (MLflow, Phoenix, Agent Lightning)
    python -m bench --only gigpo,dataset --json out.json
    python -m bench --list                   # the rows and their targets

Each row runs in its own Python process (so one row's threads, imports and memory do not slow
the next), prints its progress on stderr, and hands its result back as JSON; the table is
printed at the end and ``--json PATH`` writes the whole report (machine, rows, samples,
ratios, targets, correctness checks). Exit status: 0 when every row ran and its correctness
checks passed (a missed speed target is reported, not an error), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402

#: Longest a row may take before it is stopped and reported as an error (seconds).
ROW_TIMEOUT_S = {"full": 420, "quick": 90}
#: Rows that need longer (the learning row runs 18 training loops).
ROW_TIMEOUT_OVERRIDES_S = {"growth": {"full": 3600, "quick": 300}, "learning": {"full": 3600, "quick": 600}}
ROW_TIMEOUT_OVERRIDES_S["memory"] = {"full": 3600, "quick": 240}  # a 1M-span agent run (40k quick)
#: The peer rows (bench/peers/) run only with --peers or when named in --only; the first run
#: builds their environments (excluded from the timings, not from the row's time limit).
PEER_ROWS = tuple(r for r in harness.ROW_IDS if r.startswith("peers_"))
ROW_TIMEOUT_OVERRIDES_S.update({r: {"full": 3600, "quick": 2400} for r in PEER_ROWS})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: the same measurements in under a minute")
    parser.add_argument("--only", default="", help=f"comma-separated row ids ({', '.join(harness.ROW_IDS)})")
    parser.add_argument("--json", dest="json_path", default=None, help="write the report here")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument("--peers", action="store_true", help="also run the peer rows (MLflow, Phoenix, AgentLightning)")
    parser.add_argument("--in-process", action="store_true", help="run the rows in this process (debugging)")
    parser.add_argument("--keep", default=None, help="keep the scratch files in this folder")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--render", default=None, metavar="JSON", help="print the table of a saved report and exit")
    parser.add_argument("--markdown", action="store_true", help="with --render: GitHub markdown (docs/benchmarks.md)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: run one row
    parser.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def selected_rows(only: str, peers: bool = False) -> list[str]:
    if not only.strip():
        return [r for r in harness.ROW_IDS if peers or r not in PEER_ROWS]
    wanted = [x.strip() for x in only.split(",") if x.strip()] + (list(PEER_ROWS) if peers else [])
    unknown = [x for x in wanted if x not in harness.ROW_IDS]
    if unknown:
        raise SystemExit(f"error: unknown row(s) {', '.join(unknown)}; rows: {', '.join(harness.ROW_IDS)}")
    return [r for r in harness.ROW_IDS if r in wanted]


def run_child(row_id: str, quick: bool, workdir: Path, quiet: bool) -> harness.Row:
    """Run one row in a fresh interpreter; its result comes back through a JSON file."""
    out = workdir / f"{row_id}.result.json"
    command = [sys.executable, "-m", "bench", "--child", row_id, "--child-out", str(out), "--workdir", str(workdir)]
    if quick:
        command.append("--quick")
    if quiet:
        command.append("--quiet")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("AGENT_RL_DISABLE_PLUGIN_AUTOLOAD", "1")  # only the built-in plugins: the same set everywhere
    size = "quick" if quick else "full"
    timeout = ROW_TIMEOUT_OVERRIDES_S.get(row_id, ROW_TIMEOUT_S)[size]
    started = time.perf_counter()
    # Its own process group, so that a row stopped for taking too long takes its helpers along.
    proc = subprocess.Popen(command, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=None, text=True,
                            start_new_session=True)
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return harness.Row(id=row_id, error=f"timed out after {timeout} s", seconds=time.perf_counter() - started)
    if out.exists():
        return harness.Row.from_dict(json.loads(out.read_text(encoding="utf-8")))
    tail = (stdout or "")[-2000:]
    return harness.Row(id=row_id, error=f"the row's process exited with status {proc.returncode} without a result",
                       notes=[tail], seconds=time.perf_counter() - started)


def child_main(args: argparse.Namespace) -> int:
    ctx = harness.Context(quick=args.quick, workdir=Path(args.workdir), verbose=not args.quiet)
    row = harness.run_row(args.child, ctx)
    harness.write_json(args.child_out, row.to_dict())
    return 0


def render(path: Path, markdown: bool) -> int:
    report = json.loads(path.read_text(encoding="utf-8"))
    rows = [harness.Row.from_dict(r) for r in report["rows"]]
    if markdown:
        print(harness.markdown_table(rows))
        print()
        print(f"`{report['command']}` ({report['mode']}), {report['started_at']}, wall time {report['wall_s']:.0f} s; "
              f"{harness.machine_line(report['machine'])}")
    else:
        harness.print_table(rows, report["machine"], report["mode"], report["wall_s"])
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    if args.render:
        return render(Path(args.render), args.markdown)
    if args.list:
        for row_id, _, what, target in harness.ROWS:
            print(f"{row_id:10s} {what}\n{'':10s} target: {target}")
        return 0
    rows = selected_rows(args.only, args.peers)
    mode = "quick" if args.quick else "full"
    command = "python -m bench" + (" " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
                                   if (argv if argv is not None else sys.argv[1:]) else "")
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    machine = harness.machine_info()
    if not args.quiet:
        print(harness.machine_line(machine), file=sys.stderr, flush=True)
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="agent-rl-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: list[harness.Row] = []
    started = time.perf_counter()
    try:
        for row_id in rows:
            if not args.quiet:
                print(f"[{time.perf_counter() - started:6.1f} s] {row_id} ({mode}) ...", file=sys.stderr, flush=True)
            row_dir = workdir / row_id
            row_dir.mkdir(parents=True, exist_ok=True)
            if args.in_process:
                row = harness.run_row(row_id, harness.Context(quick=args.quick, workdir=row_dir, verbose=not args.quiet))
            else:
                row = run_child(row_id, args.quick, row_dir, args.quiet)
            results.append(row)
            for leftover in Path("/dev/shm").glob(f"{workdir.name}-*"):  # Context.scratch of a killed row
                shutil.rmtree(leftover, ignore_errors=True)
            if not args.keep:
                shutil.rmtree(row_dir, ignore_errors=True)
            if not args.quiet:
                print(f"[{time.perf_counter() - started:6.1f} s] {row_id}: {row.status} in {row.seconds:.1f} s",
                      file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall = time.perf_counter() - started
    machine["load_average_end"] = harness.machine_info()["load_average"]
    harness.print_table(results, machine, mode, wall)
    if args.json_path:
        harness.write_json(args.json_path, harness.report_dict(results, machine, mode, command, wall, started_at))
    broken = [r.id for r in results if r.status in ("ERROR", "FAIL")]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
