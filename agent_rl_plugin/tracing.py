"""Wiring OpenTelemetry: :func:`configure`, :func:`flush`, :func:`shutdown`, :func:`get_tracer`.

Contract:

* A TracerProvider the user already installed is never replaced: one processor of ours is added
  to it. When none is installed, we create an SDK provider (resource ``service.name`` from the
  config) and install it as the global one, so libraries that trace on the global provider
  (pydantic-ai, OpenInference instrumentors) land in the same store.
* Our processor is a :class:`AgentRLSpanProcessor`: it stamps the current rollout's ids on every
  span started inside a rollout (ours and other libraries'), and hands finished spans to one
  batch processor per exporter registered through ``agent_rl_register_exporters``: a
  :class:`~agent_rl_plugin.span_queue.CountingBatchSpanProcessor` of ``max_queue_size`` spans in
  front of a :class:`~agent_rl_plugin.span_queue.BackPressureExporter`. Memory stays bounded:
  when the agent outruns the exporter, the thread ending a span waits for room (back-pressure;
  spans are dropped, and counted, only with ``queue_full_wait_ms=0`` or a stalled exporter).
* :func:`configure` is idempotent: the same settings again change nothing; new settings swap
  the exporters inside our processor (flushing the old ones first) without touching the provider.
* Nothing here ever raises into agent code after configuration: exporter failures are counted
  and logged once (see :mod:`agent_rl_plugin.store.exporter`).
* Spans are flushed at interpreter exit, and on SIGTERM (``flush_on_sigterm``, on by default):
  :func:`configure` called in the main thread installs a handler that exports and commits every
  finished span (bounded by :data:`SIGTERM_FLUSH_TIMEOUT_S`) and then does what the handler it
  replaced did: the default one (the process dies of SIGTERM, exit status -15), a Python
  callable (called with the same arguments), or ``SIG_IGN`` (the signal stays ignored). It is
  installed once however often :func:`configure` runs, never from another thread (skipped
  silently), not over a handler Python cannot call back (one set outside Python), and
  :func:`shutdown` puts the previous handler back (unless someone replaced ours meanwhile).
  Spans still open when the signal arrives are not recorded.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
from typing import Any, Callable, Sequence, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from agent_rl_plugin import semconv
from agent_rl_plugin.arrow_memory import lean_arrow_allocator
from agent_rl_plugin.config import RLConfig
from agent_rl_plugin.context import current_rollout_attributes, mark_covered
from agent_rl_plugin.ids import PrivateIdGenerator
from agent_rl_plugin.lean_spans import LeanSpanStarter, plain_attributes, store_plain
from agent_rl_plugin.plugins import get_plugin_manager
from agent_rl_plugin.span_queue import BackPressureExporter, CountingBatchSpanProcessor, pending_probe
from agent_rl_plugin.transform import (
    TransformingSpanExporter,
    span_unchanged,
    spans_unchanged,
    with_attribute_transform,
    with_attributes,
)
from agent_rl_plugin.version import __version__

logger = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "agent_rl_plugin"


class _State:
    """Process-wide runtime state. ``enabled`` is read on every decorated call: keep it a bool."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.config: RLConfig | None = None
        self.enabled: bool = True
        self.provider: TracerProvider | None = None
        self.processor: AgentRLSpanProcessor | None = None
        self.tracer: trace.Tracer | None = None
        self.exporters: dict[str, SpanExporter] = {}
        self.atexit_registered = False
        self.sigterm_previous: Any = None  # the handler ours replaced, while ours is installed
        self.sigterm_installed = False
        self.sigterm_flushing = False


STATE = _State()


