"""``instrument()`` / ``uninstrument()``: trace an existing class or object without editing it.

Contract:

* ``instrument(target, methods=None, tool_methods=None)`` wraps the agent methods (default:
  ``target.rl_methods`` if set, else whichever of :data:`AGENT_METHOD_NAMES` the class defines,
  ``object`` excluded) and tool methods (default ``target.rl_tool_methods`` or none) and returns
  ``target``. Agent spans are named after the class, tool spans after the method.
* On a class the wrappers replace the class ``__dict__`` entries (methods inherited from a base
  are wrapped onto the class itself); on an instance they are stored in the instance
  ``__dict__`` as bound methods, leaving the class untouched. ``__call__`` can only be traced on
  a class (Python looks dunder methods up on the type).
* Methods already wrapped (decorator, mixin, an earlier instrument of a base) are left alone, so
  everything combined still gives one span per call; instrumenting twice is a no-op.
* An instance is first offered to the installed integrations (:func:`claim`, the
  ``agent_rl_instrument_object`` hook), unless it was created with ``enable_rl=False``: the
  integration that knows the object's framework installs its own recording (LLM calls, tool
  calls, events), which lands inside the agent spans of the wrapped methods. It is offered
  once per object (the mixins offer their instances at ``__init__``); a failing hook is logged
  and the object is instrumented as if no integration knew it.
* ``uninstrument(target)`` puts back exactly what was there: the original class ``__dict__``
  entries (the same ``classmethod``/``staticmethod`` objects), or for an instance removes the
  attributes it added, so ``vars(obj)`` is as before, then calls the claiming integration's
  undo. Uninstrumenting something not instrumented is a no-op.
"""

from __future__ import annotations

import inspect
import logging
import threading
import types
import weakref
from typing import Any, Callable, Iterable, Sequence, TypeVar

from agent_rl_plugin import plugins
from agent_rl_plugin.instrumentation.calls import instance_disabled
from agent_rl_plugin.instrumentation.spans import log_failure
from agent_rl_plugin.instrumentation.wrappers import is_wrapped, wrap
from agent_rl_plugin.semconv import SPAN_KIND_AGENT, SPAN_KIND_TOOL

logger = logging.getLogger("agent_rl_plugin.instrumentation")

T = TypeVar("T")

#: Agent methods wrapped by default, when the class defines them.
AGENT_METHOD_NAMES: tuple[str, ...] = (
    "chat", "run", "arun", "step", "invoke", "ainvoke", "__call__",
)  # fmt: skip

_ABSENT: Any = object()  # "there was no entry": restoring means deleting
_INSTANCE_PATCHES = "__agent_rl_patches__"
#: In an instance's ``__dict__`` once an integration claimed it: that integration's undo
#: (``None`` while the integrations are being asked).
_INSTANCE_CLAIM = "__agent_rl_claim__"
INSTRUMENT_HOOK = "agent_rl_instrument_object"
_class_patches: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()

__all__ = ["instrument", "uninstrument", "claim", "AGENT_METHOD_NAMES"]


def resolve_static(cls: type, name: str, skip: Iterable[type] = ()) -> Any:
    """The raw ``__dict__`` entry for ``name`` along ``cls``'s MRO (``object`` and ``skip``
    excluded), or :data:`_ABSENT`."""
    skipped = set(skip)
    for klass in cls.__mro__:
        if klass is object or klass in skipped:
            continue
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _ABSENT


def default_methods(cls: type, skip: Iterable[type] = ()) -> list[str]:
    """The :data:`AGENT_METHOD_NAMES` that ``cls`` defines (MRO, ``object``/``skip`` excluded)."""
    skip = tuple(skip)
    return [n for n in AGENT_METHOD_NAMES if _is_method_like(resolve_static(cls, n, skip))]


def _is_method_like(raw: Any) -> bool:
    if raw is _ABSENT or isinstance(raw, (property, type)):
        return False
    return isinstance(raw, (classmethod, staticmethod)) or callable(raw)


def _wrap_raw(raw: Any, kind: str, agent_name: str, method: str, role: str, dynamic: bool) -> Any:
    """Wrap a raw class ``__dict__`` entry so it still binds the same way."""
    name = agent_name if kind == SPAN_KIND_AGENT else method
    dynamic = dynamic and kind == SPAN_KIND_AGENT
    if isinstance(raw, (classmethod, staticmethod)):
        return wrap(raw, kind=kind, name=name, role=role, name_from_instance=dynamic)
    has_self = inspect.isfunction(raw) or inspect.ismethoddescriptor(raw)
    return wrap(raw, kind=kind, name=name, role=role, has_self=has_self, name_from_instance=dynamic)


