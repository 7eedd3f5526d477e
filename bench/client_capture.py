"""Added time per OpenAI SDK call when ``configure()`` captures it, against the same call uncaptured.

    python -m bench --only capture [--quick]

One process, the real ``openai`` SDK, answered in-process by an ``httpx`` mock transport (no
socket, so the SDK's own work is the whole baseline and capture's share is not hidden behind a
network round trip). Spans go to an exporter that discards and counts them. Measured,
interleaved, medians of ``repeats`` samples of ``calls`` calls each, inside one rollout:

* ``captured``: ``client.chat.completions.create(...)`` with capture on (one ``chat`` span per call:
  messages, tool definitions, usage, token ids and log-probs of a vLLM-style answer);
* ``uncaptured``: the same call with capture off (``uninstrument_clients()``);
* the same two for ``stream=True`` (16 chunks per answer).

Checks: every captured call produced exactly one span, uncaptured calls none.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult  # noqa: E402

from bench.harness import Context, Measure, Row, interleave, median  # noqa: E402

WORDS = [f" w{i}" for i in range(16)]


def _whole_body() -> bytes:
    return json.dumps({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "token_ids": list(range(16)),
                     "message": {"role": "assistant", "content": "".join(WORDS)},
                     "logprobs": {"content": [{"token": w, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                              for w in WORDS]}}],
        "prompt_token_ids": list(range(40)),
        "usage": {"prompt_tokens": 40, "completion_tokens": 16, "total_tokens": 56},
    }).encode()


def _stream_body() -> bytes:
    events = []
    for i, word in enumerate(WORDS):
        choice = {"index": 0, "delta": {"content": word}, "finish_reason": "stop" if i == 15 else None,
                  "token_ids": [i]}
        events.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


class Counter(SpanExporter):
    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.count += sum(1 for s in spans if s.name.startswith("chat "))
        return SpanExportResult.SUCCESS


def run(ctx: Context) -> Row:
    import time

    import httpx2
    import openai

    import agent_rl_plugin as arl
    from agent_rl_plugin import plugins, tracing
    from agent_rl_plugin.hookspecs import hookimpl
    from agent_rl_plugin.instrumentation.clients import instrument_clients, uninstrument_clients

    calls, repeats = ctx.size(2_000, 200), ctx.size(7, 3)
    row = Row(id="capture", sizes={"calls": calls, "repeats": repeats})
    counter = Counter()

    class CountPlugin:
        @hookimpl
        def agent_rl_register_exporters(self, register: Any, config: Any) -> None:
            register("count", counter)

    pm = plugins.new_plugin_manager(load_entry_points=False)
    pm.register(CountPlugin())
    plugins.set_plugin_manager(pm)
    tracing.configure(db_path=None, max_queue_size=1 << 20, instrument_clients="none")
    whole, stream = _whole_body(), _stream_body()

    def answer(request: httpx2.Request) -> httpx2.Response:
        streaming = b'"stream":true' in request.content.replace(b" ", b"")
        if streaming:
            return httpx2.Response(200, content=stream, headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, content=whole, headers={"content-type": "application/json"})

    client = openai.OpenAI(base_url="http://bench.invalid/v1", api_key="bench",
                           http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Which way?"}]
    tools = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]

    def whole_call() -> None:
        client.chat.completions.create(model="m", messages=messages, tools=tools, logprobs=True,
                                       extra_body={"return_token_ids": True})

    def stream_call() -> None:
        for _ in client.chat.completions.create(model="m", messages=messages, stream=True):
            pass

    spans_expected = {"n": 0}

    def sample(fn: Any, captured: bool) -> float:
        if captured:
            instrument_clients(["openai"])
        else:
            uninstrument_clients(["openai"])
        with arl.rollout(task_id="bench"):
            started = time.perf_counter()
            for _ in range(calls):
                fn()
            elapsed = time.perf_counter() - started
        if captured:
            spans_expected["n"] += calls
        return elapsed / calls * 1e6

    ctx.log(f"capture: {calls} OpenAI SDK calls per sample, x{repeats}, captured vs uncaptured, interleaved")
    samples = interleave({
        "captured": lambda: sample(whole_call, True),
        "uncaptured": lambda: sample(whole_call, False),
        "captured stream": lambda: sample(stream_call, True),
        "uncaptured stream": lambda: sample(stream_call, False),
    }, repeats, warmup=1)
    tracing.flush()
    uninstrument_clients(["openai"])
    row.value = Measure("captured chat.completions.create", "us/call", samples["captured"])
    row.baselines.append(Measure("the same call, capture off", "us/call", samples["uncaptured"]))
    row.baselines.append(Measure("captured, stream=True (16 chunks)", "us/call", samples["captured stream"]))
    row.baselines.append(Measure("stream=True, capture off", "us/call", samples["uncaptured stream"]))
    whole_ratio = median(samples["captured"]) / median(samples["uncaptured"])
    stream_ratio = median(samples["captured stream"]) / median(samples["uncaptured stream"])
    row.ratios["captured / uncaptured"] = whole_ratio
    row.ratios["captured / uncaptured, stream"] = stream_ratio
    row.info["added_us_per_call"] = median(samples["captured"]) - median(samples["uncaptured"])
    row.info["added_us_per_streamed_call"] = median(samples["captured stream"]) - median(samples["uncaptured stream"])
    row.target("captured / uncaptured SDK call", whole_ratio, "<=", 1.25)
    row.target("captured / uncaptured streamed SDK call", stream_ratio, "<=", 1.25)
    # warm-up samples count too: every captured call made one span
    expected = spans_expected["n"]
    row.check("one chat span per captured call, none uncaptured", counter.count == expected,
              f"{counter.count} spans for {expected} captured calls")
    tracing.shutdown()
    plugins.set_plugin_manager(None)
    return row
