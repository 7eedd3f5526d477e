"""The garbage collector around a training run: paused while the run imports its stack (torch,
transformers, TRL, PEFT, datasets) and loads its data, then one full collection, the survivors
frozen for the run, and all unfrozen at its end.

Why: importing the training stack creates ~450k long-lived objects. With the collector on, the
heap's growth triggers about eight full collections during those imports, each scanning
everything imported so far, and every full collection during training (``accelerate`` runs one
when a trainer starts) scans them all again; a run from the command line spent as much time in
the collector as in a short training loop. Paused, then frozen after one collection, the
imported modules are scanned once.

What is trained does not change: the collector only frees reference cycles, and the one
collection before freezing frees every cycle made while it was paused, so nothing unreachable
is frozen. Objects freed by reference counting are freed as always, paused or frozen.

A caller that manages the collector itself (it is disabled, or objects are already frozen when
the run starts) is left alone: :func:`training_heap` then changes nothing.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Callable, Iterator, Optional


class TrainingHeap:
    """The state of one :func:`training_heap`: ``managed`` when this run pauses and freezes the
    collector (``False``: the caller manages it, and :meth:`settle` only runs ``preload``)."""

    def __init__(self, managed: bool) -> None:
        self.managed = managed
        self.settled = False
        self.frozen = 0  # objects frozen by settle()

    def settle(self, preload: Optional[Callable[[], object]] = None) -> None:
        """Run ``preload`` (the trainer's imports) while still paused, then collect once, freeze
        what survives and turn the collector back on. Called once, when the data is built and
        the run is about to train; a second call only runs ``preload``."""
        if preload is not None:
            preload()
        if not self.managed or self.settled:
            return
        self.settled = True
        gc.collect()
        gc.freeze()
        self.frozen = gc.get_freeze_count()
        gc.enable()


@contextlib.contextmanager
def training_heap() -> Iterator[TrainingHeap]:
    """Pause the collector for the set-up of a run; yields a :class:`TrainingHeap` whose
    :meth:`~TrainingHeap.settle` ends the pause. On exit (normal or by an exception) the frozen
    objects are unfrozen and the collector is on again, as it was before; if it was off, or
    objects were frozen already, nothing is changed at all."""
    managed = gc.isenabled() and gc.get_freeze_count() == 0
    heap = TrainingHeap(managed)
    if managed:
        gc.disable()
    try:
        yield heap
    finally:
        if managed:
            if heap.settled:
                gc.unfreeze()
            gc.enable()


__all__ = ["TrainingHeap", "training_heap"]
