"""``code_execution`` cannot be gamed by exiting early, lying about equality or faking output.

``ATTACKS``: a wrong ``add`` plus a trick that, when the tests were simply appended to the code
and the exit status scored, turned the wrong answer into a 1.0 (each checked against that
implementation). ``HARDENING``: tricks that already failed then, and tricks aimed at the new
harness (its nonce, its strict checks, its bookkeeping). Every one must score 0.0; correct
answers (including ones that call ``exit``/``sys.exit`` at the end, use stdin, print, use
``namedtuple``/``logging``/threads, or define their own classes) still score 1.0.
"""

from __future__ import annotations

import sys

import pytest

from agent_rl_plugin.rewards import Rollout
from agent_rl_plugin.rewards.builtin.code_execution import CodeExecution
from agent_rl_plugin.rewards.builtin.code_harness import MARKER, harness_program, read_verdict

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox needs Linux")

FENCE = "```"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TESTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"


def rollout(code: str, **metadata) -> Rollout:
    metadata.setdefault("tests", TESTS)
    return Rollout(rollout_id="r1", final_output=f"{FENCE}python\n{code}{FENCE}\n", metadata=metadata)


@pytest.fixture(scope="module")
def reward() -> CodeExecution:
    return CodeExecution(timeout_s=20)


SORT_TESTS = "assert sorted(add(1, 2)) == [1, 2, 3]\n"

#: Tricks that score a wrong answer 1.0 when the tests are appended to the code and the exit
#: status is scored (each was checked against that implementation): ``(code, tests)``.
ATTACKS = {
    "os._exit(0)": (WRONG + "import os\nos._exit(0)\n", TESTS),
    "exit(0)": (WRONG + "exit(0)\n", TESTS),
    "sys.exit(0)": (WRONG + "import sys\nsys.exit(0)\n", TESTS),
    "raise SystemExit(0)": (WRONG + "raise SystemExit(0)\n", TESTS),
    "SystemExit from inside the tests": ("import sys\ndef add(a, b):\n    sys.exit(0)\n", TESTS),
    "os._exit from inside the tests": ("import os\ndef add(a, b):\n    os._exit(0)\n", TESTS),
    "close stdout then exit": (WRONG + "import os, sys\nsys.stdout.close()\nos.close(1)\nos._exit(0)\n", TESTS),
    "always-true __eq__": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "def add(a, b):\n    return Anything()\n", TESTS),
    "int subclass with always-true __eq__": (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Liar(0)\n", TESTS),
    "list subclass with always-true __eq__": (
        "class Liar(list):\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Liar([a - b])\n", "assert add(1, 2) == [3]\n"),
    "print a fake completion line": (WRONG + f"import os\nprint('\\n{MARKER} ' + '0' * 32, flush=True)\nos._exit(0)\n", TESTS),
    "read stdin (the nonce) and print it": (WRONG + (
        "import os, sys\n"
        "try:\n    os.lseek(0, 0, 0)\nexcept OSError:\n    pass\n"
        "data = os.read(0, 100).decode() + sys.stdin.read()\n"
        f"print('\\n{MARKER} ' + (data.split() or ['x'])[0], flush=True)\nos._exit(0)\n"), TESTS),
    "override a builtin the tests use": (
        "def add(a, b):\n    return [3, 2, 2]\nimport builtins\nbuiltins.sorted = lambda x: [1, 2, 3]\n", SORT_TESTS),
    "shadow a builtin the tests use": (
        "def add(a, b):\n    return [3, 2, 2]\ndef sorted(x):\n    return [1, 2, 3]\n", SORT_TESTS),
}

