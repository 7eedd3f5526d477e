"""``agent-rl label``: human labels (good / bad / skip) for rollouts, stored as rewards too.

* ``agent-rl label --set ID=good --set ID2=bad``: label without questions (a unique prefix of a
  rollout id is enough, as for ``traces show``).
* ``agent-rl label [--where SQL]``: a reviewer queue of the rollouts without a label (matching
  ``--where``, oldest first). Each is shown (task, prompt, ground truth, final output, tool calls,
  emitted rewards, then the ``traces show`` tree) and the reviewer answers g(ood), b(ad), s(kip)
  or q(uit). Works with piped input (``printf 'g\\nb\\nq\\n' | agent-rl label``).

Each answer is appended to ``labels`` at once (``value`` 1.0 for good, 0.0 for bad, NULL for
skip; ``labeller`` defaults to ``$USER``). Then, when a reward named ``human_label`` is
registered, ``agent-rl score --plugin human_label`` runs for the labelled rollouts, so the labels
are also rows of ``rewards`` (``source = 'human'``).
"""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich.markup import escape

from agent_rl_plugin.cli.common import DbOption, JsonOption, UserError, console, db_path, print_json
from agent_rl_plugin.cli.query import run_query
from agent_rl_plugin.cli.score import fail_plain, say
from agent_rl_plugin.hookspecs import hookimpl
from agent_rl_plugin.rewards import labels
from agent_rl_plugin.rewards.labels import (
    CURRENT_LABEL_ROWS,
    HUMAN_REWARD,
    LABEL_ALIASES,
    LABEL_VALUES,
    default_labeller,
    write_labels,
)


def normalise_label(text: str) -> str:
    """``good``, ``bad`` or ``skip`` from an answer (g, b, s, +, -, 1, 0 accepted)."""
    try:
        return labels.normalise_label(text)
    except labels.LabelError as exc:
        raise UserError(str(exc), exc.hint) from None


def score_human_labels(path: str, rollout_ids: list[str]) -> Any:
    """Run the ``human_label`` reward for these rollouts, if one is registered (else None)."""
    from agent_rl_plugin.rewards.registry import collect_registered_rewards
    from agent_rl_plugin.rewards.runner import score

    if not rollout_ids or HUMAN_REWARD not in collect_registered_rewards().rewards:
        return None
    return score(path, rewards=[HUMAN_REWARD], rollout_ids=sorted(set(rollout_ids)), workers=0)


def _queue(path: str, where: str | None, limit: int) -> list[str]:
    from agent_rl_plugin.rewards.runner import check_where

    check_where(where)
    condition = f" and ({where})" if where else ""
    _, rows = run_query(
        path,
        "select rollout_id from rollouts where rollout_id not in "
        f"(select rollout_id from labels where {CURRENT_LABEL_ROWS})"
        f"{condition} order by start_time, rollout_id limit {int(limit)}",
    )
    return [row[0] for row in rows]


def _snippet(value: Any, width: int = 400) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def show_for_review(path: str, rollout_id: str, position: str) -> None:
    """What a reviewer needs: the task, the answer, the tool calls, then the trace tree."""
    from agent_rl_plugin.cli.traces import show_trace
    from agent_rl_plugin.rewards.rollout import load_rollouts
    from agent_rl_plugin.store import open_reader

    connection = open_reader(path)
    try:
        found = load_rollouts(connection, rollout_ids=[rollout_id])
    finally:
        connection.close()
    console.rule(f"[bold]{position}[/] rollout {escape(rollout_id)}")
    if found:
        r = found[0]
        facts = [
            ("task", f"{r.task_id or ''}  group {r.group_id or ''}  status {r.status}"),
            ("prompt", _snippet(r.prompt)),
            ("ground truth", _snippet(r.ground_truth)),
            ("final output", _snippet(r.final_output)),
            (
                "tool calls",
                "; ".join(
                    f"{s.name}({_snippet(s.arguments, 60)}) → {'ERROR ' + _snippet(s.error, 60) if s.is_error else _snippet(s.result, 60)}"
                    for s in r.tool_calls
                ),
            ),
            ("emitted rewards", ", ".join(f"{k}={v:g}" for k, v in r.emitted_rewards.items())),
        ]
        for key, value in facts:
            if value:
                console.print(f"[bold]{key}:[/] {escape(value)}", highlight=False, soft_wrap=True)
    show_trace(rollout_id, db=path)


