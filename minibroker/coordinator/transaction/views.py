"""What a broker's transaction coordinator shows (the TUI's transactions section, ``Broker.snapshot``).

Frozen values read from ``TransactionCoordinator.snapshot()``: nothing here refers back to live state.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class TransactionView:
    """One transactional id: its state (``pending``: the state a write in flight brings it to),
    producer id and epoch, partitions, and for an open transaction when it began and when the
    coordinator's timeout check will abort it (-1 when none is open)."""

    transactional_id: str
    state: str
    pending: str | None
    producer_id: int
    producer_epoch: int
    partitions: tuple[str, ...]
    timeout_ms: int
    start_ms: int
    #: the first abort check strictly after ``start_ms + timeout_ms`` (Kafka's ``abortTimedOutTransactions``)
    abort_at_ms: int


@attrs.frozen
class TransactionCoordinatorView:
    """The ``__transaction_state`` partitions a broker leads (and is reading), the time of its next
    timeout check and the check's interval, and every transactional id it coordinates."""

    partitions: tuple[int, ...]
    loading: tuple[int, ...]
    #: when the next ``abortTimedOutTransactions`` runs (-1 when not armed)
    next_check_ms: int
    check_interval_ms: int
    transactions: tuple[TransactionView, ...]


def abort_time(start_ms: int, timeout_ms: int, next_check_ms: int, interval_ms: int) -> int:
    """The first check at ``next_check_ms + k * interval_ms`` (k >= 0) at which a transaction begun at
    ``start_ms`` has timed out: ``start_ms + timeout_ms`` lies strictly before it. -1 without a check."""
    if next_check_ms < 0 or interval_ms <= 0:
        return -1
    due = start_ms + timeout_ms
    if due < next_check_ms:
        return next_check_ms
    return next_check_ms + ((due - next_check_ms) // interval_ms + 1) * interval_ms