#: Tricks that already failed before (the process dies, or the assert still raises), and tricks
#: aimed at the harness itself (its nonce, its checks, its bookkeeping): all must score 0.0.
HARDENING = {
    "SIGKILL itself": WRONG + "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "SIGTERM itself from inside the tests": "import os, signal\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGTERM)\n",
    "always-true __eq__ inside a list": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return [Anything()]\n"
    ),
    "print a guessed nonce at exit after failing": WRONG + (
        "import atexit, os\natexit.register(lambda: print('\\n" + MARKER + " ' + os.urandom(16).hex()))\n"
    ),
    "break builtins the harness uses": (
        "def add(a, b):\n    return [a - b]\n"
        "import builtins\nbuiltins.print = lambda *a, **k: None\nbuiltins.all = lambda x: True\n"
        "builtins.AssertionError = type('AssertionError', (Exception,), {})\n",
        "assert add(1, 2) == [3]\n",
    ),
    "replace the strict checks": WRONG + (
        "__arl_same__ = lambda a, b: True\n__arl_in__ = lambda a, b: True\n"
        "import builtins\nbuiltins.__arl_same__ = lambda a, b: True\n"
    ),
    "disable the rewrite by patching ast": WRONG.replace("a - b", "Anything()") + (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "import ast\nast.NodeTransformer.visit = lambda self, node: node\nast.parse = lambda *a, **k: ast.Module([], [])\n"
    ),
    "forge the result list and patch threading": WRONG + (
        "import sys, threading, time\nthreading.Thread.join = lambda self, timeout=None: None\n"
        "threading.active_count = lambda: 1\n"
        "harness = sys._getframe(2)  # the harness's frame that holds the result list\n"
        "harness.f_locals['box'].append(harness.f_globals['_PASSED'])\ntime.sleep(1)\n"
    ),
    "swallow the failure with excepthooks": WRONG + (
        "import sys, threading\nsys.excepthook = lambda *a: None\nthreading.excepthook = lambda *a: None\n"
    ),
    "trace function that jumps over the asserts": WRONG + (
        "import sys, linecache\n"
        "def tracer(frame, event, arg):\n"
        "    if event == 'line' and linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip().startswith('assert'):\n"
        "        frame.f_lineno = frame.f_lineno + 1\n"
        "    return tracer\n"
        "sys.settrace(tracer)\n"
    ),
    "look up the main thread's frames for the nonce": WRONG + (
        "import os, sys\n"
        "for frame in sys._current_frames().values():\n"
        "    while frame is not None:\n"
        "        if isinstance(frame.f_locals.get('nonce'), bytes):\n"
        "            print('\\n" + MARKER + " ' + frame.f_locals['nonce'].decode(), flush=True)\n"
        "            os._exit(0)\n"
        "        frame = frame.f_back\n"
    ),
    "gc hunt": WRONG + "import gc\nobjects = gc.get_objects()\n",
    "read the process memory": WRONG + "data = open('/proc/self/mem', 'rb')\n",
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_that_used_to_score_one_scores_zero(reward, name):
    code, tests = ATTACKS[name]
    result = reward.score(rollout(code, tests=tests))
    assert result.score == 0.0, f"{name}: {result.reason}"
    assert result.metrics["completed"] is False


@pytest.mark.parametrize("name", list(HARDENING))
def test_an_attack_on_the_harness_scores_zero(reward, name):
    code, tests = HARDENING[name] if isinstance(HARDENING[name], tuple) else (HARDENING[name], TESTS)
    result = reward.score(rollout(code, tests=tests))
    assert result.score == 0.0, f"{name}: {result.reason}"
    assert result.metrics["completed"] is False


def test_a_thread_left_running_is_a_failure(reward):
    # it could still change what the harness looks at after the tests; a pool shut down is fine
    code = RIGHT + "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\n"
    result = reward.score(rollout(code))
    assert result.score == 0.0 and "threads running" in result.reason
    hidden = reward.score(rollout(code + "threading.active_count = lambda: 1\n"))
    assert hidden.score == 0.0 and "threads running" in hidden.reason


def test_deleting_the_tests_functions_does_not_skip_them(reward):
    tests = (
        "def test_small():\n    assert add(1, 2) == 3\n"
        "def test_more():\n    assert add(2, 2) == 4\n"
        "assert add(0, 0) == 0\n"
    )
    # the test functions are never called by the tests: the harness calls them
    assert reward.score(rollout(WRONG, tests=tests)).score == 0.0
    assert reward.score(rollout(RIGHT, tests=tests)).score == 1.0
    # deleting them (from the frame that runs the tests) while the tests' module code runs fails
    deleter = (
        "import sys\ndef add(a, b):\n"
        "    names = sys._getframe(1).f_globals\n"
        "    for name in [n for n in names if n.startswith('test')]:\n        del names[name]\n"
        "    return a - b\n"
    )
    deleted = reward.score(rollout(deleter, tests="def test_small():\n    assert add(1, 2) == 3\nassert add(0, 0) == 0\n"))
    assert deleted.score == 0.0 and "disappeared" in deleted.reason
    # ... or while a test function runs (the harness looked them all up before calling any)
    later = reward.score(rollout(deleter, tests="def test_a():\n    assert add(0, 0) == 0\ndef test_b():\n    assert add(1, 2) == 3\n"))
    assert later.score == 0.0 and later.reason.startswith("exit code 1: AssertionError (tests line 4:"), later.reason