def _ask() -> str | None:
    """good, bad, skip, or None to quit (also on end of input)."""
    while True:
        try:
            answer = typer.prompt("label: [g]ood, [b]ad, [s]kip, [q]uit", default="", show_default=False)
        except (typer.Abort, EOFError):
            return None
        answer = answer.strip().lower()
        if answer in ("q", "quit", "exit"):
            return None
        if answer in LABEL_ALIASES:
            return LABEL_ALIASES[answer]
        say("please answer g, b, s or q")


def label_command(
    db: str = DbOption,
    where: Optional[str] = typer.Option(
        None,
        "--where",
        "-w",
        metavar="SQL",
        help="Review queue: only rollouts matching this SQL condition over the rollouts view.",
    ),
    set_labels: Optional[list[str]] = typer.Option(
        None, "--set", help="ROLLOUT_ID=good|bad|skip, without questions (an id prefix is enough); repeatable."
    ),
    labeller: Optional[str] = typer.Option(None, "--labeller", help="Who labels (default: $USER)."),
    note: Optional[str] = typer.Option(None, "--note", help="A comment stored with each label."),
    limit: int = typer.Option(100, "--limit", "-n", min=1, help="Longest review queue."),
    json_output: bool = JsonOption,
) -> None:
    """Label rollouts good / bad / skip (a review queue, or --set ID=LABEL), stored as human rewards."""
    from agent_rl_plugin.cli.traces import resolve_rollout_id
    from agent_rl_plugin.rewards.runner import ScoringError
    from agent_rl_plugin.store.errors import StoreError

    path = db_path(db)
    who = labeller or default_labeller()
    written: list[dict[str, Any]] = []
    try:
        if set_labels:
            pairs = []
            for item in set_labels:
                rid, sep, label = item.rpartition("=")
                if not sep or not rid.strip():
                    raise UserError(f"--set {item!r} is not ROLLOUT_ID=LABEL", "e.g. --set 3f2a9c=good")
                pairs.append((resolve_rollout_id(path, rid.strip()), normalise_label(label)))
            written = write_labels(path, pairs, who, note)
        else:
            queue = _queue(path, where, limit)
            if not queue:
                say("Nothing to label: every rollout" + (" matching --where" if where else "") + " has a label.")
            for number, rollout_id in enumerate(queue, start=1):
                show_for_review(path, rollout_id, f"{number}/{len(queue)}")
                answer = _ask()
                if answer is None:
                    break
                written += write_labels(path, [(rollout_id, answer)], who, note)
        report = score_human_labels(path, [r["rollout_id"] for r in written])
    except (UserError, ScoringError) as exc:
        fail_plain(str(exc), getattr(exc, "hint", None))
    except StoreError as exc:
        message, _, hint = str(exc).partition(" Fix: ")
        fail_plain(message, hint or None)
    if json_output:
        print_json({"labelled": written, "human_label": report.to_dict() if report else None})
    else:
        counts = {label: sum(r["label"] == label for r in written) for label in LABEL_VALUES}
        say(f"Labelled {len(written)} rollouts ({', '.join(f'{n} {k}' for k, n in counts.items())}) as {who}.")
        if report is not None:
            stats = report.rewards[HUMAN_REWARD]
            say(f"{HUMAN_REWARD}: {stats.scored} reward rows written, {stats.skipped} already there.")
        elif written:
            say(f"No {HUMAN_REWARD!r} reward is registered: labels are in the labels table only.")
    if report is not None and not report.ok:
        stats = report.rewards[HUMAN_REWARD]
        fail_plain(
            f"the labels were saved, but the {HUMAN_REWARD} reward failed on {stats.errors} rollouts "
            f"({stats.error_examples[0] if stats.error_examples else 'error'})",
            'see the rows: agent-rl query "select * from rewards where error is not null"',
        )


@hookimpl
def agent_rl_register_commands(cli: typer.Typer) -> None:
    cli.command("label")(label_command)
