"""``runs.RunTracker``'s contract for runs LangChain never ends (a stream abandoned mid-way, a
callback lost): ending the root run ends their spans too, marked
``agent_rl.langchain.unfinished``, and the caller's context is left as it was."""

from __future__ import annotations

import contextvars
from uuid import uuid4

from agent_rl_langchain import AgentRLCallbackHandler


def test_ending_the_root_ends_runs_that_never_ended(recording, store):
    handler = AgentRLCallbackHandler()
    root, child = uuid4(), uuid4()
    handler.on_chain_start({"name": "graph"}, {"messages": []}, run_id=root)
    # LangChain runs a child in a copy of its parent's context; this one never reports its end.
    contextvars.copy_context().run(
        handler.on_tool_start, {"name": "lookup"}, '{"q": 1}', run_id=child, parent_run_id=root
    )
    handler.on_chain_end({"messages": []}, run_id=root)
    rows = store.rows(
        """select name, attributes->>'$."agent_rl.langchain.unfinished"' as unfinished
           from spans order by start_time, name"""
    )
    assert [(r["name"], r["unfinished"]) for r in rows] == [
        ("invoke_agent graph", None),
        ("execute_tool lookup", "true"),
    ]