def wrap_class_methods(
    cls: type,
    methods: Sequence[str] | None,
    tool_methods: Sequence[str] | None,
    *,
    role: str = "agent",
    skip: Iterable[type] = (),
) -> dict[str, Any]:
    """Wrap methods onto ``cls``; returns ``{name: previous cls.__dict__ entry or _ABSENT}``.

    Names that ``cls`` does not define (or that are already wrapped) are skipped. Agent spans
    are named after the class of the instance at call time.
    """
    skip = tuple(skip)
    if methods is None:
        methods = default_methods(cls, skip)
    changed: dict[str, Any] = {}
    for kind, names in ((SPAN_KIND_AGENT, methods), (SPAN_KIND_TOOL, tool_methods or ())):
        for name in names:
            raw = resolve_static(cls, name, skip)
            if not _is_method_like(raw):
                logger.debug("agent-rl: %s has no method %r to trace", cls.__qualname__, name)
                continue
            if is_wrapped(raw) or name in changed:
                continue
            wrapped = _wrap_raw(raw, kind, cls.__name__, name, role, dynamic=True)
            changed[name] = cls.__dict__.get(name, _ABSENT)
            setattr(cls, name, wrapped)
    return changed


def instrument(
    target: T,
    methods: Sequence[str] | None = None,
    tool_methods: Sequence[str] | None = None,
    *,
    role: str = "agent",
) -> T:
    """Trace ``target``'s agent ``methods`` and ``tool_methods`` (a class or an instance).

    ``role`` is recorded as ``agent_rl.agent.role`` (``"orchestrator"`` for a coordinator).
    An instance is first offered to the installed integrations (:func:`claim`). Returns
    ``target``. Idempotent; undo with :func:`uninstrument`.
    """
    if methods is None:
        methods = getattr(target, "rl_methods", None)
    if tool_methods is None:
        tool_methods = getattr(target, "rl_tool_methods", None) or ()
    if isinstance(target, type):
        if target in _class_patches:
            return target
        _class_patches[target] = wrap_class_methods(target, methods, tool_methods, role=role)
        return target
    if _INSTANCE_PATCHES in _instance_dict(target):
        return target
    claim(target)  # first: an instance-level layer the integration installs is wrapped below
    _instrument_instance(target, methods, tool_methods, role)
    return target


_ASKING: Any = None  # the claim marker's value while the integrations are being asked
_claim_lock = threading.Lock()


def claim(obj: Any) -> None:
    """Offer the instance ``obj`` to the ``agent_rl_instrument_object`` hook.

    Does nothing when an integration claimed ``obj`` already (its ``__dict__`` keeps the undo
    until :func:`uninstrument`), when it was created with ``enable_rl=False``, or has no
    ``__dict__``. The implementations are asked in pluggy's call order; the first that returns
    something other than ``None`` has claimed ``obj``. One that raises is logged
    (:func:`log_failure`) and skipped. An object no integration claimed is left exactly as it
    was (``vars(obj)`` unchanged). Never raises.
    """
    try:
        attrs = object.__getattribute__(obj, "__dict__")
        if not isinstance(attrs, dict) or instance_disabled(obj):
            return
        # Check-and-set under a lock: of two threads instrumenting obj, one asks (a hook that
        # instruments obj again is not re-asked either: the marker is already there).
        with _claim_lock:
            if _INSTANCE_CLAIM in attrs:
                return
            attrs[_INSTANCE_CLAIM] = _ASKING
    except Exception:
        return
    undo = _ask_integrations(obj)
    try:
        attrs = object.__getattribute__(obj, "__dict__")
        with _claim_lock:
            if undo is None:
                attrs.pop(_INSTANCE_CLAIM, None)
            else:
                attrs[_INSTANCE_CLAIM] = undo
    except Exception:
        log_failure("remembering which integration instrumented an object")


