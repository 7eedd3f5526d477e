"""Added time per decorated call, against a bare OTel span and the undecorated call.

    python -m bench.overhead [--calls 20000] [--repeats 5]

All three run in one process with the same TracerProvider set-up: a BatchSpanProcessor whose
exporter discards spans, so the numbers compare the work done on the agent's thread. Medians of
``--repeats`` runs; ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable, Sequence

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DiscardExporter(SpanExporter):
    def export(self, spans: Sequence) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def per_call_us(fn: Callable[[], object], calls: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)

    from agent_rl_plugin import plugins, tracing
    from agent_rl_plugin.hookspecs import hookimpl
    from agent_rl_plugin.instrumentation import trace_agent

    discard = DiscardExporter()

    class DiscardPlugin:
        @hookimpl
        def agent_rl_register_exporters(self, register, config):  # noqa: ANN001
            register("discard", discard)

    pm = plugins.new_plugin_manager(load_entry_points=False)
    pm.register(DiscardPlugin())
    plugins.set_plugin_manager(pm)
    tracing.configure(db_path=None, max_queue_size=1 << 20)

    baseline_provider = TracerProvider()
    baseline_provider.add_span_processor(BatchSpanProcessor(DiscardExporter(), max_queue_size=1 << 20))
    tracer = baseline_provider.get_tracer("bench")

    def work(x: int, y: int) -> int:
        return x + y

    def bare_span() -> int:
        with tracer.start_as_current_span("invoke_agent work") as span:
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            return work(1, 2)

    decorated = trace_agent(name="work")(work)
    results = {
        "undecorated_us": per_call_us(lambda: work(1, 2), args.calls, args.repeats),
        "bare_otel_span_us": per_call_us(bare_span, args.calls, args.repeats),
        "decorated_us": per_call_us(lambda: decorated(1, 2), args.calls, args.repeats),
    }
    tracing.configure(db_path=None, capture_content=False, max_queue_size=1 << 20)
    results["decorated_no_content_us"] = per_call_us(lambda: decorated(1, 2), args.calls, args.repeats)
    tracing.configure(db_path=None, enable_rl=False)
    results["disabled_us"] = per_call_us(lambda: decorated(1, 2), args.calls, args.repeats)
    results["ratio_decorated_vs_bare_span"] = results["decorated_us"] / results["bare_otel_span_us"]
    results["added_us_vs_undecorated"] = results["decorated_us"] - results["undecorated_us"]
    tracing.shutdown()
    for key, value in results.items():
        print(f"{key:32s} {value:10.2f}")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    main()
