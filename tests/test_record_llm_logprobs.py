"""record_llm_call(state_key=, logprobs=, token_ids=): what a trainer needs of an LLM call,
recorded on its span and read back by the step dataset and the offline trainer's rows."""

from __future__ import annotations

import json
import logging

import duckdb
import numpy as np
import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.data import LOGPROBS_ATTRIBUTE, build_step_dataset
from agent_rl_plugin.train.offline_data import iter_completions

QUESTION = [{"role": "user", "content": "2 + 2?"}]


def record_group(path, calls) -> None:
    """One group of rollouts, one LLM call each (keyword arguments of record_llm_call), and an
    emitted reward that differs between them so GiGPO gives every step an advantage."""
    arl.configure(db=str(path), export_delay_ms=50, capture_content=True)
    for i, call in enumerate(calls):
        with arl.rollout(task_id="sum", group_id="g"):
            arl.record_llm_call("policy", QUESTION, f"answer {i}", **call)
            arl.emit_reward(float(i), name="correct")
    assert arl.flush()
    arl.shutdown()


def llm_attributes(path) -> list[dict]:
    with duckdb.connect(str(path), read_only=True) as connection:
        rows = connection.execute(
            "select attributes from spans where name = 'chat policy' order by start_time"
        ).fetchall()
    return [json.loads(row[0]) for row in rows]


def llm_span(exporter):
    arl.flush()
    return [span for span in exporter.get_finished_spans() if span.name == "chat policy"][-1]


def test_logprobs_and_state_key_reach_the_step_dataset(tmp_path, plugin_manager):
    path = tmp_path / "agent_rl.duckdb"
    record_group(
        path,
        [
            {"state_key": "start", "logprobs": [-0.25, -1.5], "token_ids": [19, 4]},
            {"state_key": "start"},  # this call logged no log-probs
        ],
    )
    steps = build_step_dataset(path)
    assert steps["old_logprobs"] == [[-0.25, -1.5], None]
    assert steps["state_key"] == ["start", "start"]
    # the offline GRPO/GiGPO trainer takes its behaviour log-probs from these rows
    assert [row["old_logprobs"] for row in iter_completions(steps)] == [[-0.25, -1.5], None]
    assert sc.LOGPROBS == LOGPROBS_ATTRIBUTE
    assert llm_attributes(path)[0][sc.TOKEN_IDS] == [19, 4]


def test_long_logprobs_are_never_cut_to_the_attribute_size(tmp_path, plugin_manager):
    path = tmp_path / "agent_rl.duckdb"
    many = [-0.123456789012345] * 5000  # about 90 kB of JSON, over the 64 kB size limit below
    arl.configure(db=str(path), export_delay_ms=50, max_attribute_size=65_536)
    with arl.rollout(group_id="g"):
        arl.record_llm_call("policy", QUESTION, "a", logprobs=many)
        arl.emit_reward(1.0)
    assert arl.flush()
    arl.shutdown()
    assert llm_attributes(path)[0][sc.LOGPROBS] == many


def test_numpy_arrays_are_accepted(span_exporter):
    arl.configure(db_path=None, export_delay_ms=50, capture_content=True)
    with arl.rollout():
        arl.record_llm_call("policy", "q", "a", logprobs=np.array([-0.5, -2.0], np.float32), token_ids=np.array([7, 8]))
    span = llm_span(span_exporter)
    assert span.attributes[sc.LOGPROBS] == (-0.5, -2.0)
    assert span.attributes[sc.TOKEN_IDS] == (7, 8)


def test_token_ids_spell_the_output_so_they_follow_capture_content(span_exporter):
    arl.configure(db_path=None, export_delay_ms=50, capture_content=False)
    with arl.rollout():
        arl.record_llm_call("policy", "q", "a", logprobs=[-0.5], token_ids=[7])
    span = llm_span(span_exporter)
    assert span.attributes[sc.LOGPROBS] == (-0.5,)
    assert sc.TOKEN_IDS not in span.attributes


@pytest.mark.parametrize(
    "call, kept, dropped, logged",
    [
        ({"logprobs": [-0.5, float("nan")], "token_ids": [1, 2]}, [sc.TOKEN_IDS], [sc.LOGPROBS], "logprobs[1]"),
        ({"logprobs": [-0.5, "x"]}, [], [sc.LOGPROBS], "logprobs[1]"),
        ({"logprobs": "-0.5"}, [], [sc.LOGPROBS], "must be a sequence"),
        ({"logprobs": [-0.5], "token_ids": [1.5]}, [sc.LOGPROBS], [sc.TOKEN_IDS], "token_ids[0]"),
        ({"logprobs": [-0.5], "token_ids": [-1]}, [sc.LOGPROBS], [sc.TOKEN_IDS], "token_ids[0]"),
        ({"logprobs": [-0.5, -1.0], "token_ids": [1]}, [], [sc.LOGPROBS, sc.TOKEN_IDS], "2 logprobs for 1 token_ids"),
        ({"state_key": 3, "logprobs": [-0.5]}, [sc.LOGPROBS], [sc.STATE_KEY], "state_key must be a str"),
    ],
)
def test_invalid_values_are_logged_and_left_out_never_raised(span_exporter, caplog, call, kept, dropped, logged):
    arl.configure(db_path=None, export_delay_ms=50, capture_content=True)
    with caplog.at_level(logging.DEBUG, logger="agent_rl_plugin"), arl.rollout():
        context = arl.record_llm_call("policy", "q", "a", **call)
    assert context is not None  # the call itself is recorded
    span = llm_span(span_exporter)
    for key in kept:
        assert key in span.attributes
    for key in dropped:
        assert key not in span.attributes
    assert logged in caplog.text
