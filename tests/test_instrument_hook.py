"""The ``agent_rl_instrument_object`` hook: ``instrument(obj)`` and the mixins let an installed
integration instrument the objects of its framework (here: a small "framework" whose agents call
a backend), so the integration's LLM spans and the generic agent span form one span tree.

Each test registers real plugins on a fresh plugin manager and records through an in-memory
exporter; nothing is mocked on the core's side.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.hookspecs import hookimpl


# --- a tiny framework and its integration ------------------------------------------------------
class Backend:
    def complete(self, prompt: str) -> str:
        return prompt.upper()


class FrameworkAgent:
    """A framework's agent: ``chat`` asks its backend, which the framework builds in ``__init__``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.backend = Backend()

    def chat(self, prompt: str) -> str:
        return self.backend.complete(prompt)


class FrameworkIntegration:
    """Claims ``FrameworkAgent`` instances: records each backend call as an LLM call."""

    def __init__(self, layer: bool = False) -> None:
        self.asked: list[Any] = []
        self.claimed: list[Any] = []
        self.undone: list[Any] = []
        self.backend_at_claim: list[Any] = []
        self.layer = layer  # also put a layer on the instance, that needs to run inside the agent span
        self.rollouts_seen: list[Any] = []

    @hookimpl
    def agent_rl_instrument_object(self, obj: Any) -> Callable[[], None] | None:
        self.asked.append(obj)
        if not isinstance(obj, FrameworkAgent):
            return None
        self.backend_at_claim.append(getattr(obj, "backend", None))
        backend = obj.backend
        original = backend.complete

        def complete(prompt: str) -> str:
            text = original(prompt)
            arl.record_llm_call("fw-model", [{"role": "user", "content": prompt}], text)
            return text

        backend.__dict__["complete"] = complete
        if self.layer:
            chat = obj.chat  # the method the layer replaces: it calls it

            def layered(prompt: str) -> str:
                self.rollouts_seen.append(arl.current_rollout())
                return chat(prompt)

            obj.__dict__["chat"] = layered
        self.claimed.append(obj)

        def undo() -> None:
            self.undone.append(obj)
            backend.__dict__.pop("complete", None)
            obj.__dict__.pop("chat", None)

        return undo


class Raising:
    @hookimpl
    def agent_rl_instrument_object(self, obj: Any) -> Callable[[], None] | None:
        raise RuntimeError("integration bug")


