"""The test harness of the ``code_execution`` reward: the sandbox's ``main.py`` (see
:mod:`.code_harness`, which appends ``_main(<code>, <tests>)`` to this file's text). Never
imported: the scorer reads it as text. Only the standard library, Python 3.8+.

Contract, in order:

1. Before any candidate code runs, the main thread reads the scorer's per-run nonce (the first
   line of fd 0), reads the rest of stdin into memory (it becomes ``sys.stdin``), points fd 0 at
   ``/dev/null`` (the nonce cannot be read again), keeps a private duplicate of fd 1, the original
   ``os.write``/``os._exit`` and a copy of the builtins, and adds an audit hook refusing the
   ways to reach another thread's frames or this process's memory (``gc.get_objects``/
   ``get_referrers``/``get_referents``, ``sys._current_frames``, ``sys.settrace``/
   ``setprofile``, reading ``/proc/*/mem``). The tests are parsed, made strict (step 3) and
   compiled now, and this module's functions use a private copy of the builtins.
2. A worker thread (the nonce is only ever a local of the main thread) runs the candidate's code
   as module ``__main__`` (also ``solution``), compiled as ``solution.py``. ``SystemExit`` with code
   0/None ends the module, not the run: the tests still run; another code fails.
3. The tests (``tests.py``) run in their own namespace: a copy of the candidate's names plus the
   builtins copied in step 1 (what the code did to ``builtins`` does not reach them). Every
   ``a == b`` and ``a in b`` in them is rewritten to a strict check (:func:`_same`): values of
   builtin types are compared by the builtin types' own methods and must be of the same kind
   (an object whose ``__eq__`` always says True equals no number, string or container). Then
   every top-level ``test*`` function the tests define and never call themselves is called;
   all of them are looked up right after the tests' module code ran (one that has disappeared
   is a failure).
4. Only when the worker finished all of that normally does the main thread write
   ``"\\n<marker> <nonce>\\n"`` on its duplicate of fd 1 and ``os._exit(0)``. Any other end
   (an exception, ``SystemExit``, ``os._exit``, a signal, a hang) has no nonce line; failures
   print the traceback (``solution.py``/``tests.py`` frames only) and exit 1, or the code's own
   ``SystemExit`` code. The nonce is deleted before anything of the candidate's can run in the
   main thread. The code's own threads must have ended too (``threading.active_count() == 1``).

Not a proof against code that means it: code in the worker thread can walk its stack frames to
the harness's bookkeeping there (``box``, the tests' namespace) and, with a thread racing the
main thread's check, could forge a pass. No in-process check is proof against code in the same
process; this one closes the easy ways (exiting, lying equality, patched builtins, fake lines).
"""

if __name__ != "__main__":
    raise ImportError("code_harness_script is the sandbox's main.py: the scorer runs its text")

import ast as _ast
import builtins as _builtins
import io as _io
import linecache as _linecache
import os as _os
import re as _re
import sys as _sys
import threading as _threading
import traceback as _traceback
import types as _types
from decimal import Decimal as _Decimal
from fractions import Fraction as _Fraction

# this module's functions look builtins up in a private copy: the code's ``builtins.len = ...``
# does not reach them; what the main thread calls after the code ran is bound now, likewise
__builtins__ = dict(_builtins.__dict__)  # type: ignore[assignment]
_realpath = _os.path.realpath
_fsdecode = _os.fsdecode
_thread_start = _threading.Thread.start
_thread_join = _threading.Thread.join
_active_count = _threading.active_count

_SOLUTION = "solution.py"
_TESTS = "tests.py"
_MARKER = b"agent-rl-harness: tests passed"
_PASSED = object()
_FAILED = object()
_DENIED = frozenset(
    {
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
    }
)
_PROC_MEMORY = _re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|map_files|pagemap)(/|$)")


def _guard(event, args):
    """Audit hook: no looking into other frames or this process's memory."""
    if event in _DENIED:
        raise PermissionError("sandbox harness: %s is not allowed" % event)
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = _fsdecode(args[0])
        if "proc" in path and _PROC_MEMORY.match(_realpath(path)):
            raise PermissionError("sandbox harness: reading process memory is not allowed")


