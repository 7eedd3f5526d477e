"""Start-up of the command line: a fresh ``agent-rl`` process against a bare DuckDB script.

Set-up (not timed): a store of 200k spans (20k rollouts of 5 LLM calls, 2 spans each) built with
the store's bulk path (:func:`agent_rl_plugin.data.synthetic.synthesize_store`: one
``INSERT ... SELECT`` into the migrated file, then a checkpoint).

Timed, each a fresh process, wall time from the parent (interleaved, after one warm-up round):

* ``agent-rl query "select count(*) from spans" --db S`` (the value);
* ``agent-rl traces list --db S`` (the 20 latest rollouts);
* ``agent-rl --help``;
* the baseline: ``python -c "import duckdb; print(duckdb.connect(S, read_only=True)
  .sql('select count(*) from spans').fetchall())"``: the same query with DuckDB alone.

Every child runs with the same bytecode cache (``PYTHONPYCACHEPREFIX`` in the row's folder,
filled by the warm-up; ``PYTHONDONTWRITEBYTECODE`` dropped), so neither side compiles source:
an installed package has its ``.pyc`` files. ``COLUMNS=120`` fixes the table width. The CPU time
of each child (user + system, ``RUSAGE_CHILDREN``) is kept too: on a loaded machine it moves less
than the wall time.

Correctness: the count printed by ``agent-rl query`` equals the baseline's and the store's span
count; ``traces list`` prints the 20 newest rollouts (its short ids are prefixes of the ids
DuckDB returns for the same order, and its ``--json`` output holds exactly those ids);
``--help`` lists every built-in command; and each of the three ran on the fast path
(:mod:`agent_rl_plugin.cli.fast_path`): run once more under ``python -X importtime``, it prints
what the timed run printed and imports none of typer, click, pydantic or pluggy (the typer app
imports them all).

    python bench/cli_startup.py [--quick]
    python -m bench --only cli_startup [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.harness import Context, Measure, Row, interleave, median, ratio  # noqa: E402

TARGET_S = 0.3
QUERY = "select count(*) from spans"
LIST_LIMIT = 20


def agent_rl_command() -> list[str]:
    """``agent-rl`` next to this Python (the console script), else ``python -m agent_rl_plugin``."""
    script = Path(sys.executable).with_name("agent-rl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agent_rl_plugin"]


def child_env(pycache: Path) -> dict[str, str]:
    """The environment of every child: a shared bytecode cache, a fixed terminal width."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["COLUMNS"] = "120"
    env.pop("AGENT_RL_DB", None)
    env.pop("AGENT_RL_DB_PATH", None)
    return env


def run_child(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """(wall seconds, stdout) of one fresh process; raises when it fails."""
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} ... exited {proc.returncode}: {proc.stderr[-1500:]}")
    return wall, proc.stdout


class Child:
    """Runs one command line and keeps its samples (wall, CPU) and its last output."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.command, self.env, self.cwd = command, env, cwd
        self.cpu: list[float] = []
        self.output = ""

    def __call__(self) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall, self.output = run_child(self.command, self.env, self.cwd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        return wall


#: What the typer app imports and the fast path does not.
APP_ONLY_MODULES = ("typer", "click", "pydantic", "pydantic_core", "pluggy")


def imported_modules(command: list[str], env: dict[str, str], cwd: Path) -> tuple[str, set[str]]:
    """(stdout, top-level packages imported) of one more run of ``command`` under
    ``python -X importtime`` (the console script is run by this Python)."""
    argv = [sys.executable, "-X", "importtime", *(command[1:] if command[0] == sys.executable else command)]
    proc = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:5])} ... exited {proc.returncode}: {proc.stderr[-1500:]}")
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.M)
    return proc.stdout, {name.split(".")[0] for name in names}


def make_store(path: Path, rollouts: int) -> dict[str, Any]:
    from agent_rl_plugin.data.synthetic import synthesize_store

    return synthesize_store(path, rollouts=rollouts, llm_calls=5, group_size=4)


def newest_rollouts(store: Path, limit: int) -> list[str]:
    import duckdb

    with duckdb.connect(str(store), read_only=True) as connection:
        rows = connection.execute(
            f"select rollout_id from rollouts order by start_time desc limit {int(limit)}"
        ).fetchall()
    return [r[0] for r in rows]


def printed_numbers(text: str) -> list[int]:
    """The integers in a table's text (thousands separators allowed)."""
    return [int(n.replace(",", "")) for n in re.findall(r"(?<![\w.])\d[\d,]*(?![\w.])", text)]


