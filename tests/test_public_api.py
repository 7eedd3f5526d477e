"""The public names of DESIGN.md section 4 are importable from the top-level package."""

from __future__ import annotations

import inspect

import agent_rl_plugin as arl
import agent_rl_plugin.instrumentation  # noqa: F401 - importing the subpackage must not shadow names

PUBLIC = [
    "configure", "trace_agent", "trace_tool", "RLAgentMixin", "RLOrchestratorMixin", "instrument",
    "uninstrument", "rollout", "current_rollout", "emit_reward", "record_llm_call", "record_tool_call",
    "record_event", "flush", "shutdown", "hookimpl", "RLConfig", "score",
]


def test_every_public_name_is_exported():
    assert set(PUBLIC) <= set(arl.__all__)
    for name in PUBLIC:
        assert getattr(arl, name) is not None


def test_instrument_is_the_function_not_a_module():
    assert inspect.isfunction(arl.instrument)
    assert "methods" in inspect.signature(arl.instrument).parameters


def test_unknown_names_raise_attribute_error():
    try:
        arl.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