# ---- strict comparison ----------------------------------------------------------------------
def _value(x):
    """``(kind, value)``: builtin values (and their subclasses, read with the builtin type's own
    C methods, so overridden ``__eq__``/``__iter__`` are not used) as exact builtin values;
    ``("object", x)`` for anything else."""
    if x is None:
        return "none", None
    if type(x) is bool:
        return "number", x
    if isinstance(x, int):
        return "number", int.__int__(x)
    if isinstance(x, float):
        return "number", float.__float__(x)
    if type(x) is complex:
        return "number", x
    if isinstance(x, str):
        return "str", str.__str__(x)
    if type(x) in (bytes, bytearray):
        return "bytes", x
    if isinstance(x, list):
        return "sequence-list", list(list.__iter__(x))
    if isinstance(x, tuple):
        return "sequence-tuple", tuple(tuple.__iter__(x))
    if isinstance(x, dict):
        return "dict", list(dict.items(x))
    if isinstance(x, (set, frozenset)):
        return "set", list(set.__iter__(x) if isinstance(x, set) else frozenset.__iter__(x))
    return "object", x


def _plain(x):
    """True for exact builtin hashable values (numbers, strings, bytes, None, tuples and frozensets
    of them): their ``__eq__``/``__hash__`` are the builtin ones."""
    t = type(x)
    if x is None or t in (bool, int, float, complex, str, bytes):
        return True
    if t in (tuple, frozenset):
        return all(_plain(item) for item in x)
    return False


def _same(a, b):
    """Strict ``a == b`` (see the module docstring)."""
    if a is b and type(a) is not float:
        return True
    kind_a, va = _value(a)
    kind_b, vb = _value(b)
    if kind_a == "object" or kind_b == "object":
        if kind_a == "object" and kind_b == "object":
            return bool(a == b) and bool(b == a)  # both foreign: their own equality, both ways
        other, plain = (a, vb) if kind_a == "object" else (b, va)
        if type(other) in (_Fraction, _Decimal) and (kind_a == "number" or kind_b == "number"):
            return bool(a == b) and bool(b == a)
        return False
    if kind_a != kind_b:
        return False
    if kind_a in ("none", "number", "str", "bytes"):
        return va == vb
    if kind_a.startswith("sequence"):
        return len(va) == len(vb) and all(_same(x, y) for x, y in zip(va, vb))
    if kind_a == "set":
        if not all(_plain(x) for x in va) or not all(_plain(x) for x in vb):
            return False
        return frozenset(va) == frozenset(vb)
    # dicts: plain keys only; the same keys; every value strictly the same
    if not all(_plain(k) for k, _ in va) or not all(_plain(k) for k, _ in vb):
        return False
    da, db = dict(va), dict(vb)
    return len(da) == len(db) and da.keys() == db.keys() and all(_same(da[k], db[k]) for k in da)


def _contains(item, container):
    """Strict ``item in container`` for builtin containers; a foreign container's own
    ``__contains__`` otherwise."""
    kind, values = _value(container)
    if kind.startswith("sequence") or kind == "set":
        return any(_same(item, x) for x in values)
    if kind == "dict":
        return any(_same(item, k) for k, _ in values)
    if kind == "str" and isinstance(item, str):
        return str.__contains__(values, str.__str__(item))
    return item in container


