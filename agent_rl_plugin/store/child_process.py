"""Starting helper processes of ours (the spool merger, the receiver's decode workers).

Contract:

* :func:`child_argv` is the command line of a child that runs ``main(args)`` of one of our
  modules from **this very copy of the package** (the parent may run a checkout that is not on
  the default path, or another version may be installed), loaded from its folder without putting
  that folder on ``sys.path`` (where it could shadow the standard library; ``-P`` keeps the
  working folder off it too).
* :func:`children_supported`: children are started only where ``select`` works on pipes
  (POSIX) and Python can be run (not from a frozen app, whose ``sys.executable`` is the app
  itself).
* :func:`reply_channel`, called first thing in a child's ``main``: the child's replies go to
  the returned stream (the pipe its parent reads), and file descriptor 1 goes to ``os.devnull``
  from then on, so output of the child's own (DuckDB prints its progress bar to it) never mixes
  with the replies.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

_BOOTSTRAP = """
import importlib, importlib.util, os, sys
package = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "agent_rl_plugin", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
)
module = importlib.util.module_from_spec(spec)
sys.modules["agent_rl_plugin"] = module
spec.loader.exec_module(module)
importlib.import_module(sys.argv[2]).main(sys.argv[3:])
"""


def child_argv(module: str, *args: str) -> list[str]:
    """``[python, -P, -c, bootstrap, package folder, module, *args]``: runs ``module.main(args)``."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [sys.executable, "-P", "-c", _BOOTSTRAP, package, module, *args]


def children_supported() -> bool:
    """True where helper processes are started (see the module contract)."""
    return os.name == "posix" and bool(sys.executable) and not getattr(sys, "frozen", False)


def reply_channel() -> BinaryIO:
    """The stream a child replies on; file descriptor 1 goes nowhere from now on."""
    sys.stdout.flush()
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    return replies
