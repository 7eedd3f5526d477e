"""RLAgentMixin / RLOrchestratorMixin on agent classes that know nothing about tracing."""

from __future__ import annotations

import asyncio
import inspect

import agent_rl_plugin as arl
from agent_rl_plugin import semconv as sc
from agent_rl_plugin.config import RLConfig


def finished(exporter) -> list:
    arl.flush()
    return list(exporter.get_finished_spans())


# --- agents as a framework would write them ---------------------------------------------------
class SingleAgent:
    def __init__(self, name: str, *, temperature: float = 0.0) -> None:
        self.agent_id = name
        self.temperature = temperature

    async def chat(self, messages: list[dict]):
        """Stream the answer word by word."""
        for word in f"{self.agent_id} says {messages[-1]['content']}".split():
            await asyncio.sleep(0)
            yield {"type": "content", "content": word + " "}

    async def arun(self, task: str) -> str:
        await asyncio.sleep(0)
        return f"{self.agent_id}:{self.search(task)}"

    def search(self, query: str) -> str:
        return query.upper()

    def helper(self) -> str:
        return "not an agent method"


class Orchestrator:
    def __init__(self, agents: list) -> None:
        self.agents = agents

    async def chat(self, messages: list[dict]):
        for agent in self.agents:
            async for chunk in agent.chat(messages):
                yield chunk
        self.rl_record_event(sc.EVENT_TYPE_FINAL_ANSWER, agent_id="a1", content="done")
        yield {"type": "done", "content": "!"}

    async def run(self, task: str) -> list[str]:
        tasks = [asyncio.create_task(a.arun(task)) for a in self.agents[:1]]
        gathered = await asyncio.gather(*(a.arun(task) for a in self.agents[1:]))
        return [*gathered, *await asyncio.gather(*tasks)]


class RLSingle(arl.RLAgentMixin, SingleAgent):
    rl_tool_methods = ("search",)


class RLOrch(arl.RLOrchestratorMixin, Orchestrator):
    pass


async def collect(agen) -> str:
    return "".join([chunk["content"] async for chunk in agen])


# --- class-level wrapping ---------------------------------------------------------------------
def test_default_methods_are_wrapped_on_the_subclass_only() -> None:
    assert "chat" in RLSingle.__dict__ and "arun" in RLSingle.__dict__
    assert "helper" not in RLSingle.__dict__
    assert "search" in RLSingle.__dict__  # rl_tool_methods
    assert SingleAgent.__dict__["chat"] is RLSingle.__dict__["chat"].__wrapped__  # base untouched
    assert inspect.isasyncgenfunction(RLSingle.chat)
    assert RLSingle.chat.__doc__ == "Stream the answer word by word."


def test_explicit_rl_methods() -> None:
    class OnlyArun(arl.RLAgentMixin, SingleAgent):
        rl_methods = ("arun",)

    assert "arun" in OnlyArun.__dict__ and "chat" not in OnlyArun.__dict__


def test_init_keyword_arguments_are_taken_out_before_the_base() -> None:
    agent = RLSingle("a1", temperature=0.5, enable_rl=True)
    assert (agent.agent_id, agent.temperature) == ("a1", 0.5)

    class NoInit(arl.RLAgentMixin):
        def run(self) -> int:
            return 1

    assert NoInit(enable_rl=False).run() == 1


def test_agent_span_shape(span_exporter) -> None:
    agent = RLSingle("a1")
    text = asyncio.run(collect(agent.chat([{"role": "user", "content": "hi"}])))
    assert text == "a1 says hi "
    (span,) = finished(span_exporter)
    assert span.name == "invoke_agent RLSingle"
    attributes = span.attributes
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert attributes[sc.GEN_AI_AGENT_NAME] == "RLSingle"
    assert attributes[sc.GEN_AI_AGENT_ID] == "a1"
    assert attributes[sc.SPAN_KIND] == "agent"
    assert attributes[sc.AGENT_ROLE] == "agent"
    assert attributes[sc.ROLLOUT_INPUT] == '{"messages": [{"role": "user", "content": "hi"}]}'
    assert attributes[sc.GEN_AI_INPUT_MESSAGES] == '[{"role": "user", "content": "hi"}]'
    assert attributes[sc.ROLLOUT_OUTPUT] == '"a1 says hi "'  # streamed text, as JSON
    assert attributes[sc.STREAM_CHUNKS] == 3
    assert attributes[sc.STREAM_OUTCOME] == "exhausted"


def test_tool_methods(span_exporter) -> None:
    assert asyncio.run(RLSingle("a1").arun("x")) == "a1:X"
    spans = {s.name: s for s in finished(span_exporter)}
    tool = spans["execute_tool search"]
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "search"
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] == '{"query": "x"}'
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_RESULT] == '"X"'
    assert len(tool.attributes[sc.GEN_AI_TOOL_CALL_ID]) == 32
    assert tool.parent.span_id == spans["invoke_agent RLSingle"].context.span_id


def test_subclass_of_a_traced_class_is_named_after_itself(span_exporter) -> None:
    class Special(RLSingle):
        pass

    asyncio.run(Special("s").arun("x"))
    names = sorted(s.name for s in finished(span_exporter))
    assert names == ["execute_tool search", "invoke_agent Special"]


