"""Plain LangChain: an LCEL chain (prompt | model | parser), batches in threads, a string LLM,
a retriever, custom events, and a model whose answer carries reasoning blocks."""

from __future__ import annotations

import json

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

from agent_rl_langchain import AgentRLCallbackHandler
from fakes import ScriptedChatModel, usage

PROMPT = ChatPromptTemplate.from_messages([("system", "You are terse."), ("user", "Capital of {country}?")])


def test_lcel_chain(recording, store):
    model = ScriptedChatModel(script=[AIMessage(content="Paris", usage_metadata=usage(9, 1),
                                                response_metadata={"model_name": "scripted-model-0613",
                                                                   "finish_reason": "stop"})])
    chain = PROMPT | model | StrOutputParser()
    assert chain.invoke({"country": "France"}, config={"callbacks": [AgentRLCallbackHandler()],
                                                       "run_name": "capitals"}) == "Paris"
    (rollout,) = store.rows("select name, input, output, n_llm_calls from rollouts")
    assert rollout == {"name": "invoke_agent capitals", "input": '{"country": "France"}', "output": '"Paris"',
                       "n_llm_calls": 1}
    (call,) = store.rows("select * from llm_calls")
    assert json.loads(call["input_messages"]) == [{"role": "system", "content": "You are terse."},
                                                  {"role": "user", "content": "Capital of France?"}]
    assert call["response_model"] == "scripted-model-0613" and json.loads(call["finish_reasons"]) == ["stop"]
    assert store.one("select count(*) from events") == 0  # no message state: no final_answer event


def test_batch_in_threads_gives_one_rollout_each(recording, store):
    model = ScriptedChatModel(script=[AIMessage(content=c) for c in ("Paris", "Rome", "Madrid")])
    chain = PROMPT | model | StrOutputParser()
    answers = chain.batch([{"country": c} for c in ("France", "Italy", "Spain")],
                          config={"callbacks": [AgentRLCallbackHandler()], "max_concurrency": 3})
    assert sorted(answers) == ["Madrid", "Paris", "Rome"]
    rows = store.rows("select n_llm_calls from rollouts")
    assert len(rows) == 3 and {r["n_llm_calls"] for r in rows} == {1}


def test_string_llm_is_a_text_completion(recording, store):
    llm = FakeListLLM(responses=["4"])
    assert (RunnableLambda(lambda q: q) | llm).invoke("2+2=", config={"callbacks": [AgentRLCallbackHandler()]}) == "4"
    (call,) = store.rows("select operation, input_messages, output_messages from llm_calls")
    assert call["operation"] == "text_completion"
    assert json.loads(call["input_messages"]) == [{"role": "user", "content": "2+2="}]
    assert json.loads(call["output_messages"]) == [{"role": "assistant", "content": "4"}]


class Docs(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        return [Document(page_content=f"about {query}", metadata={"source": "kb"})]


def test_retriever_is_a_datastore_tool(recording, store):
    chain = RunnableLambda(lambda q: q) | Docs()
    docs = chain.invoke("paris", config={"callbacks": [AgentRLCallbackHandler()]})
    assert docs[0].page_content == "about paris"
    (tool,) = store.rows("""select tool_name, arguments, result, attributes->>'$."gen_ai.tool.type"' as type
                            from tool_calls join spans using (span_id)""")
    assert tool["tool_name"] == "Docs" and tool["type"] == "datastore"
    assert json.loads(tool["arguments"]) == {"query": "paris"}
    assert json.loads(tool["result"]) == [{"page_content": "about paris", "metadata": {"source": "kb"}}]


def test_custom_events_become_events(recording, store):
    def vote(x):
        dispatch_custom_event("vote", {"agent_id": "a1", "target": "a2", "reason": "better", "round": 1, "score": 0.9})
        return x

    RunnableLambda(vote, name="voter").invoke(1, config={"callbacks": [AgentRLCallbackHandler()]})
    (event,) = store.rows("select event_type, agent_id, target, reason, round, data from events")
    assert event == {"event_type": "vote", "agent_id": "a1", "target": "a2", "reason": "better", "round": 1,
                     "data": '{"score": 0.9}'}


def test_reasoning_blocks(recording, store):
    answer = AIMessage(content=[{"type": "reasoning", "reasoning": "2 and 2 make 4"}, {"type": "text", "text": "4"}])
    model = ScriptedChatModel(script=[answer])
    model.invoke("2+2?", config={"callbacks": [AgentRLCallbackHandler()]})
    (call,) = store.rows("select reasoning, output_messages from llm_calls")
    assert call["reasoning"] == "2 and 2 make 4"
    assert json.loads(call["output_messages"]) == [{"role": "assistant", "content": "4"}]
    # a model called on its own (no chain around it) records its call, outside any rollout
    assert store.one("select count(*) from spans where span_kind = 'agent'") == 0



def test_message_chunks_convert_like_messages():
    from langchain_core.messages import AIMessageChunk, HumanMessage, ToolMessage

    from agent_rl_langchain.convert import message_dict

    chunk = AIMessageChunk(content="hi", tool_call_chunks=[{"name": "add", "args": '{"a": 1}', "id": "c", "index": 0}])
    assert message_dict(chunk) == {"role": "assistant", "content": "hi", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]}
    assert message_dict(HumanMessage(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])) == {
        "role": "user", "content": "ab"}
    assert message_dict(ToolMessage(content="boom", tool_call_id="c", status="error")) == {
        "role": "tool", "content": "boom", "tool_call_id": "c", "status": "error"}
