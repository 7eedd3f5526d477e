"""The entry point, installing/removing the processor, and the pure conversions."""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points

from agents import OpenAIResponsesModel
from agents.tracing import get_trace_provider

import agent_rl_openai_agents as arl_oa
from agent_rl_openai_agents.convert import iso_to_ns, rollout_id_for, to_chat_messages, usage_numbers
from agent_rl_plugin import plugins
from fakes import ScriptedModel, openai_client


def test_entry_point_registered_and_loads_without_the_sdk():
    (ep,) = [e for e in entry_points(group="agent_rl_plugin") if e.name == "openai_agents"]
    assert ep.value == "agent_rl_openai_agents.plugin"
    saved = {k: v for k, v in sys.modules.items()
             if k in ("agents", "openai") or k.startswith(("agents.", "openai.", "agent_rl_openai_agents"))}
    try:
        for name in saved:
            del sys.modules[name]
        ep.load()
        importlib.import_module("agent_rl_openai_agents")
        assert "agents" not in sys.modules  # neither the plugin nor the package import the SDK
    finally:
        sys.modules.update(saved)
    pm = plugins.new_plugin_manager(load_entry_points=True)
    assert pm.get_plugin("openai_agents") is not None
    assert "openai_agents" not in plugins.load_errors


def _processors():
    return list(get_trace_provider()._multi_processor._processors)


def test_instrument_modes_and_uninstrument():
    processor = arl_oa.instrument()
    assert arl_oa.instrument() is processor and _processors().count(processor) == 1
    assert arl_oa.installed_processor() is processor
    arl_oa.instrument(exclusive=True)
    assert _processors() == [processor]
    arl_oa.uninstrument()
    assert processor not in _processors() and not processor.active
    assert arl_oa.installed_processor() is None
    arl_oa.uninstrument()  # no-op


def test_instrument_model_only_wraps_custom_models():
    custom = ScriptedModel([])
    wrapped = arl_oa.instrument_model(custom)
    assert isinstance(wrapped, arl_oa.RLModel) and wrapped.rl_wrapped is custom
    assert arl_oa.instrument_model(wrapped) is wrapped
    assert wrapped.model == "scripted-1" and wrapped.calls is custom.calls  # attributes pass through
    assert arl_oa.instrument_model("gpt-4o-mini") == "gpt-4o-mini"
    assert arl_oa.instrument_model(None) is None
    sdk = OpenAIResponsesModel(model="gpt-test", openai_client=openai_client())
    assert arl_oa.instrument_model(sdk) is sdk


def test_conversions():
    items = [
        {"role": "system", "content": "s"},
        {"content": [{"type": "input_text", "text": "hi"}], "role": "user", "type": "message"},
        {"type": "message", "role": "assistant", "id": "m", "status": "completed",
         "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "x"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
    ]
    messages, reasoning = to_chat_messages(items)
    assert messages == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    assert reasoning == "think"
    assert to_chat_messages("hello") == ([{"role": "user", "content": "hello"}], None)
    dumped = {"object": "response", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]}
    assert to_chat_messages([dumped])[0] == [{"role": "assistant", "content": "x"}]
    assert usage_numbers({"prompt_tokens": 3, "completion_tokens": 2}) == (3, 2)
    assert usage_numbers(None) == (None, None)
    assert iso_to_ns("1970-01-01T00:00:01.000002+00:00") == 1_000_002_000
    assert rollout_id_for("trace_" + "ab" * 16) == "ab" * 16
    assert len(rollout_id_for("custom-id")) == 32
