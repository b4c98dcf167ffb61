"""Bugs planted on purpose, for tests that prove the checker catches and shrinks them.

``plant("hw-ahead")`` (a context manager) makes every leader raise its HW to its
own LEO on each append, without waiting for the ISR followers: Kafka's worst
replication bug. It patches ``Partition.maybe_increment_leader_hw`` for the block
only; ``plant(None)`` does nothing. Never used outside tests and their replays.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from minibroker.cluster.partition import Partition

PLANTS = ("hw-ahead",)


def _hw_ahead(self: Partition, now_ms: int) -> bool:
    if self.freeze_hw_under_min_isr and self.is_under_min_isr:
        return False
    return self.log.maybe_increment_high_watermark(self.log.log_end_offset)


@contextlib.contextmanager
def plant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    if name not in PLANTS:
        raise ValueError(f"unknown planted bug {name!r}; expected one of: {', '.join(PLANTS)}")
    saved = Partition.maybe_increment_leader_hw
    Partition.maybe_increment_leader_hw = _hw_ahead  # type: ignore[method-assign]
    try:
        yield
    finally:
        Partition.maybe_increment_leader_hw = saved  # type: ignore[method-assign]
