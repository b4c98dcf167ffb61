"""RecordsPurger: deletes the records of an internal delay topic that are safely past (DeleteRecords).

A delay topic is a queue the services read once: a level's records are forwarded, ``__delay_wheel``'s
are written to the wheel's files, and the committed offset (``__delay_offsets``) says everything below
it is done. Kafka keeps a topic's records until retention removes them, whoever has read them; Kafka
Streams purges its repartition topics instead, with the admin client's ``deleteRecords`` up to the
committed offsets every ``repartition.purge.interval.ms``
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-204+%3A+Adding+records+deletion+operation+to+the+new+Admin+Client+API).
The delay services do the same: after an acknowledged commit, at most once per purge interval and one
request at a time, DeleteRecords moves each partition's log start offset up to its committed offset,
and the brokers drop the segments wholly below it. A record is never deleted before it is committed,
so nothing undelivered is lost; the topics have small segments (``offsets.PURGED``), so what a log
keeps is bounded by one purge interval's traffic and a segment, not by every record ever written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from minibroker.clients.admin import AdminClient

if TYPE_CHECKING:
    from minibroker.clients import ClientRequest
    from minibroker.common.messages import TopicPartition
    from minibroker.sim.cluster import Cluster


class RecordsPurger:
    """Sends DeleteRecords up to committed offsets, at most every ``interval_ms``, one request at a time."""

    def __init__(self, cluster: Cluster, client_id: str, interval_ms: int) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self.interval_ms = interval_ms
        #: each partition's offset last asked for
        self.purged: dict[TopicPartition, int] = {}
        self._next_ms = cluster.now() + interval_ms
        self._requests: list[ClientRequest] = []
        self._admin: AdminClient | None = None

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """``offsets`` are committed: delete the records below them if the interval has passed."""
        now = self.cluster.now()
        if now < self._next_ms or not all(r.completed for r in self._requests):
            return
        moved = {tp: offset for tp, offset in offsets.items() if offset > self.purged.get(tp, 0)}
        if not moved:
            return
        self._next_ms = now + self.interval_ms
        if self._admin is None:
            self._admin = AdminClient(self.cluster, self.client_id)
        self._requests = self._admin.delete_records(moved)
        self.purged.update(moved)
