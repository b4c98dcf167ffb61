"""Kafka clients' way into the file wheel: the internal topic ``__delay_wheel``.

A client produces a record to ``__delay_wheel`` with the header contract (``headers.py``):
``delay.real.topic`` and ``delay.due.ms`` (without it the record is due at its own timestamp,
that is at the next tick). The ingest task reads the topic from its committed offset, writes each
batch's messages to every live in-sync wheel copy and fetches again, while a commit task writes the
offset after the last batch written on ``__delay_offsets`` (key ``__delay_wheel-0``), one commit at a
time. The producer's acknowledgement is Kafka's (the
topic's replication); the wheel has the message once the ingest has read it, a fetch later. A
crash between the write and the commit writes the batch again on restart, into the same slots
(same ids, same due times), where firing de-duplicates it.

Default message ids (a record without ``delay.message.id``) are ``__delay_wheel-0@<offset>``; offsets
start at 0 again when the topic is created anew (a ``serve`` restart that did not keep it), while the
wheel's files still hold the earlier messages. So the wheel counts its *incarnations*: every time it
opens files it kept and the topic is new, the number goes up (persisted beside the wheel's files),
and ids read in incarnation ``n >= 1`` are ``__delay_wheel-0.<n>@<offset>``: a new message is never
dropped as a repeat of an old one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from minibroker.broker.config import ConsumerConfig, ProducerConfig
from minibroker.clients import Consumer, Producer
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.delayed_messages.headers import DelayedMessage, decode_delayed
from minibroker.delayed_messages.offsets import DELAY_OFFSETS_PARTITION, OffsetsReader, commit_data
from minibroker.delayed_messages.purge import RecordsPurger

if TYPE_CHECKING:
    from minibroker.common.record_batch import RecordBatch
    from minibroker.sim.cluster import Cluster

INGEST_TOPIC = "__delay_wheel"
INGEST_PARTITION = TopicPartition(INGEST_TOPIC, 0)


def ingest_label(incarnation: int) -> str:
    """What default message ids start with (``<label>@<offset>``) in the wheel's ``incarnation``."""
    return str(INGEST_PARTITION) if incarnation == 0 else f"{INGEST_PARTITION}.{incarnation}"


class WheelIngest:
    """Moves ``__delay_wheel``'s records into the wheel copies through ``write`` (it answers the copies
    written, none: not written); ``on_invalid(partition, reason)`` hears of records that break the
    header contract."""

    def __init__(
        self,
        cluster: Cluster,
        write: Callable[[list[DelayedMessage]], list[int]],
        on_invalid: Callable[[str, str], None],
        retry_backoff_ms: int,
        incarnation: int = 0,
        purge_interval_ms: int = 1_000,
    ) -> None:
        self.cluster = cluster
        self.write = write
        self.on_invalid = on_invalid
        self.retry_backoff_ms = retry_backoff_ms
        self.label = ingest_label(incarnation)
        self.consumer = Consumer(cluster, "delay-wheel-ingest", ConsumerConfig())
        self.producer = Producer(cluster, "delay-wheel-ingest-commit", ProducerConfig(acks=-1))
        self.offsets = Consumer(cluster, "delay-wheel-ingest-offsets", ConsumerConfig(fetch_max_wait_ms=0))
        self.pending: list[DelayedMessage] = []
        #: the offset after the last batch written to the copies (what the next commit says)
        self._written: int | None = None
        self._wake_committer = trio.Event()
        self.consumer.on_batches = self._on_batches
        self.purger = RecordsPurger(cluster, "delay-wheel-ingest-purge", purge_interval_ms)

    def _on_batches(self, tp: TopicPartition, batches: list[RecordBatch]) -> None:
        for batch in batches:
            if batch.raw is None:
                continue
            for _, found in decode_delayed(batch.raw, batch.base_offset, self.label, 0):
                if isinstance(found, str):
                    self.on_invalid(str(tp), found)
                else:
                    self.pending.append(found)

    async def _sleep(self) -> None:
        await trio.sleep(self.retry_backoff_ms / 1000)

    async def run(self) -> None:
        """Fetch, write to the copies, fetch again; the commits go in their own task meanwhile."""
        reader = OffsetsReader(self.offsets)
        while not await reader.read_once():
            await self._sleep()
        self.consumer.assign([INGEST_PARTITION], reader.committed.get(str(INGEST_PARTITION), 0))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._commit_loop, reader)
            while True:
                (request,) = self.consumer.fetch()
                await request.wait()
                if self.pending:
                    written = self.write(self.pending)
                    self.pending.clear()
                    if written:
                        self._written = self.consumer.positions[INGEST_PARTITION]
                        self._wake_committer.set()
                    else:  # no live in-sync copy: read the batch again later
                        self.consumer.seek(INGEST_PARTITION, reader.committed.get(str(INGEST_PARTITION), 0))
                        await self._sleep()
                elif request.error() != Errors.NONE.name:
                    await self._sleep()

    async def _commit_loop(self, reader: OffsetsReader) -> None:
        """Commit the offset after the last batch written, one commit at a time, retried until acknowledged:
        fetching goes on meanwhile, and a commit covers every batch written before it is sent."""
        while True:
            await self._wake_committer.wait()
            self._wake_committer = trio.Event()
            position = self._written
            if position is None or position == reader.committed.get(str(INGEST_PARTITION)):
                continue
            while True:
                data = commit_data({INGEST_PARTITION: position}, self.cluster.now())
                (request,) = self.producer.produce({DELAY_OFFSETS_PARTITION: data})
                await request.wait()
                if request.error() == Errors.NONE.name:
                    reader.committed[str(INGEST_PARTITION)] = position
                    self.purger.committed({INGEST_PARTITION: position})
                    break
                await self._sleep()
