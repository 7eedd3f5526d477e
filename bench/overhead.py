"""Added time per decorated call, against a bare OTel span and the undecorated call.

    python bench/overhead.py [--calls 20000] [--repeats 5] [--json PATH]
    python -m bench --only overhead [--quick]

Everything runs in one process with the same processor set-up: a ``BatchSpanProcessor`` whose
exporter discards (and counts) spans, so the numbers compare the work done on the agent's
thread. Measured, interleaved, medians of ``--repeats`` runs of ``--calls`` calls each:

* ``decorated``: ``@trace_agent`` on a two-argument function, called outside any rollout (so
  each call is an implicit rollout: the common case of an agent entry point);
* ``bare OTel span``: ``start_as_current_span`` + one attribute on an SDK TracerProvider;
* ``bare OTel span, same attributes``: the same, with the attributes the decorated call
  records, read from a real decorated span (what OTel itself costs for them);
* ``undecorated``: the function alone.

Targets: decorated <= 1.25x the bare span and <= 1.10x the bare span with the same attributes.

Then, once each: the decorated call with ``capture_content=False`` and with ``enable_rl=False``,
a breakdown of the decorated call into its parts (each timed alone) and the top functions of a
cProfile run (which inflates every call, so compare shares, not microseconds).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import threading
import time
from typing import Any, Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

from bench.harness import Context, Measure, Row, interleave, median, ratio  # noqa: E402


class DiscardExporter(SpanExporter):
    """Drops spans, counting them."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.count += len(spans)
        return SpanExportResult.SUCCESS


class TransformAwareDiscardExporter(DiscardExporter):
    """Takes the attribute transform itself (as the DuckDB exporter does), so agent-rl does not
    wrap it in a ``TransformingSpanExporter`` that copies every span to redact it."""

    def set_attribute_transform(self, transform) -> None:  # noqa: ANN001
        self.transform = transform


