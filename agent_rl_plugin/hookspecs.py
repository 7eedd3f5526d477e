"""Hook specifications: the extension surface of agent-rl-plugin.

A plugin is any module or object with functions decorated by :data:`hookimpl` whose names match
the specs below. Outside packages declare it in the ``agent_rl_plugin`` entry-point group::

    [project.entry-points.agent_rl_plugin]
    my_plugin = "my_package.plugin"

Built-in features (the DuckDB store, OTLP export, redaction, span normalisers) are registered
through these same hooks, listed in :data:`agent_rl_plugin.plugins.DEFAULT_PLUGINS`; the
``agent-rl`` command groups too, registered by the command line when it starts. A ``hookimpl``
whose name matches no spec below is reported and its plugin skipped (see
:func:`agent_rl_plugin.plugins.check_pending`).

Hooks are grouped by lifecycle: set-up (called by :func:`agent_rl_plugin.configure`), per span
(called on the export path, keep them cheap), per rollout, advantages, and command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

from agent_rl_plugin.plugin_names import PROJECT_NAME as PROJECT_NAME

if TYPE_CHECKING:  # pragma: no cover - typing only
    import typer
    from opentelemetry.sdk.trace.export import SpanExporter

    from agent_rl_plugin.config import RLConfig
    from agent_rl_plugin.context import RolloutInfo

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --- set-up -------------------------------------------------------------------------------
@hookspec
def agent_rl_configure(config: RLConfig) -> None:
    """Called once each time :func:`agent_rl_plugin.configure` finishes setting up recording.

    That is: after the tracer provider is in place and the exporters registered through
    :func:`agent_rl_register_exporters` are attached, so spans started from here on are
    recorded. ``config`` is the :class:`~agent_rl_plugin.config.RLConfig` in force. It is not
    called when ``configure()`` changes nothing (the same settings again), nor when recording is
    switched off (``enable_rl=False``). Use it to switch a framework's own instrumentation on.
    Runs in the thread that called ``configure()``; an implementation that raises is logged
    and skipped (the others still run, ``configure()`` still succeeds).
    """


@hookspec
def agent_rl_register_exporters(register: Callable[[str, SpanExporter], None], config: RLConfig) -> None:
    """Register span exporters for :func:`configure` to attach.

    Call ``register(name, exporter)`` once per exporter. Each exporter is wrapped in its own
    ``BatchSpanProcessor`` on the tracer provider, so a slow exporter never blocks the agent.
    The built-in ``duckdb`` exporter (when ``config.db_path`` is set) and ``otlp`` exporter
    (when ``config.otlp_endpoint`` is set) use this hook. Names must be unique.
    """


@hookspec
def agent_rl_register_normalizers(
    register: Callable[[str, Callable[[dict[str, Any], str], None]], None],
) -> None:
    """Register span normalisers that map other conventions onto the GenAI conventions.

    Call ``register(name, normalize)``. ``normalize(attributes, span_name)`` receives a span's
    attribute dict on the store's write path and may *add* ``gen_ai.*`` / ``agent_rl.*`` keys in
    place (for example from OpenInference's ``llm.input_messages.N.*``). A normaliser must not
    overwrite keys that are already present: native GenAI attributes take precedence over
    translated ones, and normalisers run in registration order (earlier wins). It must be
    cheap: it runs once per stored span.
    """


# --- objects ------------------------------------------------------------------------------
@hookspec(firstresult=True)
def agent_rl_instrument_object(obj: Any) -> Callable[[], None] | None:
    """Instrument ``obj``, an agent object of a framework this plugin knows; return its undo.

    Called with an *instance* (never a class) by :func:`agent_rl_plugin.instrument` before it
    wraps the object's methods, and by ``RLAgentMixin`` / ``RLOrchestratorMixin`` once the base
    class's ``__init__`` has returned (so the framework's object is built), never for an
    instance created with ``enable_rl=False``. Install whatever the framework's own recording
    needs (wrap its backend or stream, attach callbacks, observe its event log) and return a
    callable taking no argument that removes all of it; return ``None`` quickly for an object
    that is not yours, without importing the framework to find out (look in ``sys.modules``).

    Idempotent like OpenTelemetry's instrumentors: the core keeps the undo of a claimed object,
    so instrumenting it twice (or mixing in and then calling ``instrument``) asks no hook again;
    :func:`agent_rl_plugin.uninstrument` removes the core's wrappers, then calls the undo once
    (and the object may be instrumented afresh). An object nobody claimed is left untouched. Implementations are asked in pluggy's call order and the first
    non-``None`` result wins (the others are not asked). One that raises is logged and skipped
    (the next one is asked) and the object is used as is; an undo that raises is logged too.

    One agent span per call: the core records the agent span (the methods ``instrument`` wraps,
    or the mixin's class-level wrappers), so record LLM calls, tool calls and events inside it
    (``record_llm_call``, ``record_tool_call``, ``record_event``, spans of your own), not a
    second agent span. An implementation that records the agent span itself wraps the method
    inside the hook (``trace_agent``, or ``instrument(obj, methods=[...])``): a method already
    wrapped is never wrapped again. An attribute the hook puts on the instance in place of a
    method must call the method it replaces. Runs in the thread that called ``instrument()``
    or created the object.
    """


# --- per span -----------------------------------------------------------------------------
@hookspec
def agent_rl_transform_attributes(attributes: dict[str, Any], span_name: str, config: RLConfig) -> None:
    """Change span or event attributes before they leave the process (redaction, trimming).

    ``attributes`` is a mutable copy; change it in place (assign, delete). Called for each
    span's attributes and for each of its events' attributes, on every exporter's path (DuckDB
    and OTLP), after the agent call has returned, so a slow or failing implementation costs the
    agent nothing. An implementation that raises is logged once and skipped. The built-in
    ``redaction`` plugin masks secrets matching ``config.redaction_patterns``.
    """


@hookspec
def agent_rl_redaction_patterns() -> list[str]:  # type: ignore[empty-body]  # a spec: pluggy never calls it
    """Return regular expressions of secrets to mask, in addition to the configured ones.

    Collected when :func:`agent_rl_plugin.configure` runs (and when ``agent-rl serve`` starts),
    then added after ``config.redaction_patterns`` and ``config.redact_patterns`` everywhere
    redaction applies: attributes (nested values too), span and event names, status messages,
    link and resource attributes, spans received by ``agent-rl serve``, reward reasons. A match
    becomes ``[REDACTED]``; with a group named ``secret`` only that group does. A pattern that
    does not compile is logged and left out; an implementation that raises is skipped.
    """


# --- per rollout --------------------------------------------------------------------------
@hookspec
def agent_rl_rollout_start(rollout: RolloutInfo) -> None:
    """Called when a rollout begins (explicit ``with rollout(...)`` or an implicit one).

    ``rollout`` carries ``rollout_id``, ``task_id``, ``group_id`` and ``metadata``. Runs in the
    agent's thread: keep it fast; exceptions are logged and swallowed.
    """


@hookspec
def agent_rl_rollout_end(rollout: RolloutInfo, status: str, error: BaseException | None) -> None:
    """Called when a rollout ends, with ``status`` ``"ok"``, ``"error"`` or ``"cancelled"``.

    ``error`` is the exception that ended it, if any. Runs in the agent's thread; exceptions
    are logged and swallowed so the agent's own result or exception is never changed.
    """


@hookspec
def agent_rl_register_rewards(register: Callable[[Any], None], config: RLConfig) -> None:
    """Register reward plugins (scorers of stored rollouts).

    Call ``register(reward)`` with a ``RewardPlugin`` instance or a function decorated with
    ``agent_rl_plugin.rewards.reward``. Used by ``agent-rl score`` and ``agent-rl plugins``.
    """


# --- advantages ---------------------------------------------------------------------------
@hookspec(firstresult=True)
def agent_rl_state_key(step: dict[str, Any]) -> str | None:
    """Return the GiGPO state key of one agent action (an LLM step), or ``None`` to pass.

    Called by :func:`agent_rl_plugin.rl.steps_for_gigpo` for each LLM step whose span has no
    recorded ``agent_rl.state.key`` (a recorded key always wins and this hook is not called).
    Actions of one group with equal keys form a GiGPO step group, so the key should name the
    state the agent acted on. ``step`` is a dict with ``rollout_id``, ``task_id``,
    ``group_id``, ``step_index`` (in the steps view), ``action_index`` (0-based among the
    rollout's LLM steps), ``name``, ``input`` (the LLM input messages, JSON text),
    ``observation`` (what the agent acted on: the output of the latest tool step before it,
    else the rollout's input), ``observation_source`` (``"tool"``, ``"rollout_input"``,
    ``"llm_input"`` or ``"none"``) and ``state_key`` (``None`` here). The first non-``None``
    result wins; the built-in ``rl_state_keys`` plugin (``trylast``) returns a hash of
    ``observation``, so returning ``None`` falls back to it. It is called once per step without
    a recorded key, so keep it cheap.
    """


# --- command line -------------------------------------------------------------------------
@hookspec
def agent_rl_register_commands(cli: typer.Typer) -> None:
    """Add commands or command groups to the ``agent-rl`` command line.

    Use ``cli.command()`` / ``cli.add_typer()``. Built-in groups (``query``, ``traces``,
    ``db``, ``demo``) register this way too.
    """
