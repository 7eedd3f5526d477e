"""The width a table fits when stdout is piped: read without rich (``_plain_console_width``),
it is what rich's console says, whichever of stdin, stdout and stderr is a terminal of which size.
Each case runs in a fresh interpreter whose standard streams are a pseudo-terminal of a set size,
a pipe, or ``/dev/null``."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, os, sys
from agent_rl_plugin.cli import common
from agent_rl_plugin.cli.table_layout import plain_stdout
ours = common.terminal_width()
from rich.console import Console
theirs = Console().size.width
print(json.dumps({"plain": plain_stdout(), "ours": ours, "rich": theirs if theirs > 0 else 80}))
"""


def terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal ``columns`` wide: (the side the child gets, our side)."""
    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    return theirs, ours


def probe(stdin: str, stderr: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run :data:`PROBE` with stdout piped and stdin/stderr each ``"tty<N>"`` (a terminal N
    columns wide), ``"pipe"`` or ``"null"``."""
    opened: list[int] = []

    def stream(kind: str) -> object:
        if kind.startswith("tty"):
            child, parent = terminal(int(kind[3:]))
            opened.extend((child, parent))
            return child
        return subprocess.PIPE if kind == "pipe" else subprocess.DEVNULL

    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TERM")}
    environ.update(env or {}, PYTHONPATH=str(ROOT))
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE],
            stdin=None if stdin == "pipe" else stream(stdin),
            stdout=subprocess.PIPE,
            stderr=stream(stderr),
            env=environ,
            timeout=60,
            input=b"" if stdin == "pipe" else None,
        )
    finally:
        for fd in opened:
            os.close(fd)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("stdin", "stderr", "env"),
    [
        ("tty97", "null", None),  # the first terminal found is stdin's
        ("null", "tty133", None),  # then stderr's (stdout is the pipe)
        ("tty61", "tty150", None),  # stdin before stderr
        ("null", "null", None),  # no terminal: 80
        ("pipe", "pipe", None),
        ("null", "tty120", {"COLUMNS": "0"}),  # 0: 80 for both
        ("null", "tty120", {"COLUMNS": "00"}),
        ("null", "tty120", {"TERM": "dumb"}),  # dumb matters only when stdout is a terminal
        ("tty70", "null", {"LINES": "10"}),
    ],
)
def test_the_piped_width_is_what_rich_says(stdin, stderr, env):
    seen = probe(stdin, stderr, env)
    assert seen["plain"] is True  # stdout is a pipe: the width is read without rich
    assert seen["ours"] == seen["rich"]


def test_the_sizes_are_really_read():
    assert probe("tty97", "null")["ours"] == 97 and probe("null", "null")["ours"] == 80
