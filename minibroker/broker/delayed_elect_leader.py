"""DelayedElectLeader: an ElectLeaders waiting for the elected leaders to show in this broker's metadata.

Kafka's class: https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/server/DelayedElectLeader.scala
(docs/kafka-model.md, "DelayedElectLeader"), parked by ``ReplicaManager.electLeaders``.

The controller has decided every partition at once: a partition it elected a leader for waits
for that leader (``expected_leaders``), one it refused keeps its error (``results``). The
operation watches each waiting partition and ``try_complete`` asks the broker's metadata
(``leader_in_metadata``) whether the partition's leader is now the expected one; when no
partition is left waiting it completes. ``on_complete`` looks once more (a leader that arrived
as the timeout fired still counts) and answers REQUEST_TIMED_OUT for the partitions still
waiting, NONE for the others and the controller's error for the refused ones.

Its purgatory is ``ElectLeader`` (purge interval 1000, Kafka's default), on the broker's one
timer like Produce, Fetch and DeleteRecords; it is checked for a partition whenever the
broker's metadata for that partition changes.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.common.errors import Errors
from minibroker.common.messages import ElectLeadersResponse, PartitionElectLeaderResponse, TopicPartition
from minibroker.purgatory import DelayedOperation


class DelayedElectLeader(DelayedOperation):
    """Completes once every expected leader is in the broker's metadata, or on timeout."""

    __slots__ = ("waiting", "results", "leader_in_metadata", "respond", "expired_partitions")

    def __init__(
        self,
        delay_ms: int,
        expected_leaders: dict[TopicPartition, int],
        results: dict[TopicPartition, PartitionElectLeaderResponse],
        leader_in_metadata: Callable[[TopicPartition], int],
        respond: Callable[[ElectLeadersResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(delay_ms, op_id)
        #: partition -> the leader the controller elected, while the metadata does not show it
        self.waiting = dict(expected_leaders)
        #: the answer so far: the controller's refusals, then NONE for each leader seen
        self.results = dict(results)
        self.leader_in_metadata = leader_in_metadata
        self.respond = respond
        self.expired_partitions: list[TopicPartition] = []

    def _update_waiting(self) -> None:
        for tp, leader in list(self.waiting.items()):
            if self.leader_in_metadata(tp) == leader:
                del self.waiting[tp]
                self.results[tp] = PartitionElectLeaderResponse(Errors.NONE)

    def try_complete(self) -> bool:
        self._update_waiting()
        return not self.waiting and self.force_complete()

    def on_complete(self) -> None:
        self._update_waiting()
        answer = {tp: PartitionElectLeaderResponse(Errors.REQUEST_TIMED_OUT) for tp in self.waiting}
        answer.update(self.results)
        self.respond(ElectLeadersResponse(answer, self.cause or "condition"))

    def on_expiration(self) -> None:
        self.expired_partitions = list(self.waiting)
        self.count_expired(self.expired_partitions)
