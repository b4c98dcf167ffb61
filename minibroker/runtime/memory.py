"""A cyclic-GC policy for long simulation runs.

A run allocates millions of short-lived objects (operations, messages,
timer entries) while a few hundred thousand live ones (logs, request records)
only grow. With Python's default thresholds the collector rescans that growing
heap over and over and ends up costing more than the simulation. ``quiet_gc``
freezes what exists before the run, raises the first-generation threshold,
and restores both afterwards. During the run, every object that survives a
first-generation collection is frozen too (``gc.freeze`` after each
collection): the run's long-lived state (request records, log batches) is
scanned once, when young, and never again by older-generation collections.
Nothing is leaked by it: the timer unbinds fired tasks, so per-request garbage
is freed by reference counting, not by the GC; a reference cycle that became
garbage after surviving a collection is collected by the first full collection
after the block.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: the first-generation threshold used during runs (Python's default is 700)
RUN_THRESHOLD = 50_000


@contextlib.contextmanager
def quiet_gc(threshold: int = RUN_THRESHOLD) -> Iterator[None]:
    """Within the block: earlier objects frozen, GC generation 0 collected every ``threshold`` allocations."""
    saved = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, saved[1], saved[2])
    gc.callbacks.append(_freeze_survivors)
    try:
        yield
    finally:
        gc.callbacks.remove(_freeze_survivors)
        gc.set_threshold(*saved)
        gc.unfreeze()  # into the oldest generation: the next full collection sees it all again


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    """After a collection: move the objects that survived it to the permanent generation."""
    if phase == "stop":
        gc.freeze()
