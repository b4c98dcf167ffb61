"""DelayedRemoteFetch: a consumer fetch waiting for a read from the remote tier (KIP-405).

Kafka's class: https://github.com/apache/kafka/blob/trunk/server/src/main/java/org/apache/kafka/server/purgatory/DelayedRemoteFetch.java
(docs/kafka-model.md, "7. Tiered storage"). A consumer fetching an offset between the log start offset
and the local log start offset cannot be served from local segments: the first such partition of the
request is read from the remote tier (``RemoteLogManager.async_read``) and the fetch waits in the
``RemoteFetch`` purgatory for ``remote.fetch.max.wait.ms`` (500 ms by default), whatever the request's
own ``max_wait_ms`` and ``min_bytes``. It completes:

- a: a partition of the request is no longer hosted here (cause "leadership");
- c: the remote read finished, with records or an error (cause "condition");
- at ``remote.fetch.max.wait.ms`` (cause "expiry"): the read still runs, its result is dropped.

``on_complete`` answers every partition from its first read; the remote partition gets the remote
records, the read's error (UNKNOWN_SERVER_ERROR for a failing tier, OFFSET_OUT_OF_RANGE for an
offset the tier lacks), or, when the read had not finished, no records. Followers never wait here.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.broker.partition import Partition
from minibroker.broker.remote_log_manager import RemoteLogReadResult
from minibroker.common.messages import FetchRequest, FetchResponse, PartitionFetchResponse, TopicPartition
from minibroker.purgatory import DelayedOperation


class DelayedRemoteFetch(DelayedOperation):
    """Completes when the remote read is done, when a partition leaves this broker, or at the max wait."""

    __slots__ = ("request", "remote_tp", "local_results", "result", "lookup", "respond")

    def __init__(
        self,
        delay_ms: int,
        request: FetchRequest,
        remote_tp: TopicPartition,
        local_results: dict[TopicPartition, PartitionFetchResponse],
        lookup: Callable[[TopicPartition], Partition | None],
        respond: Callable[[FetchResponse], object],
        op_id: str | None = None,
    ) -> None:
        super().__init__(delay_ms, op_id)
        if request.is_from_follower:
            raise ValueError("a follower never fetches from the remote tier")
        self.request = request
        self.remote_tp = remote_tp
        self.local_results = local_results
        #: the remote read's outcome, set once it finishes (``read_done``)
        self.result: RemoteLogReadResult | None = None
        self.lookup = lookup
        self.respond = respond

    def read_done(self, result: RemoteLogReadResult) -> None:
        """The remote read finished (the caller then checks the purgatory on the partition)."""
        self.result = result

    def try_complete(self) -> bool:
        for tp in self.request.partitions:
            if self.lookup(tp) is None:  # a/b: gone from this broker
                if self.cause is None:
                    self.cause = "leadership"
                return self.force_complete()
        if self.result is not None:  # c
            return self.force_complete()
        return False

    def on_expiration(self) -> None:
        self.count_expired((self.remote_tp,))

    def on_complete(self) -> None:
        results = dict(self.local_results)
        result = self.result
        local = results.get(self.remote_tp)
        if result is not None and local is not None and local.error == 0:
            if result.error:
                results[self.remote_tp] = PartitionFetchResponse(result.error)
            else:
                results[self.remote_tp] = attrs.evolve(local, batches=result.batches)
        self.respond(FetchResponse(results, self.cause or "condition"))
