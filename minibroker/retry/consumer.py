"""A consumer with retries: hand-off before commit, a scheduler bringing records back; or blocking retries.

Hand-off rule: the committed offset of a partition advances past a record only after the record was
processed or its hand-off produce (to a retry topic or the DLT) was acknowledged (acks=-1). A crash in
between redelivers the record (at-least-once), it is never lost.

Non-blocking (the default): a failed record goes to ``<topic>-retry-<n>``, same partition number; the
scheduler reads it from there, holds it until ``retry.due.ms`` and produces it back to its original
partition of ``<topic>``. Later records of the partition go on meanwhile: retries reorder.

Blocking (``blocking=True``): a failed record is retried in place. The partition is paused (no fetch,
no later record) until the backoff elapsed; the record is then delivered again. Order is kept, the
partition stalls. No retry topic is used; the DLT is.

Each partition (source and retry topics) has its own assign()-based client polling it, so one slow
leader never holds back another partition's records (Kafka's consumer has one fetch per broker; the
emulator's figures are per partition). A hand-off produce answered with an error is sent again after
``retry_backoff_ms`` (Kafka's producer ``retry.backoff.ms``) until acknowledged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import trio

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.retry import headers as h
from minibroker.retry.policy import RetryPolicy, dlt_topic, retry_topic

#: Kafka's fetch.max.wait.ms default: an idle partition's long poll
FETCH_MAX_WAIT_MS = 500


def origin_of(record: h.RetryRecord) -> str:
    """``<topic>-<partition>@<offset>`` where the record was first consumed (its identity in traces)."""
    fields = record.headers
    return f"{fields[h.ORIGINAL_TOPIC]}-{fields[h.ORIGINAL_PARTITION]}@{fields[h.ORIGINAL_OFFSET]}"


class RetryingConsumer:
    """Consumes every partition of ``topic`` (and, non-blocking, its retry topics).

    ``handler(record)`` raising means failure; it sees ``retry.original.*`` on every delivery and
    ``retry.attempt`` (failed deliveries so far) from the second one. ``processed`` and ``dead`` list
    (key, deliveries) in completion order; ``committed`` maps each partition of ``topic`` to the offset
    up to which every record was processed or handed off.
    """

    def __init__(
        self,
        cluster: Any,
        topic: str,
        handler: Callable[[h.RetryRecord], object],
        policy: RetryPolicy,
        scheduler: Any,
        client_id: str = "retry",
        *,
        blocking: bool = False,
        retry_backoff_ms: int = 100,
        keep_deliveries: bool = True,
    ) -> None:
        self.cluster, self.topic, self.handler, self.policy = cluster, topic, handler, policy
        self.scheduler, self.client_id, self.blocking = scheduler, client_id, blocking
        if hasattr(scheduler, "on_lost"):  # redis: a server that came back empty is traced
            scheduler.on_lost = lambda held: self._emit("retry.scheduler.lost", held=held)
        self.retry_backoff_ms = retry_backoff_ms
        self.partitions = cluster.topics[topic].partitions
        self.producer = cluster.producer(f"{client_id}-producer", acks=-1)
        self.sources = [TopicPartition(topic, p) for p in range(self.partitions)]
        attempts = range(1, 1 if blocking else policy.attempts)
        self.retry_tps = [
            TopicPartition(retry_topic(topic, n), p) for n in attempts for p in range(self.partitions)
        ]
        self.committed = {p: 0 for p in range(self.partitions)}
        self.processed: list[tuple[bytes | None, int]] = []
        self.dead: list[tuple[bytes | None, int]] = []
        #: (key, delivery time, attempt) of every handler call (when ``keep_deliveries``)
        self.deliveries: list[tuple[bytes | None, int, int]] = []
        self.delivery_count = 0
        self.keep_deliveries = keep_deliveries
        #: source partitions paused by a blocking retry, with the time they resume
        self.paused: dict[int, int] = {}
        self._scheduled = trio.Event()

    # --- tracing and producing ------------------------------------------------------------------
    def _emit(self, kind: str, **fields: Any) -> None:
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(kind, client=self.client_id, **fields)

    def _emit_record(
        self, kind: str, record: h.RetryRecord, topic: str, partition: int, /, **fields: Any
    ) -> None:
        """An event about ``record`` (its ``origin``) at ``partition`` of ``topic``."""
        self._emit(kind, origin=origin_of(record), partition=f"{topic}-{partition}", **fields)

    async def _produce(self, tp: TopicPartition, batch: list[h.RetryRecord]) -> None:
        """Produce ``batch`` to ``tp`` (acks=-1) and wait; an error is retried after the backoff."""
        raw = h.encode(batch)
        while True:
            (request,) = self.producer.produce({tp: ProduceData(len(batch), len(raw), raw=raw)})
            await request.wait()
            error = request.error()
            if error == "NONE":
                return
            self._emit("retry.produce.failed", topic=tp.topic, partition=str(tp), error=error)
            await self._sleep(self.retry_backoff_ms)

    async def _sleep(self, ms: int) -> None:
        await self.cluster.clock.sleep_until(self.cluster.now() + ms)

    # --- delivering ---------------------------------------------------------------------------------
    def _call(self, record: h.RetryRecord, partition: int, offset: int) -> BaseException | None:
        """One delivery: the handler's exception, or None."""
        now = self.cluster.now()
        attempt = record.attempt + 1
        self.delivery_count += 1
        if self.keep_deliveries:
            self.deliveries.append((record.key, now, attempt))
        self._emit_record("retry.deliver", record, self.topic, partition, offset=offset, attempt=attempt)
        try:
            self.handler(record)
        except Exception as error:  # the handler's failure is data here
            return error
        self.processed.append((record.key, attempt))
        self._emit("retry.processed", origin=origin_of(record), attempts=attempt)
        return None

    def _failed(self, record: h.RetryRecord, error: BaseException, due: int) -> h.RetryRecord:
        fields = dict(record.headers)
        fields[h.ATTEMPT] = record.attempt + 1
        fields[h.ERROR] = f"{type(error).__name__}: {error}"
        fields[h.DUE] = due
        return attrs.evolve(record, headers=fields)

    async def _dead_letter(self, record: h.RetryRecord, error: BaseException, partition: int) -> None:
        failed = self._failed(record, error, self.cluster.now())
        await self._produce(TopicPartition(dlt_topic(self.topic), partition), [failed])
        self.dead.append((record.key, failed.attempt))
        name = type(error).__name__
        self._emit_record(
            "retry.dead", record, dlt_topic(self.topic), partition, attempts=failed.attempt, error=name
        )

    async def _deliver(self, record: h.RetryRecord, partition: int, offset: int) -> None:
        """Deliver until processed, handed off (non-blocking) or dead-lettered."""
        fields = dict(record.headers)
        fields.setdefault(h.ORIGINAL_TOPIC, self.topic)
        fields.setdefault(h.ORIGINAL_PARTITION, partition)
        fields.setdefault(h.ORIGINAL_OFFSET, offset)
        fields.setdefault(h.ORIGINAL_TIMESTAMP, record.timestamp)
        record = attrs.evolve(record, headers=fields)
        while (error := self._call(record, partition, offset)) is not None:
            attempt = record.attempt + 1
            target = self.policy.next_topic(self.topic, attempt, error)
            if target == dlt_topic(self.topic):
                await self._dead_letter(record, error, partition)
                return
            due = self.cluster.now() + self.policy.delay_after(attempt)
            record = self._failed(record, error, due)
            if not self.blocking:
                await self._produce(TopicPartition(target, partition), [record])
                name = type(error).__name__
                fields = {"attempt": attempt, "topic": target, "due_ms": due, "error": name}
                self._emit_record("retry.handoff", record, target, partition, **fields)
                return
            self.paused[partition] = due
            self._emit_record("retry.pause", record, self.topic, partition, attempt=attempt, due_ms=due)
            await self.cluster.clock.sleep_until(due)
            del self.paused[partition]
            self._emit_record("retry.resume", record, self.topic, partition)

    # --- the tasks ----------------------------------------------------------------------------------
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Consume, hand off and schedule until cancelled."""
        async with trio.open_nursery() as nursery:
            for tp in self.sources:
                nursery.start_soon(self._poll, tp, self._source_batch)
            for tp in self.retry_tps:
                nursery.start_soon(self._poll, tp, self._retry_batch)
            if not self.blocking:
                nursery.start_soon(self._redeliver)
            task_status.started()

    async def _poll(self, tp: TopicPartition, handle: Callable[[TopicPartition, Any], Any]) -> None:
        """Kafka's poll loop for one partition: fetch, handle every new batch, fetch again."""
        consumer = self.cluster.consumer(f"{self.client_id}-{tp}", fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
        consumer.assign([tp])
        inbox: list = []
        consumer.on_batches = lambda _tp, batches: inbox.extend(batches)
        while True:
            requests = await consumer.poll()
            if any(r.error(tp) != "NONE" for r in requests):
                await self._sleep(self.retry_backoff_ms)  # no leader yet / it crashed
            elif not inbox and all(r.latency_ms == 0 for r in requests):
                await self._sleep(1)  # an empty instant answer: don't spin
            batches, inbox[:] = list(inbox), []
            for batch in batches:
                await handle(tp, batch)

    @staticmethod
    def _records(batch: Any) -> list[h.RetryRecord]:
        """The batch's records; a batch without bytes (a scenario's produce) has empty records."""
        if batch.raw is not None:
            return h.decode(batch.raw)
        return [h.RetryRecord(None, None, batch.append_time_ms) for _ in range(batch.count)]

    async def _source_batch(self, tp: TopicPartition, batch: Any) -> None:
        for i, record in enumerate(self._records(batch)):
            await self._deliver(record, tp.partition, batch.base_offset + i)
            self.committed[tp.partition] = batch.base_offset + i + 1

    async def _retry_batch(self, tp: TopicPartition, batch: Any) -> None:
        for record in self._records(batch):
            due = int(record.headers[h.DUE])
            self.scheduler.schedule(record, due)
            self._emit(
                "retry.schedule", origin=origin_of(record), attempt=record.attempt, topic=tp.topic, due_ms=due
            )
        self._scheduled.set()

    async def _redeliver(self) -> None:
        """The scheduler's timed task: due records go back to their partition of ``topic``."""
        while True:
            due = self.scheduler.next_due()
            now = self.cluster.now()
            if due is not None and due <= now:
                claimed = self.scheduler.claim_due(now)
                by_partition: dict[int, list[h.RetryRecord]] = {}
                for record in claimed:
                    by_partition.setdefault(int(record.headers[h.ORIGINAL_PARTITION]), []).append(record)
                for partition, records in sorted(by_partition.items()):
                    await self._produce(TopicPartition(self.topic, partition), records)
                    done = self.cluster.now()
                    for record in records:
                        self._emit(
                            "retry.redeliver",
                            origin=origin_of(record),
                            attempt=record.attempt,
                            due_ms=record.headers[h.DUE],
                            lateness_ms=done - int(record.headers[h.DUE]),
                        )
                self.scheduler.done(claimed)
                continue
            self._scheduled = trio.Event()
            # another scheduler (redis) may change the set: look again at least every 100 ms
            wait = 100 if due is None else min(due - now, 100)
            with trio.move_on_at(self.cluster.clock.to_seconds(now + wait)):
                await self._scheduled.wait()

    def pending(self) -> int:
        """Records the scheduler holds (scheduled, not yet produced back)."""
        return self.scheduler.pending()