def _ask_integrations(obj: Any) -> Callable[[], None] | None:
    try:
        caller = getattr(plugins.get_plugin_manager().hook, INSTRUMENT_HOOK, None)
        impls = caller.get_hookimpls() if caller is not None else []
    except Exception:
        log_failure(f"collecting the {INSTRUMENT_HOOK} hooks")
        return None
    arguments = {"obj": obj}
    for impl in reversed(impls):  # pluggy's call order; hook wrappers are not supported here
        if impl.hookwrapper or impl.wrapper:
            continue
        try:
            result = impl.function(*(arguments[name] for name in impl.argnames))
        except Exception:
            log_failure(f"the {INSTRUMENT_HOOK} hook of plugin {impl.plugin_name!r}")
            continue
        if result is None:
            continue
        if not callable(result):
            logger.warning(
                "agent-rl: the %s hook of plugin %r returned %r, not an undo callable: uninstrument() "
                "cannot undo what it installed",
                INSTRUMENT_HOOK,
                impl.plugin_name,
                type(result).__name__,
            )
            return _nothing
        return result
    return None


def _nothing() -> None:
    return None


def _instance_dict(obj: Any) -> dict[str, Any]:
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        raise TypeError(
            f"agent-rl: cannot instrument a {type(obj).__name__} instance: it has no __dict__ "
            f"(__slots__?). Instrument its class instead: instrument({type(obj).__name__})."
        ) from None


def _instrument_instance(obj: Any, methods: Sequence[str] | None, tool_methods: Sequence[str], role: str) -> None:
    attrs = _instance_dict(obj)
    if _INSTANCE_PATCHES in attrs:
        return
    cls = type(obj)
    if methods is None:
        methods = [n for n in AGENT_METHOD_NAMES if n in attrs] + default_methods(cls)
    patches: dict[str, Any] = {}
    for kind, names in ((SPAN_KIND_AGENT, methods), (SPAN_KIND_TOOL, tool_methods)):
        for name in names:
            if name in patches:
                continue
            if name.startswith("__") and name.endswith("__"):
                logger.debug("agent-rl: %s can only be traced on the class", name)
                continue
            wrapped = _wrap_for_instance(obj, cls, attrs, name, kind, role)
            if wrapped is None:
                continue
            patches[name] = attrs.get(name, _ABSENT)
            attrs[name] = wrapped
    attrs[_INSTANCE_PATCHES] = patches


def _wrap_for_instance(obj: Any, cls: type, attrs: dict[str, Any], name: str, kind: str, role: str) -> Any:
    tool_or_agent = cls.__name__ if kind == SPAN_KIND_AGENT else name
    if name in attrs:  # a callable stored on the instance itself
        raw = attrs[name]
        if not callable(raw) or is_wrapped(raw):
            return None
        return wrap(raw, kind=kind, name=tool_or_agent, role=role)
    raw = resolve_static(cls, name)
    if not _is_method_like(raw) or is_wrapped(raw):
        return None
    if isinstance(raw, staticmethod):
        return wrap(raw.__func__, kind=kind, name=tool_or_agent, role=role, has_self=False)
    if isinstance(raw, classmethod):
        func = wrap(raw.__func__, kind=kind, name=tool_or_agent, role=role, has_self=True)
        return types.MethodType(func, cls)
    if inspect.isfunction(raw) or inspect.ismethoddescriptor(raw):
        func = wrap(raw, kind=kind, name=tool_or_agent, role=role, has_self=True)
        return types.MethodType(func, obj)
    return wrap(raw, kind=kind, name=tool_or_agent, role=role, has_self=False)


def uninstrument(target: T) -> T:
    """Undo :func:`instrument` exactly, then call the undo of the integration that claimed the
    instance (also one claimed by a mixin's ``__init__``). Returns ``target``."""
    if isinstance(target, type):
        patches = _class_patches.pop(target, None)
        for name, original in (patches or {}).items():
            if original is _ABSENT:
                if name in target.__dict__:
                    delattr(target, name)
            else:
                setattr(target, name, original)
        return target
    try:
        attrs = object.__getattribute__(target, "__dict__")
    except AttributeError:
        return target
    patches = attrs.pop(_INSTANCE_PATCHES, None)
    for name, original in (patches or {}).items():
        if original is _ABSENT:
            attrs.pop(name, None)
        else:
            attrs[name] = original
    undo = attrs.pop(_INSTANCE_CLAIM, None)
    if undo is not None:
        try:
            undo()
        except Exception:
            log_failure(f"undoing an {INSTRUMENT_HOOK} hook")
    return target
