"""DelayedFetch: a fetch waiting for ``min_bytes`` of new data, or ``max_wait_ms``.

Kafka's class: https://github.com/apache/kafka/blob/trunk/server/src/main/java/org/apache/kafka/server/purgatory/DelayedFetch.java
(docs/kafka-model.md, "3. DelayedProduce and DelayedFetch"); the letters below are its completion cases.
For each partition, with the offset the initial read stopped at (``fetch_offset``)
and the end offset its isolation allows (LEO for followers, HW for consumers):

- A/B: no longer hosted, or no longer leader -> complete (cause "leadership");
- C: unknown partition -> complete;
- E: the request's leader epoch is fenced -> complete;
- F: end < fetch offset (the log was truncated) -> complete; end > fetch offset
  on an *older segment* -> complete;
- same segment: add min(bytes between them, partition max bytes) to the total;
  a position known only by its message offset adds nothing;
- H: a follower fetch whose last fetched epoch now diverges -> complete;
- G: the total reached ``min_bytes`` -> complete.

``on_complete`` re-reads every partition from the log (without touching the
follower's fetch state) and answers; on timeout that read may well be empty.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.broker.log import LogOffsetMetadata
from minibroker.broker.partition import Partition, PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    LOG_END,
    FetchRequest,
    FetchResponse,
    PartitionFetchResponse,
    TopicPartition,
)
from minibroker.purgatory import DelayedOperation

Reader = Callable[[FetchRequest], dict[TopicPartition, PartitionFetchResponse]]


class DelayedFetch(DelayedOperation):
    """Completes once enough bytes are readable, on a partition error or epoch change, or at max wait."""

    __slots__ = ("request", "fetch_offsets", "lookup", "read", "respond", "isolation")

    #: its check reads the partitions' state only: watching it changes nothing the check sees
    recheck_after_watch = False

    def __init__(
        self,
        request: FetchRequest,
        fetch_offsets: dict[TopicPartition, LogOffsetMetadata],
        isolation: str,
        lookup: Callable[[TopicPartition], Partition | None],
        read: Reader,
        respond: Callable[[FetchResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(request.max_wait_ms, op_id)
        self.request = request
        self.fetch_offsets = fetch_offsets
        self.isolation = isolation
        self.lookup = lookup
        self.read = read
        self.respond = respond

    def try_complete(self) -> bool:
        accumulated = 0
        request = self.request
        wanted = request.partitions
        lookup = self.lookup
        isolation = self.isolation
        log_end = isolation == LOG_END
        follower = request.is_from_follower
        for tp, fetch_offset in self.fetch_offsets.items():
            fetch_partition = wanted[tp]
            partition = lookup(tp)
            if partition is None:  # A/B/C: gone from this broker
                return self._complete("leadership")
            requested_epoch = fetch_partition.current_leader_epoch
            if partition.leader_id != partition.broker_id or (
                requested_epoch >= 0 and requested_epoch != partition.leader_epoch
            ):
                try:
                    partition.require_leader()  # A/B
                    partition.check_leader_epoch(requested_epoch)  # E
                except PartitionError as error:
                    cause = "leadership" if error.error is Errors.NOT_LEADER_OR_FOLLOWER else "condition"
                    return self._complete(cause)
            log = partition.log
            # Partition.max_offset inlined for a follower's fetch: every watched partition passes here
            end_offset = log.log_end_offset if log_end else partition.max_offset(isolation)
            if end_offset != fetch_offset.message_offset:  # else nothing new: no position to look up
                end = log.offset_metadata(end_offset)
                if end.message_offset < fetch_offset.message_offset:
                    return self._complete("condition")  # F: truncated
                if fetch_offset.on_older_segment(end):
                    return self._complete("condition")  # F: older segment
                if fetch_offset.on_same_segment(end):
                    accumulated += min(end.position_diff(fetch_offset), fetch_partition.partition_max_bytes)
            last_fetched_epoch = fetch_partition.last_fetched_epoch
            if follower and last_fetched_epoch >= 0:  # H
                epochs = log.epochs
                if epochs and last_fetched_epoch == epochs[-1][0]:
                    # the latest epoch (``end_offset_for_epoch``'s first answer): it ends at the LEO
                    if log.log_end_offset < fetch_partition.fetch_offset:
                        return self._complete("condition")
                    continue
                epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
                if epoch < 0 or epoch < last_fetched_epoch or end_offset < fetch_partition.fetch_offset:
                    return self._complete("condition")
        if accumulated >= request.min_bytes:  # G
            return self._complete("condition")
        return False

    def _complete(self, cause: str) -> bool:
        if self.cause is None:
            self.cause = cause
        return self.force_complete()

    def on_expiration(self) -> None:
        self.count_expired(("follower" if self.request.is_from_follower else "consumer",))

    def on_complete(self) -> None:
        self.respond(FetchResponse(self.read(self.request), self.cause or "condition"))
