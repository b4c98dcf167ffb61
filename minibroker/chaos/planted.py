"""Bugs planted on purpose, for tests that prove the checker catches and shrinks them.

- ``hw-ahead``: every leader raises its HW to its own LEO on each append, without
  waiting for the ISR followers: Kafka's worst replication bug (patches
  ``Partition.maybe_increment_leader_hw``);
- ``fetch-early``: a consumer's DelayedFetch completes on its first new byte below
  the HW, whatever its ``fetch.min.bytes`` (patches ``DelayedFetch.try_complete``);
- ``lso-unheld``: the last stable offset is the HW, whatever transaction is open:
  READ_COMMITTED reads records of transactions that may still abort (patches
  ``Log.last_stable_offset``);
- ``tombstones-early``: the cleaner removes a tombstone at the first cleaning after the one that
  kept it, as if ``delete.retention.ms`` were 0 (patches ``Cleaner.clean``);
- ``superseded-kept``: the cleaner reads no dirty range into its offset map, so it keeps every
  record and still moves its checkpoint past them (patches ``Cleaner.clean``).

``plant(name)`` is a context manager that patches for the block only; ``plant(None)``
does nothing. Never used outside tests and their replays.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.log import Log
from minibroker.broker.log_cleaner import Cleaner, CleanerStats
from minibroker.broker.log_cleaner_manager import LogToClean
from minibroker.broker.log_config import LogConfig
from minibroker.broker.partition import Partition


def _hw_ahead(self: Partition, now_ms: int) -> bool:
    if self.freeze_hw_under_min_isr and self.is_under_min_isr:
        return False
    return self.log.maybe_increment_high_watermark(self.log.log_end_offset)


_try_complete = DelayedFetch.try_complete


def _fetch_early(self: DelayedFetch) -> bool:
    request = self.request
    if request.is_from_follower:
        return _try_complete(self)
    self.request = attrs.evolve(request, min_bytes=1)
    try:
        return _try_complete(self)
    finally:
        self.request = request


def _lso_unheld(self: Log) -> int:
    return self.high_watermark


_clean = Cleaner.clean


def _tombstones_early(self: Cleaner, ltc: LogToClean, log: Log, config: LogConfig, now: int) -> CleanerStats:
    return _clean(self, ltc, log, attrs.evolve(config, delete_retention_ms=0), now)


def _superseded_kept(self: Cleaner, ltc: LogToClean, log: Log, config: LogConfig, now: int) -> CleanerStats:
    return _clean(self, attrs.evolve(ltc, first_dirty_offset=ltc.first_uncleanable_offset), log, config, now)


#: name -> (class, method name, replacement)
PLANTS: dict[str, tuple[type, str, Callable[..., Any] | property]] = {
    "hw-ahead": (Partition, "maybe_increment_leader_hw", _hw_ahead),
    "fetch-early": (DelayedFetch, "try_complete", _fetch_early),
    "lso-unheld": (Log, "last_stable_offset", property(_lso_unheld)),
    "tombstones-early": (Cleaner, "clean", _tombstones_early),
    "superseded-kept": (Cleaner, "clean", _superseded_kept),
}


@contextlib.contextmanager
def plant(name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    if name not in PLANTS:
        raise ValueError(f"unknown planted bug {name!r}; expected one of: {', '.join(PLANTS)}")
    owner, method, replacement = PLANTS[name]
    saved = getattr(owner, method)
    setattr(owner, method, replacement)
    try:
        yield
    finally:
        setattr(owner, method, saved)