def run(ctx: Context) -> Row:
    rollouts = ctx.size(20_000, 2_000)
    repeats = ctx.size(9, 3)
    spans = rollouts * 10
    row = Row(id="cli_startup", sizes={"spans": spans, "rollouts": rollouts})
    folder = ctx.folder("cli_startup")
    store = folder / "store.duckdb"
    if store.exists():
        store.unlink()
    started = time.perf_counter()
    made = make_store(store, rollouts)
    row.info["setup_store_s"] = time.perf_counter() - started
    env = child_env(folder / "pycache")
    cli = agent_rl_command()
    children = {
        "query": Child([*cli, "query", QUERY, "--db", str(store)], env, folder),
        "traces list": Child([*cli, "traces", "list", "--db", str(store)], env, folder),
        "--help": Child([*cli, "--help"], env, folder),
        "duckdb": Child(
            [
                sys.executable,
                "-c",
                f"import sys, duckdb; print(duckdb.connect(sys.argv[1], read_only=True).sql({QUERY!r}).fetchall())",
                str(store),
            ],
            env,
            folder,
        ),
    }
    ctx.log(f"cli_startup: {spans:,} spans; query, traces list, --help and bare DuckDB, fresh processes, x{repeats}")
    samples = interleave(children, repeats, warmup=1)
    row.value = Measure(f'agent-rl query "{QUERY}"', "s", samples["query"])
    row.baselines.append(Measure("python -c: import duckdb, connect read-only, same query", "s", samples["duckdb"]))
    row.baselines.append(Measure("agent-rl traces list", "s", samples["traces list"]))
    row.baselines.append(Measure("agent-rl --help", "s", samples["--help"]))
    base = median(samples["duckdb"])
    for name in ("query", "traces list", "--help"):
        row.ratios[f"{name} / duckdb"] = ratio(median(samples[name]), base)
        row.target(f"agent-rl {name} wall, s", median(samples[name]), "<=", TARGET_S)

    # correctness
    expected = newest_rollouts(store, LIST_LIMIT)
    baseline_count = int(re.findall(r"\d+", children["duckdb"].output)[0])
    query_numbers = printed_numbers(children["query"].output)
    row.check(
        "query prints the count DuckDB gives (and the store holds)",
        baseline_count == spans == made["spans"] and query_numbers[:1] == [baseline_count],
        f"agent-rl printed {query_numbers[:3]}, duckdb {baseline_count}, built {made['spans']}",
    )
    listing = children["traces list"].output
    shown = re.findall(r"^\s*([0-9A-Fa-f]{6,})\s", listing, re.M)
    _, as_json = run_child([*cli, "traces", "list", "--db", str(store), "--json"], env, folder)
    listed = [r["rollout_id"] for r in json.loads(as_json)]
    row.check(
        f"traces list shows the {LIST_LIMIT} newest rollouts",
        len(expected) == LIST_LIMIT
        and listed == expected
        and len(shown) == LIST_LIMIT
        and all(full.startswith(short) for short, full in zip(shown, expected))
        and f"{LIST_LIMIT} rows" in listing,
        f"table ids {shown[:3]}..., --json {listed[:2]}..., expected {expected[:2]}...",
    )
    from agent_rl_plugin.cli.main import COMMAND_SUMMARIES

    help_text = children["--help"].output
    missing = [name for name in COMMAND_SUMMARIES if not re.search(rf"^\W*{re.escape(name)}\s", help_text, re.M)]
    row.check("--help lists every command", not missing, f"missing: {missing}")
    slow_path: dict[str, list[str]] = {}
    for name in ("query", "traces list", "--help"):
        out, packages = imported_modules(children[name].command, env, folder)
        slow_path[name] = sorted(set(APP_ONLY_MODULES) & packages) + (
            ["(other output)"] if out != children[name].output else []
        )
    row.check(
        "query, traces list and --help ran on the fast path (same output, no typer/click/pydantic/pluggy)",
        not any(slow_path.values()),
        f"{slow_path}",
    )
    for name, child in children.items():
        row.info[f"cpu_s[{name}]"] = median(child.cpu[-repeats:])
    row.info["load_avg"] = os.getloadavg()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agent-rl-bench-cli-startup-"))
    try:
        row = run(Context(quick=args.quick, workdir=folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(row.to_dict(), indent=2))


if __name__ == "__main__":
    main()
