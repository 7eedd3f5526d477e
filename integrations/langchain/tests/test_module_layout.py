"""The package's shape: no module over 600 lines (the project rule), and the names
``agent_rl_langchain.handler`` defined before its helpers moved to ``runs`` / ``attributes`` /
``events`` stay importable from it, as the same objects."""

from __future__ import annotations

from pathlib import Path

import agent_rl_langchain
from agent_rl_langchain import attributes, events, handler, runs

MAX_LINES = 600


def test_no_module_is_over_600_lines():
    package = Path(agent_rl_langchain.__file__).parent
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in package.glob("*.py")}
    assert "handler.py" in sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_names_moved_out_of_the_handler_stay_importable_from_it():
    moved = {
        "_Run": runs.Run,
        "_is_ancestor": runs.is_ancestor,
        "RUN_ID": runs.RUN_ID,
        "UNFINISHED": runs.UNFINISHED,
        "_langgraph_attributes": attributes.langgraph_attributes,
        "_serialized_name": attributes.serialized_name,
        "_maybe_json": attributes.maybe_json,
        "SPAN_KIND_CHAIN": attributes.SPAN_KIND_CHAIN,
        "LANGGRAPH_NODE": attributes.LANGGRAPH_NODE,
        "LANGGRAPH_STEP": attributes.LANGGRAPH_STEP,
        "LANGGRAPH_BUBBLE_UP": attributes.LANGGRAPH_BUBBLE_UP,
        "EVENT_HANDOFF": events.EVENT_HANDOFF,
        "_EVENT_FIELDS": events.EVENT_FIELDS,
    }
    assert {name: getattr(handler, name, None) is value for name, value in moved.items()} == dict.fromkeys(moved, True)
    assert (handler.RUN_ID, handler.UNFINISHED, handler.LANGGRAPH_NODE) == (
        "langchain.run.id",
        "agent_rl.langchain.unfinished",
        "langgraph.node",
    )
    assert agent_rl_langchain.AgentRLCallbackHandler is handler.AgentRLCallbackHandler
    assert handler.__all__ == ["AgentRLCallbackHandler"]