def test_a_fake_completion_line_is_not_a_pass():
    assert read_verdict(f"x\n{MARKER} abc\n", "abd").completed is False
    assert read_verdict(f"x\n{MARKER} abc\n", "").completed is False
    ok = read_verdict(f"x\n\n{MARKER} abc\n", "abc")
    assert ok.completed and ok.stdout == "x\n"
    assert "abc" not in harness_program("print(1)", "assert True")  # no secret in the program


CORRECT = {
    "plain": RIGHT,
    "ends with exit(0)": RIGHT + "exit(0)\n",
    "script with sys.exit(main())": RIGHT + "import sys\ndef main():\n    return 0\nif __name__ == '__main__':\n    sys.exit(main())\n",
    "prints and uses builtins": RIGHT + "print('hello', len([1, 2]))\n",
    "returns an int subclass (IntEnum)": (
        "import enum\nclass N(enum.IntEnum):\n    THREE = 3\n    FOUR = 4\n"
        "def add(a, b):\n    return N(a + b)\n"
    ),
    "closes stdout after its own output": RIGHT + "import sys\nprint('done')\nsys.stdout.flush()\n",
    "uses namedtuple, dataclasses and logging": RIGHT + (
        "import collections, dataclasses, logging\nP = collections.namedtuple('P', 'x y')\n"
        "@dataclasses.dataclass\nclass Q:\n    x: int\nlogging.getLogger('x').warning('hi')\nassert P(1, 2) == (1, 2) and Q(1) == Q(1)\n"
    ),
    "a thread pool used and shut down": RIGHT + (
        "from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(2) as pool:\n"
        "    assert list(pool.map(abs, [-1, 2])) == [1, 2]\n"
    ),
}


@pytest.mark.parametrize("name", list(CORRECT))
def test_correct_answers_still_score_one(reward, name):
    result = reward.score(rollout(CORRECT[name]))
    assert result.score == 1.0, f"{name}: {result.reason}"
    assert result.metrics["completed"] is True


def test_strict_equality_keeps_what_python_considers_equal(reward):
    code = (
        "import collections, fractions\n"
        "def values():\n"
        "    return {'n': 4.0, 't': (1, 2), 'c': collections.Counter('aab'), 'd': collections.OrderedDict(a=1),\n"
        "            's': {1, 2}, 'b': True, 'f': fractions.Fraction(1, 2), 'nested': [[1, 'x'], {'k': None}]}\n"
        "class Point:\n    def __init__(self, x):\n        self.x = x\n"
        "    def __eq__(self, other):\n        return isinstance(other, Point) and other.x == self.x\n"
    )
    tests = (
        "v = values()\n"
        "assert v['n'] == 4\nassert v['t'] == (1, 2)\nassert v['c'] == {'a': 2, 'b': 1}\nassert v['d'] == {'a': 1}\n"
        "assert v['s'] == frozenset({2, 1})\nassert v['b'] == 1\nassert v['f'] == 0.5\n"
        "assert v['nested'] == [[1, 'x'], {'k': None}]\nassert Point(1) == Point(1)\nassert 2 in v['s']\n"
        "assert 'a' in v['c'] and 'x' in 'xyz' and (1, 2) in [(1, 2)]\nassert not (v['t'] == [1, 2])\n"
    )
    result = reward.score(rollout(code, tests=tests))
    assert result.score == 1.0, result.reason
    wrong = reward.score(rollout(code, tests="assert values()['nested'] == [[1, 'y'], {'k': None}]\n"))
    assert wrong.score == 0.0 and wrong.reason.startswith("exit code 1: AssertionError (tests line 1:")


def test_stdin_and_expected_stdout_still_work_and_the_nonce_is_not_on_stdin(reward):
    code = "import sys\nname = input()\nrest = sys.stdin.read()\nprint('hello', name, repr(rest))\n"
    result = reward.score(rollout(code, tests=None, stdin="Ada\nmore\n", expected_stdout="hello Ada 'more\\n'"))
    assert result.score == 1.0, result.reason
    assert result.metrics["stdout_match"] is True
