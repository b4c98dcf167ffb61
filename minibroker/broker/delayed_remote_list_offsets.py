"""DelayedRemoteListOffsets: a ListOffsets waiting for offset lookups in the remote tier (KIP-405).

Kafka's class: https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/DelayedRemoteListOffsets.scala
(docs/kafka-model.md, "7. Tiered storage"). On a topic with remote storage, a lookup by timestamp
searches the remote tier's segments first and then the local log (``RemoteLogManager.async_offset_read``);
the request waits in the ``RemoteListOffsets`` purgatory for ``remote.list.offsets.request.timeout.ms``
(30 s by default). Each partition with a lookup starts *pending* with its answer preset to
REQUEST_TIMED_OUT (what a timeout answers); the others are answered already. It completes when
every lookup has finished (cause "condition"): a lookup that failed answers its error
(UNKNOWN_SERVER_ERROR for a failing tier), one that found nothing answers offset -1, one that found
a record its offset, timestamp and the leader epoch of its batch.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.broker.remote_log_manager import RemoteOffsetResult
from minibroker.common.errors import Errors
from minibroker.common.messages import ListOffsetsResponse, PartitionListOffsetsResponse, TopicPartition
from minibroker.purgatory import DelayedOperation


class DelayedRemoteListOffsets(DelayedOperation):
    """Completes once every remote lookup has finished, or at its timeout."""

    __slots__ = ("responses", "pending", "respond")

    def __init__(
        self,
        delay_ms: int,
        responses: dict[TopicPartition, PartitionListOffsetsResponse],
        pending: set[TopicPartition],
        respond: Callable[[ListOffsetsResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(delay_ms, op_id)
        self.responses = dict(responses)
        for tp in pending:
            self.responses[tp] = PartitionListOffsetsResponse(Errors.REQUEST_TIMED_OUT)
        #: partitions whose lookup has not finished
        self.pending = set(pending)
        self.respond = respond

    def lookup_done(self, tp: TopicPartition, result: RemoteOffsetResult) -> None:
        """A lookup finished (the caller then checks the purgatory on ``tp``)."""
        if tp not in self.pending or self.is_completed:
            return
        self.pending.discard(tp)
        if result.error:
            self.responses[tp] = PartitionListOffsetsResponse(result.error)
        elif result.found is None:
            self.responses[tp] = PartitionListOffsetsResponse(Errors.NONE)
        else:
            timestamp, offset, epoch = result.found
            self.responses[tp] = PartitionListOffsetsResponse(Errors.NONE, timestamp, offset, epoch)

    def try_complete(self) -> bool:
        if self.pending:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        self.count_expired(sorted(self.pending, key=str))

    def on_complete(self) -> None:
        self.respond(ListOffsetsResponse(dict(self.responses), self.cause or "condition"))