class AgentRLSpanProcessor(SpanProcessor):
    """Stamps rollout ids on span start and fans finished spans out to our exporters."""

    def __init__(self) -> None:
        self._children: tuple[tuple[SpanProcessor, SpanExporter], ...] = ()

    def set_children(
        self, children: list[tuple[SpanProcessor, SpanExporter]]
    ) -> list[tuple[SpanProcessor, SpanExporter]]:
        """Replace the (processor, exporter) pairs; returns the previous ones to shut down."""
        old = list(self._children)
        self._children = tuple(children)
        return old

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        pending = PENDING.attributes
        if pending is not None:  # our call's start attributes, handed over by start_with_attributes
            PENDING.attributes = None
            _put_start_attributes(span, pending)
        scope = span.instrumentation_scope
        if scope is not None and scope.name != INSTRUMENTATION_NAME:  # another tracer's span
            mark_covered(span, trace.get_current_span(parent_context), INSTRUMENTATION_NAME)
        attrs = current_rollout_attributes()
        if attrs:
            try:
                if (span.attributes or {}).get(semconv.ROLLOUT_ID) == attrs[semconv.ROLLOUT_ID]:
                    return  # our own spans carry the ids already
                span.set_attributes(attrs)
            except Exception:  # never break span creation
                logger.debug("could not stamp rollout attributes", exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        for child, _ in self._children:
            child.on_end(span)

    def shutdown(self) -> None:
        for child, _ in self._children:
            child.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every queued span, then let each exporter commit (e.g. DuckDB's writer)."""
        ok = True
        for child, exporter in self._children:
            ok = child.force_flush(timeout_millis) is not False and ok
            ok = exporter.force_flush(timeout_millis) is not False and ok
        return ok


class _Pending(threading.local):
    attributes: dict[str, Any] | None = None


#: Start attributes on their way from :func:`start_with_attributes` to our ``on_start``.
PENDING = _Pending()


def _put_start_attributes(span: Span, attributes: dict[str, Any]) -> None:
    """Store ``attributes`` on a span that was started without any, as ``Span.__init__`` would
    have stored them (``BoundedAttributes._set_items``), skipping the per-value validation
    when every key and value is already valid and within the span's limits (a list or tuple of
    such values is stored as a tuple, as OTel stores it)."""
    try:
        bounded = cast(BoundedAttributes, span._attributes)  # noqa: SLF001
        store = bounded._dict  # noqa: SLF001
        if (bounded.maxlen is not None and len(store) + len(attributes) > bounded.maxlen) or not plain_attributes(
            attributes, bounded.max_value_len
        ):
            bounded._set_items(attributes)  # noqa: SLF001
            return
        with bounded._lock:  # noqa: SLF001
            store_plain(store, attributes)
    except Exception:
        logger.debug("could not set start attributes directly", exc_info=True)
        span.set_attributes(attributes)


# (tracer, whether its sampler and processor layout allow handing attributes over, its lean starter)
_DEFERRABLE: tuple[Any, bool, LeanSpanStarter | None] = (None, False, None)


def _tracer_defers(tracer: Any) -> bool:
    """True when starting a span without attributes and adding them in our ``on_start`` is
    indistinguishable from passing them to ``start_span``: an SDK tracer whose sampler is a
    built-in one that ignores attributes (always on/off, trace-id ratio, parent-based over
    those; they return the attributes they are given when they sample) and whose provider
    calls processors in order, synchronously."""
    try:
        from opentelemetry.sdk.trace import SynchronousMultiSpanProcessor, Tracer, sampling

        if type(tracer) is not Tracer:
            return False
        simple = (sampling.StaticSampler, sampling.TraceIdRatioBased)
        sampler = tracer.sampler
        if type(sampler) in (sampling.ParentBased, sampling.ParentBasedTraceIdRatio):
            delegates = ("_root", "_remote_parent_sampled", "_remote_parent_not_sampled",
                         "_local_parent_sampled", "_local_parent_not_sampled")  # fmt: skip
            if not all(type(getattr(sampler, d, None)) in simple for d in delegates):
                return False
        elif type(sampler) not in simple:
            return False
        processor = tracer.span_processor
        return type(processor) is SynchronousMultiSpanProcessor and isinstance(
            getattr(processor, "_span_processors", None), tuple
        )
    except Exception:
        return False


def start_with_attributes(tracer: Any, name: str, attributes: dict[str, Any], start_time: int | None = None) -> Any:
    """``tracer.start_span(name, attributes=attributes, start_time=start_time)``, made cheaper
    where that gives the same span: by a :class:`~agent_rl_plugin.lean_spans.LeanSpanStarter`
    when the tracer allows one; else, when our processor is the provider's first and the tracer
    allows it (:func:`_tracer_defers`), the attributes are handed to our ``on_start``, which
    stores them before any other processor sees the span, without OTel re-validating each of
    our already-clean values. ``attributes`` is taken over (not copied)."""
    global _DEFERRABLE
    cached = _DEFERRABLE
    if cached[0] is not tracer:
        cached = _DEFERRABLE = (tracer, _tracer_defers(tracer), LeanSpanStarter.for_tracer(tracer))
    lean = cached[2]
    if lean is not None:
        span = lean.start(name, attributes, start_time)
        if span is not None:
            return span
    if cached[1]:
        processors = tracer.span_processor._span_processors  # noqa: SLF001
        if processors and processors[0] is STATE.processor:
            PENDING.attributes = attributes
            try:
                return tracer.start_span(name, start_time=start_time)
            finally:
                PENDING.attributes = None
    return tracer.start_span(name, attributes=attributes, start_time=start_time)


def configure(config: RLConfig | None = None, **fields: Any) -> RLConfig:
    """Set up recording; safe to call many times.

    ``configure(db="runs.duckdb", otlp_endpoint=None, capture_content=True, ...)``: keyword
    names are :class:`RLConfig` fields (``db`` is short for ``db_path``). Unset fields come from
    ``AGENT_RL_*`` environment variables. Returns the config in force.

    When it has set up recording (not when nothing changed, nor when ``enable_rl=False``), it
    calls the ``agent_rl_configure`` hook once, after releasing its lock (see
    :func:`_fire_configured`).
    """
    if "db" in fields:
        fields["db_path"] = fields.pop("db")
    if config is not None and fields:
        config = config.model_copy(update=fields)
    elif config is None:
        config = RLConfig.from_env(**fields)
    with STATE.lock:
        if STATE.config is not None and STATE.config == config and STATE.processor is not None:
            return config
        _apply(config)
    if config.enable_rl:
        _fire_configured(config)
    return config


def _fire_configured(config: RLConfig) -> None:
    """Call each ``agent_rl_configure`` implementation (in pluggy's call order) on its own: one
    that raises is logged with its plugin's name and skipped, the others still run. Hook
    wrappers are not supported for this hook (skipped)."""
    try:
        impls = get_plugin_manager().hook.agent_rl_configure.get_hookimpls()
    except Exception:
        logger.warning("agent-rl: could not collect the agent_rl_configure hooks", exc_info=True)
        return
    arguments = {"config": config}
    for impl in reversed(impls):
        if impl.hookwrapper or impl.wrapper:
            continue
        try:
            impl.function(*(arguments[name] for name in impl.argnames))
        except Exception:
            logger.warning("agent-rl: the agent_rl_configure hook of plugin %r failed", impl.plugin_name, exc_info=True)


def _apply(config: RLConfig) -> None:
    STATE.config = config
    STATE.enabled = config.enable_rl
    if not config.enable_rl:
        _set_exporters({})
        _restore_sigterm_handler()
        return
    if STATE.processor is None:
        STATE.processor = AgentRLSpanProcessor()
        STATE.provider = _provider_for(config)
        STATE.provider.add_span_processor(STATE.processor)
        STATE.tracer = STATE.provider.get_tracer(INSTRUMENTATION_NAME, __version__)
    if not STATE.atexit_registered:
        atexit.register(_flush_at_exit)
        STATE.atexit_registered = True
    with lean_arrow_allocator():  # the store's exporters load pyarrow: see arrow_memory
        _set_exporters(_collect_exporters(config))
    if config.flush_on_sigterm:
        _install_sigterm_handler()
    else:
        _restore_sigterm_handler()


def _provider_for(config: RLConfig) -> TracerProvider:
    current = trace.get_tracer_provider()
    if hasattr(current, "add_span_processor"):
        return cast(TracerProvider, current)  # the user's provider: add to it, never replace it
    provider = TracerProvider(
        resource=Resource.create({"service.name": config.service_name}),
        id_generator=PrivateIdGenerator(),  # ids unaffected by random.seed() in the user's code
    )
    trace.set_tracer_provider(provider)
    actual = trace.get_tracer_provider()
    # set_tracer_provider refuses to override a provider set concurrently; use whichever won.
    return cast(TracerProvider, actual) if hasattr(actual, "add_span_processor") else provider


def _collect_exporters(config: RLConfig) -> dict[str, SpanExporter]:
    exporters: dict[str, SpanExporter] = {}

    def register(name: str, exporter: SpanExporter) -> None:
        if name in exporters:
            raise ValueError(f"agent-rl: two exporters registered under the name {name!r}")
        exporters[name] = exporter

    get_plugin_manager().hook.agent_rl_register_exporters(register=register, config=config)
    return exporters


def _set_exporters(exporters: dict[str, SpanExporter]) -> None:
    """Attach ``exporters`` (one BatchSpanProcessor each), then retire the previous ones.

    Old processors are flushed before they stop; an exporter object registered again (the same
    instance) is kept open, others are shut down.
    """
    processor = STATE.processor
    previous = STATE.exporters
    STATE.exporters = exporters
    if processor is None:
        return
    config = STATE.config or RLConfig()
    children: list[tuple[SpanProcessor, SpanExporter]] = []
    for exporter in exporters.values():
        wrapped = _KeepOpen(
            _copy_only_changed(with_attribute_transform(exporter, config)),
            pending=pending_probe(exporter),
            max_pending=config.max_queue_size,
            stall_s=config.queue_full_wait_ms / 1000,
        )
        batch = CountingBatchSpanProcessor(
            wrapped,
            max_queue_size=config.max_queue_size,
            max_export_batch_size=min(config.export_batch_size, config.max_queue_size),
            schedule_delay_millis=config.export_delay_ms,
            queue_full_wait_s=config.queue_full_wait_ms / 1000,
        )
        children.append((batch, wrapped))
        set_upstream = getattr(exporter, "set_upstream_flush", None)
        if set_upstream is not None:  # readers of the exporter's store flush our queue first
            set_upstream(batch.force_flush)
    old = processor.set_children(children)
    kept = {id(e) for e in exporters.values()}
    for child, _ in old:
        _quietly(child.shutdown)  # exports what it holds; _KeepOpen stops it closing the exporter
    for exporter in previous.values():
        if id(exporter) not in kept:
            _quietly(exporter.shutdown)


def _copy_only_changed(exporter: SpanExporter) -> SpanExporter:
    """A ``TransformingSpanExporter`` that hands on the span itself when the transform changed
    none of its attributes (no secret to mask, content kept: most spans), rather than a copy:
    the exporter receives the same data, and the export thread, which competes with the agent's
    for the GIL, builds no new span."""
    if type(exporter) is TransformingSpanExporter:
        return _CopyOnlyChangedExporter(exporter.inner, exporter._transform)  # noqa: SLF001
    return exporter


def _same_items(before: Any, after: dict[str, Any]) -> bool:
    return after == before and list(after) == list(before)


class _CopyOnlyChangedExporter(TransformingSpanExporter):
    """See :func:`_copy_only_changed`. Each attribute mapping goes through the transform
    exactly once, as in ``TransformingSpanExporter``; a span whose transformed attributes
    and events equal the originals (same keys in the same order, same values) and that
    dropped nothing (a copy would report zero drops) is passed on unchanged. A batch for which
    the transform's ``unchanged_all`` holds (one check over every span and event, see
    :func:`~agent_rl_plugin.transform.spans_unchanged`) is passed on as it is."""

    def _copies(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        unchanged_all = getattr(self._transform, "unchanged_all", None)
        if unchanged_all is not None and spans_unchanged(spans, unchanged_all):
            return list(spans)
        return [self._copy(span) for span in spans]

    def _copy(self, span: ReadableSpan) -> ReadableSpan:
        name = span.name
        transform = self._transform
        quick = getattr(transform, "unchanged", None)  # no copy, no compare: see span_unchanged
        if quick is not None and span_unchanged(span, quick):
            return span
        unchanged = True
        events = []
        for e in span.events:  # events first, then the span: the wrapped class's order
            event_original = dict(e.attributes or {})
            event_attributes = transform(event_original, name)  # copies its argument
            unchanged = unchanged and _same_items(event_original, event_attributes)
            events.append(Event(e.name, event_attributes, e.timestamp))
        original = dict(span.attributes or {})
        attributes = transform(original, name)
        unchanged = unchanged and _same_items(original, attributes)
        if unchanged and not (span.dropped_attributes or span.dropped_events or span.dropped_links):
            return span
        return with_attributes(span, attributes, events)


def dropped_spans() -> int:
    """Spans dropped before reaching an exporter because a batch queue was full, since the
    current exporters were attached (what exporters drop is in their own stats)."""
    processor = STATE.processor
    if processor is None:
        return 0
    return sum(getattr(child, "dropped", 0) for child, _ in processor._children)


class _KeepOpen(BackPressureExporter):
    """Forwards to an exporter (with back-pressure, see :class:`BackPressureExporter`) but
    leaves closing it to :func:`_set_exporters`."""

    def shutdown(self) -> None:
        self.inner.force_flush()


def _quietly(action: Callable[[], Any]) -> None:
    try:
        action()
    except Exception:
        logger.warning("agent-rl: an exporter failed to shut down", exc_info=True)


def ensure_configured() -> None:
    """Configure from the environment on first use (decorators call this lazily)."""
    if STATE.config is None:
        configure()


def get_tracer() -> trace.Tracer:
    """Our tracer on the provider in use, configuring from the environment if needed."""
    if STATE.tracer is None:
        ensure_configured()
        if STATE.tracer is None:  # disabled: a no-op tracer keeps call sites simple
            return trace.NoOpTracer()
    return STATE.tracer  # type: ignore[return-value]


def current_config() -> RLConfig:
    """The config in force (configuring from the environment if nothing was configured)."""
    ensure_configured()
    assert STATE.config is not None
    return STATE.config


def active_config() -> RLConfig | None:
    """The config in force, or ``None`` when :func:`configure` has not run (never configures)."""
    return STATE.config


def is_enabled() -> bool:
    """False when ``enable_rl=False``: instrumentation then calls straight through."""
    return STATE.enabled


def flush(timeout_s: float = 30.0) -> bool:
    """Export and commit every finished span now. Returns False if the timeout was reached."""
    processor = STATE.processor
    if processor is None:
        return True
    return processor.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    """Flush, then detach our exporters (the provider stays; a later configure() re-attaches)."""
    with STATE.lock:
        if STATE.processor is not None:
            STATE.processor.force_flush()
            _set_exporters({})
        _restore_sigterm_handler()
        STATE.config = None
        STATE.enabled = True  # the next use configures afresh from the environment


def _flush_at_exit() -> None:
    try:
        shutdown()
    except Exception:  # pragma: no cover - interpreter is going away
        logger.warning("agent-rl: flush at exit failed", exc_info=True)


# --- SIGTERM -----------------------------------------------------------------------------------
#: Longest time the SIGTERM handler spends exporting and committing before it lets the signal
#: take its course (the flush runs in a helper thread: a main thread interrupted while holding
#: an exporter's lock cannot deadlock it).
SIGTERM_FLUSH_TIMEOUT_S = 10.0


def _install_sigterm_handler() -> None:
    """Install :func:`_on_sigterm` once, from the main thread only (see the module contract)."""
    if STATE.sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is None:  # set outside Python: we could not call it back, so leave it alone
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):  # not the main interpreter, no SIGTERM here
        return
    STATE.sigterm_previous = previous
    STATE.sigterm_installed = True


def _restore_sigterm_handler() -> None:
    """Put back the handler ours replaced (unless ours was replaced since, or not main thread)."""
    if not STATE.sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, STATE.sigterm_previous)
    except (ValueError, OSError, TypeError):  # pragma: no cover - checked in the main thread
        return
    STATE.sigterm_installed = False
    STATE.sigterm_previous = None


def _flush_for_signal(timeout_s: float) -> None:
    """Export and commit every finished span, waiting at most ``timeout_s``. Never raises."""
    processor = STATE.processor
    if processor is None or not STATE.exporters:
        return

    def work() -> None:
        try:
            processor.force_flush(int(timeout_s * 1000))
        except Exception:
            logger.warning("agent-rl: flush on SIGTERM failed", exc_info=True)

    worker = threading.Thread(target=work, name="agent-rl flush on SIGTERM", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        logger.warning("agent-rl: SIGTERM: spans not all written after %.0f s; going on", timeout_s)


def _on_sigterm(signum: int, frame: Any) -> None:
    """Flush, then behave as the handler we replaced: default (die of the signal), a callable
    (call it), or ignore. A second SIGTERM during the flush skips straight to that."""
    previous = STATE.sigterm_previous
    if not STATE.sigterm_flushing:
        STATE.sigterm_flushing = True
        try:
            _flush_for_signal(SIGTERM_FLUSH_TIMEOUT_S)
        finally:
            STATE.sigterm_flushing = False
    if previous is signal.SIG_IGN:
        return
    if callable(previous):
        previous(signum, frame)
        return
    # The default action: terminate with the signal, so the exit status still says SIGTERM.
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