class _Capture(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def per_call_us(fn: Callable[[], object], calls: int) -> float:
    """Microseconds per call of ``fn`` over ``calls`` calls (one sample)."""
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls * 1e6


def work(x: int, y: int) -> int:
    return x + y


class Setup:
    """The tracing set-up shared by every measurement."""

    def __init__(self) -> None:
        from agent_rl_plugin import plugins, tracing
        from agent_rl_plugin.hookspecs import hookimpl
        from agent_rl_plugin.instrumentation import trace_agent

        self.discard = DiscardExporter()
        holder: list[SpanExporter] = [self.discard]
        self.holder = holder

        class DiscardPlugin:
            @hookimpl
            def agent_rl_register_exporters(self, register, config):  # noqa: ANN001
                register("discard", holder[0])

        pm = plugins.new_plugin_manager(load_entry_points=False)
        pm.register(DiscardPlugin())
        plugins.set_plugin_manager(pm)
        self.tracing = tracing
        tracing.configure(db_path=None, max_queue_size=1 << 20)
        self.decorated = trace_agent(name="work")(work)

        self.bare_exporter = DiscardExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(self.bare_exporter, max_queue_size=1 << 20))
        self.tracer = self.provider.get_tracer("bench")
        self.start_attributes, self.end_attributes = self._decorated_attributes()

    def _decorated_attributes(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The attributes a decorated call records at start and at end (from a real span)."""
        capture = _Capture()
        processor = self.tracing.STATE.processor
        assert processor is not None
        children = processor._children  # noqa: SLF001 - a bench may look inside
        processor._children = children + ((capture, self.discard),)
        try:
            self.decorated(1, 2)
        finally:
            processor._children = children
        span = capture.spans[0]
        attributes = dict(span.attributes or {})
        end = {k: attributes.pop(k) for k in list(attributes) if k == "agent_rl.output"}
        return attributes, end

    def bare_span(self) -> int:
        with self.tracer.start_as_current_span("invoke_agent work") as span:
            span.set_attribute("gen_ai.operation.name", "invoke_agent")
            return work(1, 2)

    def bare_span_same_attributes(self) -> int:
        with self.tracer.start_as_current_span("invoke_agent work", attributes=self.start_attributes) as span:
            result = work(1, 2)
            span.set_attributes(self.end_attributes)
            return result


def breakdown(setup: Setup, calls: int, repeats: int) -> dict[str, float]:
    """Microseconds per decorated call spent in each part, each part timed alone (medians)."""
    from agent_rl_plugin.instrumentation import context as rl_context
    from agent_rl_plugin.instrumentation.calls import _context_with_span, _start, bound_arguments
    from agent_rl_plugin.instrumentation.spans import to_json_text
    from agent_rl_plugin.instrumentation.wrappers import WRAPPED_MARK

    tracing = setup.tracing
    spec = getattr(setup.decorated, WRAPPED_MARK)
    tracer = tracing.get_tracer()
    start_attributes, end_attributes = setup.start_attributes, setup.end_attributes
    record = _start(tracer, spec, None, None, (1, 2), {})
    record.finish(result=3)

    bare_tracer = setup.tracer

    def bare_one() -> None:  # the baseline's provider, no context
        span = bare_tracer.start_span("invoke_agent work", attributes={"gen_ai.operation.name": "invoke_agent"})
        span.end()

    def ours_one() -> None:  # our provider (our processor + the batch processor), one attribute
        span = tracer.start_span("invoke_agent work", attributes={"gen_ai.operation.name": "invoke_agent"})
        span.end()

    def ours_same() -> None:  # our provider, the decorated call's attributes
        span = tracer.start_span("invoke_agent work", attributes=start_attributes)
        span.set_attributes(end_attributes)
        span.end()

    def contexts() -> None:  # CallRecord.__init__'s context with the span, activate/deactivate once
        _context_with_span(record.span)
        tokens = record.activate()
        record.deactivate(tokens)

    def arguments() -> None:
        bound_arguments(spec, (1, 2), {})

    def json_text() -> None:
        to_json_text({"x": 1, "y": 2})
        to_json_text(3)

    def hooks_lookup() -> None:  # has_rollout_hooks() at start and at finish
        rl_context.has_rollout_hooks()
        rl_context.has_rollout_hooks()

    def rollout_info() -> None:
        rl_context.implicit_rollout("work")

    def config() -> None:  # what start_call/_start/to_json_text read of the configuration
        _ = tracing.STATE.tracer or tracing.get_tracer()
        _ = tracing.STATE.enabled
        _ = tracing.STATE.config or tracing.current_config()
        _ = tracing.STATE.config.max_attribute_size  # type: ignore[union-attr]
        _ = tracing.STATE.config.max_attribute_size  # type: ignore[union-attr]

    parts = {
        "OTel span, 1 attribute, the baseline's provider (no context)": bare_one,
        "OTel span, 1 attribute, our provider": ours_one,
        "OTel span with the decorated call's attributes, our provider": ours_same,
        "OTel context: context with the span, attach/detach, rollout contextvar set/reset": contexts,
        "argument binding (zip, or inspect.Signature.bind)": arguments,
        "JSON of input and output (to_json_text x2)": json_text,
        "implicit rollout: RolloutInfo + new id": rollout_info,
        "any rollout hook registered? (x2)": hooks_lookup,
        "config lookups (tracer, enabled, config, max size x2)": config,
    }

    def sampler(f: Callable[[], object]) -> Callable[[], float]:
        return lambda: per_call_us(f, calls)

    samples = interleave({k: sampler(f) for k, f in parts.items()}, repeats)
    return {k: median(v) for k, v in samples.items()}


def cprofile_top(setup: Setup, calls: int, n: int = 12) -> list[dict[str, Any]]:
    """The top ``n`` functions by own time under cProfile, per decorated call."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        setup.decorated(1, 2)
    profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{os.path.basename(os.path.dirname(file))}/{os.path.basename(file)}:{line}({name})",
                "calls_per_call": ncalls / calls,
                "own_us": tottime / calls * 1e6,
                "cumulative_us": cumtime / calls * 1e6,
                "own_share": tottime / total if total else 0.0,
            }
        )
    rows.sort(key=lambda r: -r["own_us"])
    return rows[:n]


def measure(calls: int, repeats: int, profile_calls: int = 0) -> dict[str, Any]:
    """Every number of this benchmark as a dict (samples in microseconds per call)."""
    setup = Setup()
    variants = {
        "undecorated": lambda: per_call_us(lambda: work(1, 2), calls),
        "bare OTel span": lambda: per_call_us(setup.bare_span, calls),
        "bare OTel span, same attributes": lambda: per_call_us(setup.bare_span_same_attributes, calls),
        "decorated": lambda: per_call_us(lambda: setup.decorated(1, 2), calls),
    }
    samples = interleave(variants, repeats, warmup=1)
    tracing = setup.tracing
    decorated_calls = (repeats + 1) * calls + 1
    flushed = tracing.flush(60)
    setup.provider.force_flush(60_000)
    exported, bare_exported = setup.discard.count, setup.bare_exporter.count
    bare_calls = 2 * (repeats + 1) * calls

    def configured(settings: dict[str, Any], exporter: SpanExporter) -> Callable[[], float]:
        def sample() -> float:  # reconfigure (outside the clock), then time
            setup.holder[0] = exporter
            tracing.configure(db_path=None, **settings)
            return per_call_us(lambda: setup.decorated(1, 2), calls)

        return sample

    # A changed setting makes configure() swap the exporter in; the queue size differs by one.
    samples.update(
        interleave(
            {
                "decorated (again)": configured({"max_queue_size": 1 << 20}, setup.discard),
                "decorated, capture_content=False": configured(
                    {"max_queue_size": (1 << 20) - 1, "capture_content": False}, setup.discard
                ),
                "decorated, exporter not wrapped for redaction": configured(
                    {"max_queue_size": (1 << 20) + 1}, TransformAwareDiscardExporter()
                ),
            },
            repeats,
        )
    )
    setup.holder[0] = setup.discard
    tracing.configure(db_path=None, max_queue_size=1 << 20)
    parts = breakdown(setup, calls, repeats)
    top = cprofile_top(setup, profile_calls) if profile_calls else []
    tracing.configure(db_path=None, enable_rl=False)
    samples["decorated, enable_rl=False"] = [per_call_us(lambda: setup.decorated(1, 2), calls) for _ in range(repeats)]
    tracing.shutdown()
    setup.provider.shutdown()
    return {
        "samples": samples,
        "flushed": flushed,
        "decorated_calls": decorated_calls,
        "exported": exported,
        "bare_calls": bare_calls,
        "bare_exported": bare_exported,
        "start_attributes": sorted(setup.start_attributes),
        "end_attributes": sorted(setup.end_attributes),
        "breakdown_us": parts,
        "cprofile_top": top,
    }


