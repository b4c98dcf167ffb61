"""DelayService: one per broker, beside it, forwarding due messages of the levels it leads.

Three parts (a fetcher, a held queue, a sender), here two trio tasks sharing plain state:

- the fetcher: every ``delay.service.poll.ms`` it looks up which level partitions
  its broker leads (the controller's view, what a client's metadata says), reads
  the committed offset of each partition it gains from ``__delay_offsets``, and
  long-polls them (fetch max wait = the poll) with its own Consumer;
- the held queue: each partition's held messages in offset order (a level's
  messages are due in the order written, ``levels.py``); across partitions a heap
  of their heads, rebuilt each round (there are few partitions), says which is due
  first. A heap, not the broker's timer (whose "delay queue" of buckets is
  Kafka's): the service is a client of the cluster and does not reach into a broker;
- the sender: sleeps until the earliest head is due (or new messages arrive),
  forwards at most ``delay.service.max.in.flight`` due messages to their real
  partitions with acks=-1, then commits, per partition, the offset of the first
  message not yet forwarded, and starts no new round until that commit is
  acknowledged.

Back-pressure: a partition whose held count reaches
``delay.service.max.held.per.partition`` is paused (its fetches stop) and resumed
once the sender brings it below. A fetch answer can overshoot the threshold by
what it carries.

Failure: a crash loses the held messages and nothing else; whoever leads the
partition next (the restarted broker's service, or another broker's) starts
from the committed offset. Messages forwarded after the last acknowledged
commit are forwarded again: at most one round (``max.in.flight``) when no
forward failed. A message whose forward failed is retried (after
``retry.backoff.ms``) alone, ahead of the rest of its partition, so the
messages of its round that went through behind it are the only other ones
that can be forwarded twice. A message whose real topic or partition does not
exist is not retried in place: it is parked in a level (``forward.py``), so its
partition goes on.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs
import trio

from minibroker.broker.config import ConsumerConfig, ProducerConfig
from minibroker.clients import Consumer, Producer
from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages import forward as forwarding
from minibroker.delayed_messages.config import DelayConfig
from minibroker.delayed_messages.forward import UNKNOWN_PARTITION, forward, settle, undeliverable
from minibroker.delayed_messages.headers import DelayedMessage, decode_delayed, encode_delayed
from minibroker.delayed_messages.offsets import DELAY_OFFSETS_PARTITION, OffsetsReader, commit_data
from minibroker.delayed_messages.purge import RecordsPurger

if TYPE_CHECKING:
    from minibroker.common.record_batch import RecordBatch
    from minibroker.delayed_messages.stats import DelayStats
    from minibroker.sim.cluster import Cluster


@attrs.define(slots=True, eq=False)
class _Entry:
    offset: int
    #: None for a record that breaks the header contract (skipped, never forwarded)
    message: DelayedMessage | None
    forwarded: bool = False
    #: its last forward failed (while it is the first unforwarded, its partition sends only it)
    failed: bool = False
    #: in a round sent and not yet answered
    sending: bool = False


@attrs.define(eq=False)
class HeldPartition:
    """A level partition this service leads: its held messages and commit state."""

    tp: TopicPartition
    level_ms: int
    order: int
    committed: int
    queue: deque[_Entry] = attrs.Factory(deque)
    paused: bool = False

    @property
    def held(self) -> int:
        return len(self.queue)


class DelayService:
    """The DelayService of broker ``broker_id`` for one life of that broker."""

    def __init__(
        self, cluster: Cluster, broker_id: int, config: DelayConfig, stats: DelayStats, epoch_origin_ms: int
    ) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.config = config
        self.stats = stats
        self.epoch_origin_ms = epoch_origin_ms
        self.tracer = cluster.tracer
        prefix = f"delay-service-{broker_id}"
        self.client_ids = (f"{prefix}-fetcher", f"{prefix}-sender", f"{prefix}-offsets", f"{prefix}-purge")
        self.consumer = Consumer(
            cluster, self.client_ids[0], ConsumerConfig(fetch_max_wait_ms=config.poll_ms)
        )
        self.consumer.on_batches = self._on_batches
        self.producer = Producer(cluster, self.client_ids[1], ProducerConfig(acks=-1))
        self.offsets_consumer = Consumer(cluster, self.client_ids[2], ConsumerConfig(fetch_max_wait_ms=0))
        self.partitions: dict[TopicPartition, HeldPartition] = {}
        self.purger = RecordsPurger(cluster, self.client_ids[3], config.purge_interval_ms)
        self._levels = {
            TopicPartition(config.levels.topic(level), p): level
            for level in config.levels.delays_ms
            for p in range(config.topic_partitions)
        }
        self._wake_sender = trio.Event()
        self._wake_fetcher = trio.Event()
        self._wake_committer = trio.Event()
        #: rounds sent, rounds answered, and rounds covered by an acknowledged commit (all in order)
        self._rounds_sent = 0
        self._rounds_done = 0
        self._rounds_committed = 0

    def _emit(self, kind: str, **fields: object) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._fetch_loop)
            nursery.start_soon(self._send_loop)
            nursery.start_soon(self._commit_loop)
            task_status.started()

    # --- fetcher -------------------------------------------------------------------------------
    async def _refresh(self) -> None:
        """Take up the level partitions the broker now leads, let go of the others."""
        led = [tp for tp in self._levels if self.cluster.leader_of(tp) == self.broker_id]
        lost = [tp for tp in self.partitions if tp not in led]
        if lost:
            self.consumer.unassign(lost)
            for tp in lost:
                dropped = self.partitions.pop(tp).held
                self._emit("delay.release", partition=str(tp), dropped=dropped)
        gained = [tp for tp in led if tp not in self.partitions]
        if not gained:
            return
        reader = OffsetsReader(self.offsets_consumer)
        while not await reader.read_once():
            await trio.sleep(self.config.retry_backoff_ms / 1000)
        self.offsets_consumer.unassign([DELAY_OFFSETS_PARTITION])
        for tp in gained:
            if self.cluster.leader_of(tp) != self.broker_id:
                continue
            offset = reader.committed.get(str(tp), 0)
            self.partitions[tp] = HeldPartition(tp, self._levels[tp], len(self.partitions), offset)
            self.consumer.assign([tp], offset)
            self._emit("delay.assign", partition=str(tp), offset=offset)

    async def _fetch_loop(self) -> None:
        poll_s = self.config.poll_ms / 1000
        while True:
            await self._refresh()
            if not any(not held.paused for held in self.partitions.values()):
                with trio.move_on_after(poll_s):
                    await self._wake_fetcher.wait()
                self._wake_fetcher = trio.Event()
                continue
            requests = self.consumer.fetch()
            for request in requests:
                await request.wait()
            if any(error != Errors.NONE.name for r in requests for error in r.errors.values()):
                await trio.sleep(self.config.retry_backoff_ms / 1000)

    def _on_batches(self, tp: TopicPartition, batches: list[RecordBatch]) -> None:
        held = self.partitions.get(tp)
        if held is None:
            return
        for batch in batches:
            for offset, found in self._decode(batch, held):
                if isinstance(found, str):
                    self.stats.invalid += 1
                    self._emit("delay.invalid", partition=str(tp), reason=found)
                    held.queue.append(_Entry(offset, None, True))
                    continue
                held.queue.append(_Entry(offset, found))
                self.stats.held_total += 1
                if self.tracer.enabled:
                    self._emit(
                        "delay.held",
                        partition=str(tp),
                        offset=offset,
                        id=found.message_id,
                        due_ms=found.due_ms - self.epoch_origin_ms,
                    )
        self._pop_forwarded(held)
        if held.held >= self.config.max_held_per_partition and not held.paused:
            held.paused = True
            self.consumer.pause([tp])
            self.stats.pauses += 1
            self._emit("delay.pause", partition=str(tp), held=held.held)
        self._wake_sender.set()

    def _decode(self, batch: RecordBatch, held: HeldPartition) -> Iterator[tuple[int, DelayedMessage | str]]:
        if batch.raw is None:
            for i in range(batch.count):
                offset = batch.base_offset + i
                yield offset, f"offset {offset}: a record without headers"
            return
        yield from decode_delayed(batch.raw, batch.base_offset, str(held.tp), held.level_ms)

    # --- sender --------------------------------------------------------------------------------
    def _heads(self) -> list[tuple[int, int, int, HeldPartition]]:
        """(due, order, index, partition) of each partition's first unforwarded message."""
        heads = []
        for held in self.partitions.values():
            index = _next_unforwarded(held.queue, 0)
            if index is not None:
                heads.append((held.queue[index].message.due_ms, held.order, index, held))
        return heads

    def _take_due(self, now: int) -> list[tuple[HeldPartition, _Entry]]:
        """Up to max.in.flight due messages, earliest first, each partition in offset order."""
        heap = self._heads()
        heapq.heapify(heap)
        out: list[tuple[HeldPartition, _Entry]] = []
        while heap and len(out) < self.config.max_in_flight:
            due, order, index, held = heapq.heappop(heap)
            if due > now:
                break
            entry = held.queue[index]
            out.append((held, entry))
            if entry.failed:
                continue  # retrying: only this one until it goes through
            following = _next_unforwarded(held.queue, index + 1)
            if following is not None:
                heapq.heappush(heap, (held.queue[following].message.due_ms, order, following, held))
        return out

    async def _send_loop(self) -> None:
        """Send rounds while fewer than ``forward.rounds`` are uncommitted; take their answers in order."""
        clock = self.cluster.clock
        window: deque[tuple[list[tuple[HeldPartition, _Entry]], forwarding.PendingForward]] = deque()
        while True:
            now = self.cluster.now() + self.epoch_origin_ms
            room = self._rounds_sent - self._rounds_committed < self.config.forward_rounds
            due = self._take_due(now) if room else []
            if due:
                for _, entry in due:
                    entry.sending = True
                messages = [entry.message for _, entry in due]
                sent = forwarding.send_forward(self.producer, messages, self.epoch_origin_ms, self._emit)
                window.append((due, sent))
                self._rounds_sent += 1
                continue
            if window:
                due, sent = window.popleft()
                failed = await self._forward(due, sent)
                for held in {id(h): h for h, _ in due}.values():
                    self._pop_forwarded(held)
                self._rounds_done += 1
                self._wake_committer.set()
                if failed:
                    await trio.sleep(self.config.retry_backoff_ms / 1000)
                continue
            heads = self._heads()
            wake = min(heads)[0] - self.epoch_origin_ms if heads and room else None
            with trio.move_on_at(clock.to_seconds(wake) if wake is not None else math.inf):
                await self._wake_sender.wait()
            self._wake_sender = trio.Event()

    async def _commit_loop(self) -> None:
        """Commit after answered rounds, one commit at a time, each covering every round answered so far."""
        while True:
            await self._wake_committer.wait()
            self._wake_committer = trio.Event()
            done = self._rounds_done
            await self._commit()
            self._rounds_committed = done
            self._wake_sender.set()

    async def _forward(
        self, due: list[tuple[HeldPartition, _Entry]], sent: forwarding.PendingForward
    ) -> bool:
        """Settle the round ``due``, sent as ``sent``; True if any forward failed."""
        outcomes = await forwarding.forward_outcomes(sent)
        for _, entry in due:
            entry.sending = False
        done = self.cluster.now()
        failed = False
        lost = []
        for (held, entry), (partition, error) in zip(due, outcomes, strict=True):
            if undeliverable((partition, error)):  # no such topic or partition: parked, not in the way
                lost.append((held, entry))
                continue
            if error != Errors.NONE.name:
                self._failed(held, entry, error)
                failed = True
                continue
            entry.forwarded = True
            message = entry.message
            due_ms = message.due_ms - self.epoch_origin_ms
            self.stats.delivered(message.message_id, partition, held.level_ms, due_ms, done)
            self._emit(
                "delay.delivered",
                design="levels",
                id=message.message_id,
                partition=partition,
                level_ms=held.level_ms,
                due_ms=due_ms,
                lateness_ms=done - due_ms,
            )
        for held, entry in lost:
            if not await self._park(held, entry):
                failed = True
        return failed

    async def _park(self, held: HeldPartition, entry: _Entry) -> bool:
        """Write an undeliverable message to a level again, due after the backoff, or past its last
        attempt send it to the dead-letter topic or drop it; True once it is out of its partition's way
        (marked forwarded), False if the produce failed (retried like a failed forward)."""
        c = self.config
        assert entry.message is not None
        message = entry.message
        limits = (c.undeliverable_attempts, c.undeliverable_backoff_ms, c.dead_letter_topic)
        now = self.cluster.now() + self.epoch_origin_ms
        verdict, out = settle(
            message, self.cluster, limits, now, self.epoch_origin_ms, self.stats, self._emit
        )
        if verdict == "park":
            level = c.levels.level_for(min(c.undeliverable_backoff_ms, c.levels.delays_ms[-1]))
            tp = TopicPartition(c.levels.topic(level), held.tp.partition % c.topic_partitions)
            raw = encode_delayed([out])
            (request,) = self.producer.produce({tp: ProduceData(1, len(raw), raw=raw)})
            await request.wait()
            if request.error() != Errors.NONE.name:
                self.stats.parked -= 1  # counted again when the produce goes through
                self._failed(held, entry, request.error())
                return False
        elif verdict == "dead":
            ((partition, error),) = await forward(self.producer, [out], self.epoch_origin_ms, self._emit)
            if error != Errors.NONE.name:
                self._failed(held, entry, error)
                return False
            self.stats.dead_lettered += 1
            self._emit("delay.dead", id=message.message_id, partition=partition, error=UNKNOWN_PARTITION)
        entry.forwarded = True
        entry.failed = False
        return True

    def _failed(self, held: HeldPartition, entry: _Entry, error: str) -> None:
        entry.failed = True
        self.stats.forward_failures += 1
        self._emit("delay.forward.failed", id=entry.message.message_id, error=error)

    def _pop_forwarded(self, held: HeldPartition) -> None:
        queue = held.queue
        while queue and queue[0].forwarded:
            queue.popleft()
        if held.paused and held.held < self.config.max_held_per_partition:
            held.paused = False
            self.consumer.resume([held.tp])
            self.stats.resumes += 1
            self._emit("delay.resume", partition=str(held.tp), held=held.held)
            self._wake_fetcher.set()

    def _commit_offsets(self) -> dict[TopicPartition, int]:
        """Per partition whose commit moved: the offset of its first message not yet forwarded."""
        out = {}
        for tp, held in self.partitions.items():
            offset = held.queue[0].offset if held.queue else self.consumer.positions.get(tp, held.committed)
            if offset != held.committed:
                out[tp] = offset
        return out

    async def _commit(self) -> None:
        """Commit every moved offset with acks=-1; retry until acknowledged."""
        while offsets := self._commit_offsets():
            (request,) = self.producer.produce(
                {DELAY_OFFSETS_PARTITION: commit_data(offsets, self.cluster.now())}
            )
            await request.wait()
            if request.error() == Errors.NONE.name:
                for tp, offset in offsets.items():
                    if tp in self.partitions:
                        self.partitions[tp].committed = offset
                    self._emit("delay.commit", partition=str(tp), offset=offset)
                self.purger.committed({tp: held.committed for tp, held in self.partitions.items()})
                return
            await trio.sleep(self.config.retry_backoff_ms / 1000)


def _next_unforwarded(queue: deque[_Entry], start: int) -> int | None:
    """The index of the first message from ``start`` neither forwarded nor in a round in flight."""
    for i in range(start, len(queue)):
        entry = queue[i]
        if not entry.forwarded and not entry.sending:
            return i
    return None
