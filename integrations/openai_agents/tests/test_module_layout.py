"""The package's shape: no module over 600 lines (the project rule), and the names
``agent_rl_openai_agents.processor`` defined before its parts moved to ``spans`` / ``state`` /
``span_errors`` stay importable from it, as the same objects."""

from __future__ import annotations

from pathlib import Path

import agent_rl_openai_agents
from agent_rl_openai_agents import processor, span_errors, spans, state

MAX_LINES = 600


def test_no_module_is_over_600_lines():
    package = Path(agent_rl_openai_agents.__file__).parent
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in package.glob("*.py")}
    assert "processor.py" in sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_names_moved_out_of_the_processor_stay_importable_from_it():
    constants = [
        "SDK_TRACE_ID",
        "SDK_SPAN_ID",
        "SDK_SPAN_TYPE",
        "SDK_DATA",
        "SDK_USAGE",
        "SDK_MODEL_CONFIG",
        "SDK_LLM_FROM",
        "SDK_AGENT_TOOLS",
        "SDK_AGENT_HANDOFFS",
        "SDK_AGENT_OUTPUT_TYPE",
        "SDK_MCP_DATA",
        "EVENT_HANDOFF",
        "EVENT_GUARDRAIL",
        "LLM_TYPES",
    ]
    moved = {name: getattr(spans, name) for name in constants}
    moved.update(
        {
            "_Trace": state.TraceState,
            "_Span": state.SpanState,
            "_error_text": span_errors.error_text,
            "_error_kind": span_errors.error_kind,
            "_error_text_detail": span_errors.error_detail,
        }
    )
    assert {name: getattr(processor, name, None) is value for name, value in moved.items()} == dict.fromkeys(
        moved, True
    )
    assert (processor.SDK_USAGE, processor.LLM_TYPES) == ("openai_agents.usage", ("generation", "response"))
    for name in ("RLTracingProcessor", "instrument", "uninstrument", "installed_processor"):
        assert getattr(agent_rl_openai_agents, name) is getattr(processor, name)
    assert processor.__all__ == ["RLTracingProcessor", "instrument", "uninstrument", "installed_processor"]


def test_span_errors_read_the_sdk_span_error_shape():
    error = {"message": "Tool failed", "data": {"error": {"code": 3}}}
    assert span_errors.error_kind(error) == "Tool failed"
    assert span_errors.error_detail(error) == '{"code": 3}'
    assert span_errors.error_text(error) == "Tool failed: {'code': 3}"
    assert span_errors.error_text({"message": "m", "data": "d"}) == "m: d"
    assert (span_errors.error_kind(None), span_errors.error_detail(None), span_errors.error_text(None)) == (
        "error",
        None,
        None,
    )
    assert (span_errors.error_kind("boom"), span_errors.error_text("boom")) == ("error", "boom")