def test_enable_rl_false_instance_is_not_recorded(span_exporter) -> None:
    quiet, loud = RLSingle("q", enable_rl=False), RLSingle("l")
    assert asyncio.run(quiet.arun("x")) == "q:X"
    assert asyncio.run(collect(quiet.chat([{"content": "hi"}]))) == "q says hi "
    assert asyncio.run(loud.arun("x")) == "l:X"
    assert [s.attributes.get(sc.GEN_AI_AGENT_ID) for s in finished(span_exporter)] == [None, "l"]


def test_enable_rl_false_covers_what_its_generators_call(span_exporter) -> None:
    """Recording is off inside the (async) generators of a disabled instance too, around every
    resume: their tool calls and record_* calls leave no span; an enabled twin records them."""

    class Streaming(arl.RLAgentMixin):
        rl_tool_methods = ("search",)

        def search(self, query: str) -> str:
            return query.upper()

        async def chat(self, messages: list[dict]):
            for message in messages:
                await asyncio.sleep(0)
                arl.record_llm_call(model="m", input_messages=[message], output_text="ok")
                yield self.search(message["content"])

        def steps(self, words: list[str]):
            for word in words:
                yield self.search(word)

    async def drain(agent):
        return [chunk async for chunk in agent.chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])]

    quiet = Streaming(enable_rl=False)
    assert asyncio.run(drain(quiet)) == ["A", "B"]
    assert list(quiet.steps(["x", "y"])) == ["X", "Y"]
    assert finished(span_exporter) == []
    assert asyncio.run(drain(Streaming())) == ["A", "B"]
    names = sorted(span.name for span in finished(span_exporter))
    assert names.count("execute_tool search") == 2 and any(name.startswith("chat") for name in names)


def test_enable_rl_false_instance_may_emit_rewards(span_exporter) -> None:
    class Rewarding(arl.RLAgentMixin):
        def run(self) -> str:
            arl.emit_reward(1.0)  # outside a rollout: fine, because nothing is recorded
            return "ran"

    assert Rewarding(enable_rl=False).run() == "ran"
    assert finished(span_exporter) == []


def test_rl_config_configures_recording(span_exporter) -> None:
    config = RLConfig(db_path=None, capture_content=False, export_delay_ms=50)
    agent = RLSingle("c", rl_config=config)
    asyncio.run(agent.arun("secret"))
    for span in finished(span_exporter):
        assert sc.ROLLOUT_INPUT not in span.attributes
        assert sc.GEN_AI_TOOL_CALL_ARGUMENTS not in span.attributes


# --- orchestrators ----------------------------------------------------------------------------
def test_orchestrator_streams_sub_agents_as_children(span_exporter) -> None:
    orchestrator = RLOrch([RLSingle("a1"), RLSingle("a2")])
    text = asyncio.run(collect(orchestrator.chat([{"role": "user", "content": "go"}])))
    assert text == "a1 says go a2 says go !"
    spans = finished(span_exporter)
    (root,) = [s for s in spans if s.name == "invoke_agent RLOrch"]
    subs = [s for s in spans if s.name == "invoke_agent RLSingle"]
    assert root.attributes[sc.AGENT_ROLE] == "orchestrator"
    assert root.attributes[sc.ROLLOUT_ROOT] is True
    assert [s.attributes[sc.GEN_AI_AGENT_ID] for s in subs] == ["a1", "a2"]
    for sub in subs:
        assert sub.parent.span_id == root.context.span_id
        assert sub.attributes[sc.ROLLOUT_ID] == root.attributes[sc.ROLLOUT_ID]
        assert sc.ROLLOUT_ROOT not in sub.attributes
    (event,) = root.events
    assert event.name == sc.EVENT_NAME
    assert event.attributes[sc.EVENT_TYPE] == "final_answer"
    assert event.attributes[sc.ROLLOUT_ID] == root.attributes[sc.ROLLOUT_ID]


def test_orchestrator_with_concurrent_sub_agents(span_exporter) -> None:
    orchestrator = RLOrch([RLSingle(f"a{i}") for i in range(4)])

    async def main() -> list[str]:
        async with arl.rollout(task_id="t", group_id="g"):
            return await orchestrator.run("q")

    assert sorted(asyncio.run(main())) == ["a0:Q", "a1:Q", "a2:Q", "a3:Q"]
    spans = finished(span_exporter)
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (rollout_span,) = by_name["rollout t"]
    (root,) = by_name["invoke_agent RLOrch"]
    assert root.parent.span_id == rollout_span.context.span_id
    assert sc.ROLLOUT_ROOT not in root.attributes  # the explicit rollout is the root
    assert len(by_name["invoke_agent RLSingle"]) == 4
    for sub in by_name["invoke_agent RLSingle"]:
        assert sub.parent.span_id == root.context.span_id
    subs = {s.context.span_id for s in by_name["invoke_agent RLSingle"]}
    assert {t.parent.span_id for t in by_name["execute_tool search"]} == subs
    assert {s.attributes[sc.TASK_ID] for s in spans} == {"t"}
