"""The DelayService's committed offsets, on the internal topic ``__delay_offsets``.

One record per commit: key ``<level topic>-<partition>``, value the next offset
to forward (decimal text). The last record of a key wins, so the topic is
compacted (``COMPACTED``: the log cleaner keeps the last record of each key once
its segments roll); a service that takes a level partition over reads the topic
from its start to its high watermark. Consumer groups' own offsets are
not used: the DelayService keeps its offsets here, replicated like any topic
and written with acks=-1, so they survive the crash of any broker the ISR can
spare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from minibroker.clients import Consumer
from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages.headers import build_batch, records

if TYPE_CHECKING:
    from minibroker.common.record_batch import RecordBatch

DELAY_OFFSETS_TOPIC = "__delay_offsets"
#: the topic's configs: compacted, as a Kafka topic of committed offsets is
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20)}
#: the configs of a delay topic whose committed records are deleted (``purge.py``): segments small
#: enough that the deleted ones go (a log drops only whole segments below its start offset)
PURGED = {"segment.bytes": str(1 << 20)}
DELAY_OFFSETS_PARTITION = TopicPartition(DELAY_OFFSETS_TOPIC, 0)


def commit_data(offsets: Mapping[TopicPartition, int], now_ms: int) -> ProduceData:
    """The records committing ``offsets``."""
    raw = build_batch((now_ms, str(tp).encode(), str(offset).encode(), []) for tp, offset in offsets.items())
    return ProduceData(len(offsets), len(raw), raw=raw)


class OffsetsReader:
    """Reads ``__delay_offsets`` to its high watermark with its own consumer (fetch.max.wait.ms 0)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.committed: dict[str, int] = {}
        consumer.on_batches = self._on_batches
        consumer.assign([DELAY_OFFSETS_PARTITION], 0)

    def _on_batches(self, tp: TopicPartition, batches: list[RecordBatch]) -> None:
        for batch in batches:
            if batch.raw is None:
                continue
            for record in records(batch.raw):
                if record.key is not None and record.value is not None:
                    self.committed[record.key.decode()] = int(record.value)

    async def read_once(self) -> bool:
        """One fetch; True when the reader has reached the high watermark."""
        label = str(DELAY_OFFSETS_PARTITION)
        (request,) = self.consumer.fetch()
        await request.wait()
        if request.errors.get(label) != Errors.NONE.name:
            return False
        return self.consumer.positions[DELAY_OFFSETS_PARTITION] >= request.high_watermarks[label]
