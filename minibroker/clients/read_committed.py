"""What a consumer hands its application from a fetched partition: Kafka's ``CompletedFetch`` filter.

Control batches (transaction markers) never reach the application, in either isolation level.
With READ_COMMITTED the fetch answer also lists the aborted transactions the batches overlap,
(producer id, first offset) each; walking the batches in offset order, a transaction whose first
offset is at or below a batch's last offset makes its producer aborted, that producer's
transactional batches are dropped, and its ABORT marker ends it (Kafka's
``CompletedFetch.nextFetchedRecord`` with its ``abortedProducerIds``). The broker only returns
batches below the last stable offset, so every transactional batch seen has its marker in the log.

``deliverable`` returns, per batch, the records the application gets (0: skipped), in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from minibroker.common.record_batch import ABORT_MARKER, RecordBatch


def deliverable(
    batches: Sequence[RecordBatch], aborted: Iterable[tuple[int, int]], read_committed: bool
) -> list[int]:
    """The records of each batch the application receives (control and aborted records removed)."""
    pending = sorted(aborted, key=lambda txn: txn[1]) if read_committed else []
    aborted_producers: set[int] = set()
    counts = []
    for batch in batches:
        if not batch.producers:
            counts.append(batch.count)
            continue
        while pending and pending[0][1] <= batch.last_offset:
            aborted_producers.add(pending.pop(0)[0])
        records = 0
        for producer in batch.producers:
            if producer.control >= 0:
                if producer.control == ABORT_MARKER:
                    aborted_producers.discard(producer.producer_id)
                continue
            if producer.transactional and producer.producer_id in aborted_producers:
                continue
            records += producer.last_delta - producer.first_delta + 1
        counts.append(records)
    return counts