class _Strict(_ast.NodeTransformer):
    """``a == b`` -> ``__arl_same__(a, b)``, ``a in b`` -> ``__arl_in__(a, b)``."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (_ast.Eq, _ast.In)):
            name = "__arl_same__" if isinstance(node.ops[0], _ast.Eq) else "__arl_in__"
            call = _ast.Call(
                func=_ast.Name(id=name, ctx=_ast.Load()), args=[node.left, node.comparators[0]], keywords=[]
            )
            return _ast.copy_location(call, node)
        return node


def _test_functions(tree):
    """Names of the top-level ``test*`` functions without required arguments that the tests
    never call themselves (the harness calls them)."""
    called = {n.func.id for n in _ast.walk(tree) if isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name)}
    names = []
    for node in tree.body:
        if isinstance(node, _ast.FunctionDef) and node.name.startswith("test") and node.name not in called:
            args = node.args
            required = len(getattr(args, "posonlyargs", [])) + len(args.args) - len(args.defaults)
            required += sum(1 for d in args.kw_defaults if d is None)
            if required == 0:
                names.append(node.name)
    return tuple(names)  # immutable: the code cannot shorten it


# ---- the worker thread: the candidate's code, then the tests ---------------------------------
class _TestsFailed(Exception):
    pass


def _source(name, text):
    _linecache.cache[name] = (len(text), None, text.splitlines(True), name)


def _prepare_tests(tests_src):
    """``(code object, names of the test functions to call)`` of the tests, or ``None``; parsed,
    made strict and compiled before any candidate code runs (it cannot patch ``ast``)."""
    if tests_src is None:
        return None
    _source(_TESTS, tests_src)
    tree = _Strict().visit(_ast.parse(tests_src, _TESTS))
    _ast.fix_missing_locations(tree)
    return compile(tree, _TESTS, "exec", dont_inherit=True), _test_functions(tree)


def _execute(code_src, tests, builtins_copy):
    _source(_SOLUTION, code_src)
    module = _types.ModuleType("__main__")
    module.__file__ = _SOLUTION
    module.__builtins__ = _builtins
    _sys.modules["__main__"] = module
    _sys.modules["solution"] = module
    code = compile(code_src, _SOLUTION, "exec", dont_inherit=True)
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    if tests is None:
        return
    tests_code, names = tests
    # the candidate's names, minus any that shadow a builtin (the tests get the real ones)
    namespace = {k: v for k, v in module.__dict__.items() if k not in builtins_copy or k.startswith("__")}
    namespace.update(
        __name__="tests", __file__=_TESTS, __builtins__=builtins_copy, __arl_same__=_same, __arl_in__=_contains
    )
    exec(tests_code, namespace)
    functions = [(name, namespace.get(name)) for name in names]
    for name, function in functions:
        if not callable(function):
            raise _TestsFailed("test function %s disappeared before it ran" % name)
    for _name, function in functions:
        function()


def _run(code_src, tests, builtins_copy, box):
    try:
        _execute(code_src, tests, builtins_copy)
    except BaseException as exc:  # noqa: BLE001 - every way out but the normal one is a failure
        box.append(_FAILED)
        box.append(exc)
        return
    box.append(_PASSED)


# ---- the main thread --------------------------------------------------------------------------
def _read_stdin():
    """``(nonce, rest of stdin)``; then fd 0 is /dev/null."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = _os.read(0, 1)
        if not chunk:
            break
        line += chunk
    rest = []
    while True:
        chunk = _os.read(0, 65536)
        if not chunk:
            break
        rest.append(chunk)
    null = _os.open(_os.devnull, _os.O_RDONLY)
    _os.dup2(null, 0)
    _os.close(null)
    return line.strip(), b"".join(rest)


def _report(exc, write, exit_):
    """Print the failure (the candidate's frames only) and exit with its code."""
    code = 1
    if isinstance(exc, SystemExit):
        if isinstance(exc.code, int) and not isinstance(exc.code, bool):
            code = exc.code or 1
        message = "SystemExit: %r (raised by the code; the tests did not finish)" % (exc.code,)
        write(2, ("\n" + message + "\n").encode())
        return exit_(code)
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename not in (_SOLUTION, _TESTS):
        tb = tb.tb_next
    try:
        text = "".join(_traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # noqa: BLE001 - a str() of the candidate's that fails
        text = "%s\n" % type(exc).__name__
    write(2, text.encode("utf-8", "replace"))
    return exit_(code)


def _main(code_src, tests_src):
    write, exit_ = _os.write, _os._exit
    nonce, stdin_bytes = _read_stdin()
    marker_fd = _os.dup(1)
    stdout, stderr = _sys.stdout, _sys.stderr
    _sys.stdin = _io.TextIOWrapper(_io.BytesIO(stdin_bytes), encoding="utf-8")
    builtins_copy = dict(_builtins.__dict__)
    box = []
    try:
        tests = _prepare_tests(tests_src)
    except BaseException as exc:  # noqa: BLE001 - tests that do not compile
        box += [_FAILED, exc]
        tests = None
    _sys.addaudithook(_guard)
    if not box:
        worker = _threading.Thread(
            target=_run, args=(code_src, tests, builtins_copy, box), name="solution", daemon=True
        )
        _thread_start(worker)
        _thread_join(worker)  # the worker may have patched Thread.join before this line runs
    passed = len(box) == 1 and box[0] is _PASSED and _active_count() == 1
    for stream in (stdout, stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a closed stream
            pass
    if passed and nonce:
        write(marker_fd, b"\n" + _MARKER + b" " + nonce + b"\n")
        exit_(0)
    del nonce  # gone before anything of the candidate's can run in this thread
    failure = box[1] if len(box) >= 2 and box[0] is _FAILED else None
    if failure is None:
        if len(box) == 1 and box[0] is _PASSED:
            message = "the code left threads running after the tests"
        else:
            message = "the tests did not finish"
        write(2, ("\nharness: %s\n" % message).encode())
        exit_(1)
    _report(failure, write, exit_)
    exit_(1)