def spans(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


def kinds(exporter) -> list[tuple[str, str]]:
    return sorted((s.name, s.attributes.get(sc.SPAN_KIND)) for s in spans(exporter))


def assert_one_tree(exporter) -> None:
    """One agent span, the LLM span its child."""
    found = spans(exporter)
    agents = [s for s in found if s.attributes.get(sc.SPAN_KIND) == sc.SPAN_KIND_AGENT]
    llms = [s for s in found if s.attributes.get(sc.SPAN_KIND) == sc.SPAN_KIND_LLM]
    assert len(agents) == 1 and len(llms) == 1, [s.name for s in found]
    assert llms[0].parent is not None and llms[0].parent.span_id == agents[0].context.span_id


@pytest.fixture
def integration(plugin_manager) -> FrameworkIntegration:
    plugin = FrameworkIntegration()
    plugin_manager.register(plugin, name="framework")
    return plugin


# --- instrument() ---------------------------------------------------------------------------------
def test_instrument_asks_the_integration_once_and_undo_restores(span_exporter, integration) -> None:
    agent = FrameworkAgent("a")
    before_agent, before_backend = dict(vars(agent)), dict(vars(agent.backend))
    assert arl.instrument(agent) is agent
    arl.instrument(agent)  # idempotent: not asked again
    assert integration.claimed == [agent] and integration.asked == [agent]
    assert agent.chat("hi") == "HI"
    assert_one_tree(span_exporter)
    assert kinds(span_exporter) == [("chat fw-model", "llm"), ("invoke_agent FrameworkAgent", "agent")]

    arl.uninstrument(agent)
    assert integration.undone == [agent]
    assert vars(agent) == before_agent and vars(agent.backend) == before_backend
    span_exporter.clear()
    assert agent.chat("again") == "AGAIN"
    assert spans(span_exporter) == []
    arl.uninstrument(agent)  # nothing left to undo
    assert integration.undone == [agent]
    arl.instrument(agent)  # afresh after uninstrument
    assert integration.claimed == [agent, agent]


def test_an_object_nobody_claims_is_left_as_it_was(span_exporter, integration) -> None:
    class Other:
        def chat(self, prompt: str) -> str:
            return prompt

    other = Other()
    arl.instrument(other)
    assert integration.asked == [other] and integration.claimed == []
    assert set(vars(other)) == {"__agent_rl_patches__", "chat"}  # the core's wrapper only
    arl.uninstrument(other)
    assert vars(other) == {}


def test_a_layer_the_integration_puts_on_the_instance_runs_inside_the_agent_span(span_exporter, plugin_manager) -> None:
    plugin = FrameworkIntegration(layer=True)
    plugin_manager.register(plugin, name="framework")
    agent = arl.instrument(FrameworkAgent("a"))
    assert agent.chat("hi") == "HI"
    assert_one_tree(span_exporter)
    assert plugin.rollouts_seen and plugin.rollouts_seen[0] is not None  # the agent span's rollout
    arl.uninstrument(agent)
    assert "chat" not in vars(agent)


def test_first_integration_that_claims_wins(span_exporter, plugin_manager) -> None:
    first, second = FrameworkIntegration(), FrameworkIntegration()
    plugin_manager.register(second, name="second")
    plugin_manager.register(first, name="first")  # registered last: asked first (pluggy's order)
    agent = arl.instrument(FrameworkAgent("a"))
    assert first.claimed == [agent] and second.asked == []
    assert agent.chat("x") == "X"
    assert_one_tree(span_exporter)


def test_a_raising_hook_is_logged_and_never_breaks_instrument(span_exporter, plugin_manager, caplog) -> None:
    working = FrameworkIntegration()
    plugin_manager.register(working, name="working")
    plugin_manager.register(Raising(), name="raising")  # asked first
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin"):
        agent = arl.instrument(FrameworkAgent("a"))
    assert "agent_rl_instrument_object hook of plugin 'raising'" in caplog.text
    assert working.claimed == [agent]  # the next implementation was still asked
    assert agent.chat("x") == "X"
    assert_one_tree(span_exporter)


def test_only_a_raising_hook_leaves_the_generic_agent_span(span_exporter, plugin_manager) -> None:
    plugin_manager.register(Raising(), name="raising")
    agent = arl.instrument(FrameworkAgent("a"))
    assert agent.chat("x") == "X"
    assert kinds(span_exporter) == [("invoke_agent FrameworkAgent", "agent")]
    arl.uninstrument(agent)
    assert vars(agent) == {"name": "a", "backend": agent.backend}


def test_a_raising_undo_is_logged(span_exporter, plugin_manager, caplog) -> None:
    class BadUndo:
        @hookimpl
        def agent_rl_instrument_object(self, obj: Any) -> Callable[[], None] | None:
            def undo() -> None:
                raise RuntimeError("cannot undo")

            return undo

    plugin_manager.register(BadUndo(), name="bad-undo")
    agent = arl.instrument(FrameworkAgent("a"))
    with caplog.at_level(logging.WARNING, logger="agent_rl_plugin"):
        arl.uninstrument(agent)
    assert "undoing an agent_rl_instrument_object hook" in caplog.text
    assert vars(agent) == {"name": "a", "backend": agent.backend}


# --- the mixins ------------------------------------------------------------------------------------
class RLFramework(arl.RLAgentMixin, FrameworkAgent):
    pass


class RLFrameworkOrchestrator(arl.RLOrchestratorMixin, FrameworkAgent):
    pass


@pytest.mark.parametrize("cls", [RLFramework, RLFrameworkOrchestrator])
def test_mixin_offers_each_instance_after_the_base_init(span_exporter, integration, cls) -> None:
    agent = cls("a")
    assert integration.claimed == [agent]
    assert integration.backend_at_claim == [agent.backend]  # the framework object was built
    assert agent.chat("hi") == "HI"
    assert_one_tree(span_exporter)
    arl.instrument(agent)  # claimed already: not asked again, no second agent span
    assert integration.asked == [agent]
    span_exporter.clear()
    agent.chat("hi")
    assert_one_tree(span_exporter)
    arl.uninstrument(agent)
    assert integration.undone == [agent]
    assert "complete" not in vars(agent.backend)


def test_enable_rl_false_is_never_offered(span_exporter, integration) -> None:
    agent = RLFramework("a", enable_rl=False)
    arl.instrument(agent)
    assert integration.asked == []
    assert agent.chat("hi") == "HI"
    assert spans(span_exporter) == []


def test_a_raising_hook_never_breaks_the_mixin(span_exporter, plugin_manager) -> None:
    plugin_manager.register(Raising(), name="raising")
    agent = RLFramework("a")
    assert agent.chat("x") == "X"
    assert kinds(span_exporter) == [("invoke_agent RLFramework", "agent")]