def run(ctx: Context) -> Row:
    calls = ctx.size(20_000, 3_000)
    repeats = ctx.size(7, 5)
    row = Row(id="overhead", sizes={"calls_per_sample": calls, "repeats": repeats})
    ctx.log(f"overhead: {repeats} interleaved samples of {calls:,} calls per variant")
    result = measure(calls, repeats, profile_calls=ctx.size(5_000, 1_000))
    s = result["samples"]
    row.value = Measure("decorated call", "µs", s["decorated"])
    for name in ("bare OTel span", "bare OTel span, same attributes", "undecorated"):
        row.baselines.append(Measure(name, "µs", s[name]))
    decorated, bare = median(s["decorated"]), median(s["bare OTel span"])
    same = median(s["bare OTel span, same attributes"])
    row.ratios["decorated / bare span"] = ratio(decorated, bare)
    row.ratios["decorated / bare span, same attributes"] = ratio(decorated, same)
    row.target("decorated / bare OTel span", row.ratios["decorated / bare span"], "<=", 1.25)
    row.target(
        "decorated / bare OTel span with the same attributes",
        row.ratios["decorated / bare span, same attributes"],
        "<=",
        1.10,
    )
    row.check(
        f"every decorated call exported one span ({result['decorated_calls']:,})",
        result["flushed"] and result["exported"] == result["decorated_calls"],
        f"{result['exported']} spans exported for {result['decorated_calls']} calls",
    )
    row.check(
        "the baseline exported every span",
        result["bare_exported"] == result["bare_calls"],
        f"{result['bare_exported']} of {result['bare_calls']}",
    )
    parts = result["breakdown_us"]
    keys = list(parts)
    bare_one, ours_one, ours_same = (parts[k] for k in keys[:3])
    ours_code = {k: v for k, v in parts.items() if k not in keys[:3]}
    row.info["breakdown_derived_us"] = {
        "OTel span with the same attributes, our provider": ours_same,
        "  of which our processors (ours 1 attribute - baseline's 1 attribute; mostly the export thread copying "
        "each span for redaction, which takes the GIL from the agent thread)": ours_one - bare_one,
        "  of which the extra attributes (same attributes - 1 attribute, our provider)": ours_same - ours_one,
        **ours_code,
        "rest (wrapper glue: dicts, checks, try/finally, calls; and cache effects)": decorated
        - ours_same
        - sum(ours_code.values()),
    }
    row.info.update(
        added_us_vs_undecorated=decorated - median(s["undecorated"]),
        added_us_vs_bare_span=decorated - bare,
        decorated_again_us=median(s["decorated (again)"]),
        decorated_no_content_us=median(s["decorated, capture_content=False"]),
        decorated_exporter_not_wrapped_us=median(s["decorated, exporter not wrapped for redaction"]),
        disabled_us=median(s["decorated, enable_rl=False"]),
        recorded_attributes=result["start_attributes"] + result["end_attributes"],
        breakdown_us=parts,
        cprofile_top=result["cprofile_top"],
    )
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    result = measure(args.calls, args.repeats, profile_calls=5_000)
    s = result["samples"]
    out = {f"{k} (us)": median(v) for k, v in s.items()}
    out["ratio decorated / bare span"] = median(s["decorated"]) / median(s["bare OTel span"])
    out["ratio decorated / bare span, same attributes"] = median(s["decorated"]) / median(
        s["bare OTel span, same attributes"]
    )
    for key, value in out.items():
        print(f"{key:45s} {value:10.2f}")
    print("breakdown of a decorated call (each part timed alone, us):")
    for key, value in result["breakdown_us"].items():
        print(f"  {value:7.2f}  {key}")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(
                {**out, "breakdown_us": result["breakdown_us"], "cprofile_top": result["cprofile_top"]}, fh, indent=2
            )
    return out


if __name__ == "__main__":
    main()
