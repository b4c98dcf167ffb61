"""A consumer with non-blocking retries: hand-off before commit, a scheduler bringing records back.

Hand-off rule: the committed offset of a partition advances past a record only after the record was
processed or its hand-off produce (to a retry topic or the DLT) was acknowledged (acks=-1). A crash in
between redelivers the record (at-least-once), it is never lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

from minibroker.cluster.messages import ProduceData, TopicPartition
from minibroker.retry import headers as h
from minibroker.retry.policy import RetryPolicy, dlt_topic, retry_topic


class RetryingConsumer:
    """Consumes partition 0 of ``topic`` and its retry topics; ``handler(record)`` raising means failure.

    ``processed`` and ``dead`` list (key, deliveries) in completion order; ``committed`` is the offset
    of ``topic``'s partition up to which every record was processed or handed off.
    """

    def __init__(
        self,
        cluster: Any,
        topic: str,
        handler: Callable[[h.RetryRecord], object],
        policy: RetryPolicy,
        scheduler: Any,
        client_id: str = "retry",
    ) -> None:
        self.cluster, self.topic, self.handler, self.policy = cluster, topic, handler, policy
        self.scheduler = scheduler
        self.producer = cluster.producer(f"{client_id}-producer", acks=-1)
        self.consumer = cluster.consumer(f"{client_id}-consumer", fetch_max_wait_ms=50)
        self.source = TopicPartition(topic, 0)
        self.retry_tps = [TopicPartition(retry_topic(topic, n), 0) for n in range(1, policy.attempts)]
        self.consumer.assign([self.source, *self.retry_tps])
        self.committed = 0
        self.processed: list[tuple[bytes | None, int]] = []
        self.dead: list[tuple[bytes | None, int]] = []
        #: (key, delivery time, attempt) of every handler call
        self.deliveries: list[tuple[bytes | None, int, int]] = []
        self._wake = trio.Event()

    async def _produce(self, topic: str, batch: list[h.RetryRecord]) -> None:
        raw = h.encode(batch)
        (request,) = self.producer.produce(
            {TopicPartition(topic, 0): ProduceData(len(batch), len(raw), raw=raw)}
        )
        await request.wait()
        error = request.error()
        if error != "NONE":
            raise RuntimeError(f"retry hand-off to {topic} failed: {error}")

    async def _deliver(self, record: h.RetryRecord, offset: int) -> None:
        now = self.cluster.now()
        attempt = record.attempt + 1
        self.deliveries.append((record.key, now, attempt))
        try:
            self.handler(record)
        except Exception as error:  # the handler's failure is data here
            target = self.policy.next_topic(self.topic, attempt, error)
            fields = dict(record.headers)
            fields.setdefault(h.ORIGINAL_TOPIC, self.topic)
            fields.setdefault(h.ORIGINAL_PARTITION, 0)
            fields.setdefault(h.ORIGINAL_OFFSET, offset)
            fields.setdefault(h.ORIGINAL_TIMESTAMP, record.timestamp)
            fields[h.ATTEMPT] = attempt
            fields[h.ERROR] = f"{type(error).__name__}: {error}"
            dead = target == dlt_topic(self.topic)
            fields[h.DUE] = now if dead else now + self.policy.delay_after(attempt)
            await self._produce(target, [attrs.evolve(record, headers=fields)])
            if dead:
                self.dead.append((record.key, attempt))
        else:
            self.processed.append((record.key, attempt))

    async def _consume(self) -> None:
        while True:
            await self.consumer.poll()  # records arrive through on_batches
            await trio.sleep(0.001)

    def _on_batches(self, tp: TopicPartition, batches: list) -> None:
        self._inbox.append((tp, batches))
        self._wake.set()

    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Consume, hand off and schedule until cancelled."""
        self._inbox: list = []
        self.consumer.on_batches = self._on_batches
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._consume)
            nursery.start_soon(self._redeliver)
            task_status.started()
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                inbox, self._inbox = self._inbox, []
                for tp, batches in inbox:
                    for batch in batches:
                        for i, record in enumerate(h.decode(batch.raw)):
                            if tp == self.source:
                                await self._deliver(record, batch.base_offset + i)
                                self.committed = batch.base_offset + i + 1
                            else:
                                self.scheduler.schedule(record, int(record.headers[h.DUE]))

    async def _redeliver(self) -> None:
        """The scheduler's timed task: due records go back to ``topic`` (their attempt header kept)."""
        while True:
            due = self.scheduler.next_due()
            now = self.cluster.now()
            if due is not None and due <= now:
                batch = self.scheduler.claim_due(now)
                if batch:
                    await self._produce(self.topic, batch)
                    self.scheduler.done(batch)
                continue
            await trio.sleep(0.01 if due is None else min(max(due - now, 1), 10) / 1000)
