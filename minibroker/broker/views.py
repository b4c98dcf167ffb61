"""What a broker reports of itself at one instant: its timer, purgatories, group and
transaction coordinators.

Plain, immutable values filled by ``Broker.snapshot`` (the group coordinator fills its
``CoordinatorView``); ``minibroker.sim.snapshot`` puts them together with the partitions into a
``ClusterView`` for the TUI, summaries and tests. The purgatory figures are Kafka's metrics of a
``DelayedOperationPurgatory`` (PurgatorySize, NumDelayedOperations) and of its expirations.
"""

from __future__ import annotations

import attrs

from minibroker.coordinator.group.views import CoordinatorView
from minibroker.coordinator.transaction.views import TransactionCoordinatorView
from minibroker.timer import TimerView


@attrs.frozen
class PurgatoryView:
    name: str
    watched: int  # PurgatorySize
    num_delayed: int  # NumDelayedOperations
    watched_keys: int
    completions: int
    expirations: int
    estimated_total: int
    purges: int
    purged: int
    last_purge: tuple[int, int] | None


@attrs.frozen
class BrokerView:
    broker: int
    alive: bool
    timer: TimerView | None
    purgatories: tuple[PurgatoryView, ...]
    fetchers_paused: bool
    coordinator: CoordinatorView | None = None
    #: the transaction coordinator, when the broker leads a ``__transaction_state`` partition
    transactions: TransactionCoordinatorView | None = None
