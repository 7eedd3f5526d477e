"""The built-in commands of ``agent-rl`` as data, without typer: their modules
(:data:`COMMAND_PLUGINS`), names and one-line help (:data:`COMMAND_SUMMARIES`), the root's help
(:data:`ROOT_HELP`), and whether outside plugins may add commands
(:func:`entry_point_plugins_installed`).

Shared by the app (:mod:`agent_rl_plugin.cli.main`, which offers these names too) and its fast
path (:mod:`agent_rl_plugin.cli.fast_path`); importing it loads only the standard library.
"""

from __future__ import annotations

import os
import sys

from agent_rl_plugin.plugin_names import DISABLE_AUTOLOAD_ENV as DISABLE_AUTOLOAD_ENV  # no pluggy
from agent_rl_plugin.plugin_names import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP

#: The built-in command groups, registered as plugins under these names by :func:`build_app`
#: (``agent-rl plugins`` lists them as built-ins).
COMMAND_PLUGINS: dict[str, str] = {
    "cli_query": "agent_rl_plugin.cli.query",
    "cli_traces": "agent_rl_plugin.cli.traces",
    "cli_doctor": "agent_rl_plugin.cli.doctor",
    "cli_db": "agent_rl_plugin.cli.db",
    "cli_demo": "agent_rl_plugin.cli.demo",
    "cli_plugins": "agent_rl_plugin.cli.plugins_cmd",
    "cli_score": "agent_rl_plugin.cli.score",
    "cli_tasks": "agent_rl_plugin.cli.tasks",
    "cli_label": "agent_rl_plugin.cli.label",
    "cli_dataset": "agent_rl_plugin.cli.dataset",
    "cli_rollouts": "agent_rl_plugin.cli.rollouts",
    "cli_import": "agent_rl_plugin.cli.import_cmd",
    "cli_advantages": "agent_rl_plugin.cli.advantages",
    "cli_train": "agent_rl_plugin.cli.train",
    "cli_export": "agent_rl_plugin.cli.export",
    "cli_serve": "agent_rl_plugin.cli.serve",
    "cli_ingest": "agent_rl_plugin.cli.ingest",
    "cli_report": "agent_rl_plugin.cli.report",
    "cli_policy": "agent_rl_plugin.cli.policy",
    "cli_loop": "agent_rl_plugin.cli.loop",
    "cli_ui": "agent_rl_plugin.cli.ui",
}

#: Each built-in command: name -> (plugin name in :data:`COMMAND_PLUGINS`, the one-line help
#: ``agent-rl --help`` shows), in the order ``--help`` lists them (the hook calls the groups
#: registered last first). A lazy app lists them from here without importing them;
#: ``tests/test_cli_startup.py`` checks this table against the real commands.
COMMAND_SUMMARIES: dict[str, tuple[str, str]] = {
    "ui": ("cli_ui", "Browse rollouts, label them and run SQL in a live local web UI."),
    "loop": (
        "cli_loop",
        "Train an agent's policy in closed rounds: rollouts -> rewards -> advantages -> LoRA -> reload -> eval.",
    ),
    "report": (
        "cli_report",
        "Write one self-contained HTML report: plots, tables, and the worst rollouts step by step.",
    ),
    "ingest": ("cli_ingest", "Load spans from OTLP/JSON lines files and Parquet exports (duplicates are skipped)."),
    "serve": ("cli_serve", "Receive OTLP/HTTP traces from many processes and write them into one DuckDB file."),
    "label": (
        "cli_label",
        "Label rollouts good / bad / skip (a review queue, or --set ID=LABEL), stored as human rewards.",
    ),
    "score": ("cli_score", "Score rollouts with the installed reward plugins and write the rows into `rewards`."),
    "plugins": (
        "cli_plugins",
        "List registered plugins (built-ins and those installed through entry points) and their rewards.",
    ),
    "demo": (
        "cli_demo",
        "Watch an agent get better: a tiny local LLM policy trained in closed rounds on a grid "
        "(--tour: the recording tour).",
    ),
    "doctor": ("cli_doctor", "Check the recorded traces for what makes them unfit for training, with a fix for each."),
    "query": (
        "cli_query",
        "Run a read-only SQL query over rollouts, steps, LLM calls, tool calls, events and rewards.",
    ),
    "policy": ("cli_policy", "Serve the policy being trained over OpenAI's chat-completions API."),
    "export": (
        "cli_export",
        "Export trained adapters (the adapter alone, or merged into its base model) and recorded data.",
    ),
    "train": ("cli_train", "Train LoRA adapters on recorded rollouts (KTO, GRPO online/offline, GiGPO)."),
    "advantages": ("cli_advantages", "Compute GRPO, RLOO, Dr. GRPO or GiGPO advantages into the store."),
    "import": ("cli_import", "Import history recorded elsewhere as rollouts."),
    "rollouts": ("cli_rollouts", "Run an agent over tasks in groups of rollouts, recorded into DuckDB."),
    "dataset": ("cli_dataset", "Build KTO, GRPO and GiGPO-step datasets from recorded rollouts."),
    "tasks": ("cli_tasks", "Import tasks with ground truth, and list them."),
    "db": ("cli_db", "Inspect or upgrade the DuckDB store."),
    "traces": ("cli_traces", "List recorded rollouts and show one as a tree."),
}


#: The root's one-line help (``agent-rl --help``); the fast path prints it too.
ROOT_HELP = "Record agents into DuckDB, look at what they did, score them and train on them."
#: The help of the root's ``--version`` (``-V``) option.
VERSION_HELP = "Print the version and exit."


def entry_point_plugins_installed() -> bool:
    """Whether an installed distribution may add plugins (so commands) through the
    ``agent_rl_plugin`` entry-point group: false when autoload is switched off
    (``AGENT_RL_DISABLE_PLUGIN_AUTOLOAD``), else true when an ``entry_points.txt`` of a
    distribution on ``sys.path`` names the group. A scan of the files, without
    ``importlib.metadata`` (whose import and full scan cost more than the rest of a short
    command); it errs towards true (the plugin manager then decides as it always does), so
    any ``.egg`` entry of ``sys.path`` counts as a possible plugin."""
    if os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes"):
        return False
    header = f"[{ENTRY_POINT_GROUP}]".encode()  # ASCII: found in the bytes iff in the decoded text
    for folder in sys.path:
        if folder.endswith(".egg"):  # an egg install (a folder or a zip): not scanned here
            return True
        try:
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith((".dist-info", ".egg-info")) and header in _read_bytes(
                os.path.join(entry.path, "entry_points.txt")
            ):
                return True
    return False


def _read_bytes(path: str) -> bytes:
    """The bytes of the file at ``path``, empty when it cannot be read: raw reads, without a text
    stream's set-up (some hundred files are read on every start of a command)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return b""
    chunks = []
    try:
        while chunk := os.read(descriptor, 1 << 16):
            chunks.append(chunk)
    except OSError:
        return b""
    finally:
        os.close(descriptor)
    return b"".join(chunks)
