"""docs/instrumenting.md: the hand-recorded episode of "The shape of `tool_calls`" runs as
written and prints exactly the output the page shows (each call's name, arguments and id reach
the step dataset), and the shapes the page calls accepted are read as calls with their name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin.data import build_step_dataset

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "instrumenting.md").read_text()
EXAMPLE = re.compile(r'```python title="record_by_hand\.py"\n(?P<code>.*?)```\s*```text\n(?P<output>.*?)```', re.S)


def test_the_hand_recorded_episode_prints_what_the_page_shows(tmp_path):
    match = EXAMPLE.search(PAGE)
    assert match, "docs/instrumenting.md lost its record_by_hand.py example and its output"
    (tmp_path / "record_by_hand.py").write_text(match["code"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RL_")}
    env["AGENT_RL_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    result = subprocess.run(
        [sys.executable, "record_by_hand.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == match["output"]


SHAPES = {
    "openai": {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 2}'}},
    "openai_dict_arguments": {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": {"x": 2}}},
    "flat": {"id": "c1", "name": "calc", "arguments": {"x": 2}},
}


def dataset_call(db_path: Path, tool_call: object) -> dict:
    """The tool call the step dataset reads back from one recorded LLM call."""
    with arl.rollout(task_id="t", group_id="g"):
        arl.record_llm_call("m", "2 * 1?", None, tool_calls=[tool_call])
        arl.emit_reward(1.0, name="r")
    arl.flush()
    (row,) = list(build_step_dataset(str(db_path)))
    (call,) = row["completion"][0]["tool_calls"]
    return call


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_documented_shape_is_read_as_a_named_call(db_path, shape):
    call = dataset_call(db_path, SHAPES[shape])
    assert call["id"] == "c1" and call["function"]["name"] == "calc"
    assert call["function"]["arguments"].replace(" ", "") == '{"x":2}'


def test_an_sdk_tool_call_object_is_read_as_a_named_call(db_path):
    from openai.types.chat import ChatCompletionMessageToolCall

    sdk_call = ChatCompletionMessageToolCall(id="c1", type="function", function={"name": "calc", "arguments": "{}"})
    call = dataset_call(db_path, sdk_call)
    assert call["id"] == "c1" and call["function"] == {"name": "calc", "arguments": "{}"}


def test_a_tuple_is_read_as_a_call_with_no_name_as_the_page_warns(db_path):
    assert dataset_call(db_path, ("calc", {"x": 2}))["function"]["name"] == ""
