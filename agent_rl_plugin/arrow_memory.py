"""How much memory pyarrow's allocator takes in a process that records (issue 19, the memory row).

pyarrow allocates through its bundled mimalloc, which on Linux (memory overcommit on) commits
whole arenas eagerly. A recording agent makes a few MB of Arrow buffers (rows, Parquet spool
segments), and eager arenas turn that into 20+ MB of resident memory: measured on a 30,000-span
agent, 114-123 MB peak RSS against 96-98 MB with ``MIMALLOC_ARENA_EAGER_COMMIT=0`` (mimalloc's
own option: commit arena memory when it is used). And mimalloc keeps freed memory for a second
(``purge_delay`` 1000 ms in pyarrow 26's build) before it returns it to the system:
with ``MIMALLOC_PURGE_DELAY=0`` as well (return it at once) a 100,000-span agent peaks 8 MB lower
(120 against 112 MB, twice each, the same loop time). mimalloc reads its options once, when
pyarrow's library is loaded, so the options must be in the environment at ``import pyarrow``.

Contract of :func:`lean_arrow_allocator`:

* inside the block, ``MIMALLOC_ARENA_EAGER_COMMIT=0`` and ``MIMALLOC_PURGE_DELAY=0`` are in
  ``os.environ`` when pyarrow is not imported yet and the user has set none of them (in any case,
  as mimalloc reads them; nor the older ``MIMALLOC_RESET_DELAY``) nor ``ARROW_DEFAULT_MEMORY_POOL``
  (their choice wins, always); on leaving, the environment is as before (subprocesses started
  later inherit nothing from us);
* it imports nothing itself: pyarrow is loaded only if the code inside the block loads it (a
  process that records over OTLP alone never loads it);
* once pyarrow is loaded (by us or by the user, before or after), it does nothing.

:data:`LEAN_ARROW_ENV` is what the merger process's environment gets (the same rule, for a
child whose pyarrow we start).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator, Mapping

#: mimalloc's option: 0 commits arena memory on first use instead of the whole arena at once.
ARENA_EAGER_COMMIT = "MIMALLOC_ARENA_EAGER_COMMIT"
#: pyarrow's own choice of allocator (``system``, ``jemalloc``, ``mimalloc``): when the user
#: sets it, the allocator is theirs and we add nothing.
ARROW_POOL = "ARROW_DEFAULT_MEMORY_POOL"
#: mimalloc's option: how long freed memory is kept before it goes back to the system (ms).
PURGE_DELAY = "MIMALLOC_PURGE_DELAY"
#: What :func:`lean_arrow_allocator` puts in the environment.
LEAN_ARROW_ENV: Mapping[str, str] = {ARENA_EAGER_COMMIT: "0", PURGE_DELAY: "0"}


def user_chose_allocator(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (default ``os.environ``) already says how pyarrow allocates: it names
    pyarrow's pool or sets one of the options we would set."""
    environ = os.environ if environ is None else environ
    choices = {ARROW_POOL, *LEAN_ARROW_ENV, "MIMALLOC_RESET_DELAY"}  # mimalloc: any case, legacy name
    return any(name.upper() in choices for name in environ)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default ``os.environ``) for a child process of ours that loads
    pyarrow: :data:`LEAN_ARROW_ENV` added unless the user chose an allocator."""
    result = dict(os.environ if environ is None else environ)
    if not user_chose_allocator(result):
        result.update(LEAN_ARROW_ENV)
    return result


@contextmanager
def lean_arrow_allocator() -> Iterator[None]:
    """Run the block with :data:`LEAN_ARROW_ENV` in the environment when pyarrow is still to be
    loaded and the user chose no allocator (see the module contract)."""
    if "pyarrow" in sys.modules or user_chose_allocator():
        yield
        return
    os.environ.update(LEAN_ARROW_ENV)
    try:
        yield
    finally:
        for name in LEAN_ARROW_ENV:
            os.environ.pop(name, None)
