"""Plain, immutable views of a cluster at one instant, for the TUI, summaries and tests.

``Cluster.snapshot`` assembles a ``ClusterView``: each broker's ``BrokerView`` (``broker.views``,
which the brokers fill) and each partition's ``PartitionView`` with its replicas' offsets.
"""

from __future__ import annotations

import attrs

from minibroker.broker.views import BrokerView, PurgatoryView
from minibroker.coordinator.group.views import (
    ConsumerGroupView,
    ConsumerMemberView,
    CoordinatorView,
    GroupView,
    MemberView,
)


@attrs.frozen
class ReplicaView:
    broker: int
    log_end_offset: int
    high_watermark: int
    log_start_offset: int
    alive: bool
    fetcher_paused: bool
    #: below the log start offset when tiered storage deleted local segments (``Log``)
    local_log_start_offset: int = -1
    #: the last stable offset (Kafka's ``lastStableOffset``): min(first offset of the earliest open
    #: transaction, HW); READ_COMMITTED reads stop there
    last_stable_offset: int = -1


@attrs.frozen
class PartitionView:
    partition: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    pending_isr: tuple[int, ...] | None
    replicas: tuple[ReplicaView, ...]
    #: an ongoing reassignment's adding and removing replicas (empty when none is under way)
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def replica(self, broker: int) -> ReplicaView:
        for view in self.replicas:
            if view.broker == broker:
                return view
        raise KeyError(broker)


@attrs.frozen
class ClusterView:
    time_ms: int
    brokers: tuple[BrokerView, ...]
    partitions: tuple[PartitionView, ...]

    def partition(self, label: str) -> PartitionView:
        for view in self.partitions:
            if view.partition == label:
                return view
        raise KeyError(label)

    def broker(self, broker_id: int) -> BrokerView:
        return self.brokers[broker_id]


__all__ = [
    "BrokerView",
    "ClusterView",
    "ConsumerGroupView",
    "ConsumerMemberView",
    "CoordinatorView",
    "GroupView",
    "MemberView",
    "PartitionView",
    "PurgatoryView",
    "ReplicaView",
]
