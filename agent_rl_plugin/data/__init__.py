"""Datasets from SQL: KTO rows, GRPO groups and GiGPO step rows, built in DuckDB and handed
to ``datasets.Dataset`` as Arrow (see ``docs/datasets.md``).

* :func:`build_kto_dataset`: ``prompt``, ``completion``, ``label`` (one row per rollout);
* :func:`build_grpo_dataset`: ``prompt``, ``completions``, ``rewards``, ``advantages`` (one row
  per group);
* :func:`build_step_dataset`: ``prompt``, ``completion``, ``advantage``, ``old_logprobs``,
  ``completion_token_ids``, ``prompt_token_ids`` (one row per LLM call; ids as recorded, else
  null);
* :func:`build_datasets`: KTO and GRPO of the same selection at once (the episode rows built once);
* :func:`write_dataset`: JSONL, Parquet, or a ``save_to_disk`` directory (path ending in ``/``).

Each builder takes a store path or an open DuckDB connection, ``where`` (SQL over the
``rollouts`` view) or ``sql`` (a query returning ``rollout_id``), and ``report=BuildReport()``
to learn what was built and what was left out. The KTO and GRPO builders take
``failed_rollouts`` (``exclude``, ``zero_reward`` or ``keep``: what happens to rollouts that
raised, timed out or were cancelled); step rows follow the policy of the advantage run they
come from. :func:`build_step_dataset` also selects by
``rollout_ids`` (a list of ids) and ``rollout_run_id`` (the ``run_id`` that ``run_rollouts``
records in each rollout's metadata), combined with ``where`` / ``sql`` by AND. Errors are
:class:`DatasetError`.
"""

from __future__ import annotations

from agent_rl_plugin.data.build import build_dataset, build_datasets, build_table, build_tables
from agent_rl_plugin.data.grpo import build_grpo_dataset
from agent_rl_plugin.data.kto import LabelRule, build_kto_dataset
from agent_rl_plugin.data.output import load_tokenizer, to_text, write_dataset
from agent_rl_plugin.data.report import BuildReport, DatasetError
from agent_rl_plugin.data.steps import LOGPROBS_ATTRIBUTE, build_step_dataset

__all__ = [
    "BuildReport",
    "DatasetError",
    "LOGPROBS_ATTRIBUTE",
    "LabelRule",
    "build_dataset",
    "build_datasets",
    "build_grpo_dataset",
    "build_kto_dataset",
    "build_step_dataset",
    "build_table",
    "build_tables",
    "load_tokenizer",
    "to_text",
    "write_dataset",
]
