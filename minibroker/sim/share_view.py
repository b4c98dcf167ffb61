"""Share partitions as front ends see them (KIP-932): each share partition's window on its leader, and
expiring its acquisition locks on demand.

``share_partitions`` reads the live brokers' ``SharePartitionManager``s (the control API's
``share_partitions`` read-out, the TUI's share-partition table); ``expire_locks`` runs the acquisition
locks of a group's share partitions now, as if each had reached its deadline (the control API's
``expire_share_locks``).
"""

from __future__ import annotations

from typing import Any

import attrs

from minibroker.broker.share.share_partition import RecordState, SharePartition
from minibroker.common.messages import TopicPartition


@attrs.frozen
class InFlightView:
    """One offset of a window: its state, delivery count, holder and lock deadline (while Acquired)."""

    offset: int
    state: str
    delivery_count: int
    member: str | None
    lock_deadline_ms: int | None


@attrs.frozen
class SharePartitionView:
    """A share partition on ``leader``: SPSO, SPEO, the records in flight and its running totals."""

    group: str
    topic: str
    partition: int
    leader: int
    spso: int
    speo: int
    records: tuple[InFlightView, ...]
    acquired_total: int
    lock_expiries: int
    archived: int

    @property
    def label(self) -> str:
        return f"{self.topic}-{self.partition}"

    def count(self, state: str) -> int:
        return sum(1 for record in self.records if record.state == state)


def _state_name(state: RecordState) -> str:
    return state.name.capitalize()


def view_of(sp: SharePartition, leader: int) -> SharePartitionView:
    records = tuple(
        InFlightView(
            offset,
            _state_name(record.state),
            record.delivery_count,
            record.member_id,
            record.lock.deadline_ms if record.lock is not None else None,
        )
        for offset, record in sorted(sp.records.items())
    )
    return SharePartitionView(
        sp.group_id,
        sp.tp.topic,
        sp.tp.partition,
        leader,
        sp.start_offset,
        sp.end_offset,
        records,
        sp.acquired_total,
        sp.lock_expiries,
        sp.archived_total,
    )


def _matching(cluster: Any, group: str | None, tp: TopicPartition | None) -> list[tuple[int, SharePartition]]:
    found = []
    for broker in cluster.brokers:
        manager = broker.share_partition_manager
        if manager is None:
            continue
        for (group_id, where), sp in manager.share_partitions.items():
            if (group is None or group_id == group) and (tp is None or where == tp) and sp.initialized:
                found.append((broker.broker_id, sp))
    return sorted(found, key=lambda item: (item[1].group_id, item[1].tp.topic, item[1].tp.partition))


def share_partitions(
    cluster: Any, group: str | None = None, tp: TopicPartition | None = None
) -> list[SharePartitionView]:
    """The share partitions on the live brokers (of ``group``, of ``tp``), by group, topic, partition."""
    return [view_of(sp, broker) for broker, sp in _matching(cluster, group, tp)]


def expire_locks(cluster: Any, group: str, tp: TopicPartition | None = None) -> int:
    """Run every acquisition lock of ``group``'s share partitions (on ``tp`` only, when given) now: their
    records are released (Available, or Archived at the delivery-count limit) as at the lock's deadline.
    Returns how many records were still Acquired under them."""
    released = 0
    for _, sp in _matching(cluster, group, tp):
        for lock in sorted(sp.locks, key=lambda lock: lock.offsets[0]):
            released += sum(
                1 for o in lock.offsets if (r := sp.records.get(o)) is not None and r.lock is lock
            )
            lock.cancel()
            sp.lock_expired(lock)
    return released
