"""The file wheel on a cluster: a copy per broker, one active forwarder, hot standbys.

``WheelGroup(cluster, data_dir, config).start(nursery)`` keeps a ``FileWheel`` under
``<data_dir>/broker-<id>/wheel`` for ``delay.wheel.replicas`` brokers (default
min(3, brokers)). A delayed send (``Producer.send(..., delay_ms=..., delay_via="wheel")``)
is written to every live in-sync copy and acknowledged when all of them have it
(acks=-1's rule); the write is in-process and synchronous here, so the
acknowledgement is immediate (no network latency is modelled for it).

In-sync copies: a copy leaves the set when its broker crashes (the last one
stays, as Kafka keeps the last ISR member). A restarted broker's copy is
replaced by a copy of the active one's files, and is in sync again.

The active forwarder is the lowest-id live in-sync copy; the others are hot
standbys: each tick fires on every in-sync copy in lockstep (each renames the
slot and streams its own file, rolling its own long delays), the active one
forwards a batch at a time, and once a batch is acknowledged every copy passes
the batch's messages in its own file and checkpoints. When the active broker
crashes, the next copy takes over from its own files: it re-fires the tick from
its checkpoint, and so forwards again only the batch that was in flight
(``delay.wheel.forward.batch`` messages at most).

Undeliverable messages: a due message whose real topic or partition does not exist (a typo, a topic
not created yet, a partition out of range) never holds up the others. It is *parked*: written to the
wheel again, due ``delay.wheel.undeliverable.backoff.ms`` later, with its failed attempts counted in
its header ``delay.forward.attempts``; after ``delay.wheel.undeliverable.attempts`` attempts it goes to
``delay.wheel.dead.letter.topic`` (with ``delay.real.topic`` and ``delay.error``), or, with none set
or when that topic does not exist either, is dropped: counted (``DelayStats.dropped``) and traced
(``delay.dropped``). Other forward errors (no leader, not enough replicas) are passing: the message is
retried alone after ``delay.wheel.retry.backoff.ms``.
"""

from __future__ import annotations

import os
import shutil
from collections import deque
from typing import TYPE_CHECKING

import attrs
import trio

from minibroker.broker.config import ConfigError, ProducerConfig, _int_field, _KafkaNamed, _text_field
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.delayed_messages.file_wheel import FileWheel, WheelView
from minibroker.delayed_messages.forward import (
    UNKNOWN_PARTITION,
    PendingForward,
    forward,
    forward_outcomes,
    send_forward,
    settle,
    undeliverable,
)
from minibroker.delayed_messages.headers import DelayedMessage
from minibroker.delayed_messages.levels import DelayError
from minibroker.delayed_messages.offsets import COMPACTED, DELAY_OFFSETS_TOPIC, PURGED
from minibroker.delayed_messages.router import check_real, new_messages, shared_numbers
from minibroker.delayed_messages.stats import DelayStats
from minibroker.delayed_messages.wheel_format import Damage, encode_message
from minibroker.delayed_messages.wheel_ingest import INGEST_TOPIC, WheelIngest, ingest_label
from minibroker.sim.cluster import TopicSpec

if TYPE_CHECKING:
    from minibroker.clients import ClientRequest, Producer
    from minibroker.sim.cluster import Cluster

#: the pseudo-partition a wheel write is recorded against in the requests table
WHEEL_PARTITION = TopicPartition("__delay_wheel", 0)


@attrs.define(frozen=True)
class WheelConfig(_KafkaNamed):
    """Settings of the file wheel."""

    slots: int = _int_field("delay.wheel.slots", 7200, 1)
    tick_ms: int = _int_field("delay.wheel.tick.ms", 1000, 1)
    #: append handles stay open only for slots this many ticks ahead of the pointer
    open_window: int = _int_field("delay.wheel.open.window.slots", 60, 0)
    #: copies (brokers); 0: min(3, brokers)
    replicas: int = _int_field("delay.wheel.replicas", 0, 0)
    #: messages per forward request: the most a crash of the active forwarder can send twice
    forward_batch: int = _int_field("delay.wheel.forward.batch", 100, 1)
    #: forward batches sent and not yet acknowledged at once (a producer's max in-flight requests)
    forward_in_flight: int = _int_field("delay.wheel.forward.in.flight", 5, 1)
    #: bytes read from a firing slot's file at a time (firing never reads a file whole)
    read_bytes: int = _int_field("delay.wheel.read.bytes", 1 << 20, 1)
    #: a client's duplicate ids are dropped when within this many records of each other in a slot
    dedup_window: int = _int_field("delay.wheel.dedup.window", 10_000, 0)
    retry_backoff_ms: int = _int_field("delay.wheel.retry.backoff.ms", 100, 1)
    #: records of ``__delay_wheel`` the ingest committed are deleted at most this often (``purge.py``)
    purge_interval_ms: int = _int_field("delay.wheel.purge.interval.ms", 1_000, 1)
    #: forwards tried, the first included, for a message whose real topic or partition does not exist
    undeliverable_attempts: int = _int_field("delay.wheel.undeliverable.attempts", 10, 1)
    #: how long such a message is parked between two attempts
    undeliverable_backoff_ms: int = _int_field("delay.wheel.undeliverable.backoff.ms", 6_000, 1)
    #: where such a message goes after its last attempt ("": dropped, counted and traced)
    dead_letter_topic: str = _text_field("delay.wheel.dead.letter.topic", "")

    @classmethod
    def from_kafka(cls, settings, where: str = "delay_wheel") -> WheelConfig:
        return super().from_kafka(settings, where)

    def copies(self, brokers: int) -> int:
        n = self.replicas or min(3, brokers)
        if n > brokers:
            raise ConfigError(f"delay.wheel.replicas: {n} is more than the cluster's {brokers} brokers")
        return n


class WheelGroup:
    """The wheel copies of a cluster, their in-sync set, the forwarder task and the router."""

    def __init__(
        self,
        cluster: Cluster,
        data_dir: str | os.PathLike[str],
        config: WheelConfig | None = None,
        *,
        epoch_origin_ms: int = 0,
    ) -> None:
        self.cluster = cluster
        self.config = config or WheelConfig()
        self.data_dir = os.fspath(data_dir)
        self.epoch_origin_ms = epoch_origin_ms
        self.tracer = cluster.tracer
        self.stats = DelayStats()
        brokers = range(self.config.copies(len(cluster.brokers)))
        self.copies: dict[int, FileWheel] = {b: self._open_copy(b) for b in brokers}
        self.in_sync: set[int] = set(self.copies)
        self.active: int | None = None
        self._producers: dict[int, Producer] = {}
        self.numbers = shared_numbers(cluster)
        #: the message ids of each named delayed send (for scenario expectations)
        self.named_ids: dict[str, list[str]] = {}
        self._wake = trio.Event()
        self._firing = False
        self._fire_scope: trio.CancelScope | None = None
        self._pending_sync: set[int] = set()
        #: the wheel's incarnation (``wheel_ingest``): what default message ids carry after a restart
        self.incarnation = 0

    def _directory(self, broker_id: int) -> str:
        return os.path.join(self.data_dir, f"broker-{broker_id}", "wheel")

    def _open_copy(self, broker_id: int) -> FileWheel:
        c = self.config
        return FileWheel(
            self._directory(broker_id),
            c.slots,
            c.tick_ms,
            c.open_window,
            on_damage=lambda damage, b=broker_id: self._damaged(b, damage),
            batch=c.forward_batch,
            read_bytes=c.read_bytes,
            dedup_window=c.dedup_window,
        )

    def _emit(self, kind: str, **fields: object) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, **fields)

    def _damaged(self, broker_id: int, damage: Damage) -> None:
        self.stats.invalid += 1
        self._emit("delay.wheel.damage", broker=broker_id, **attrs.asdict(damage))  # path, offset, reason

    def _now(self) -> int:
        """Now on the records' time scale: the wheel's ticks and due times are all on it."""
        return self.cluster.now() + self.epoch_origin_ms

    # --- lifecycle -------------------------------------------------------------------------------
    async def start(self, nursery: trio.Nursery) -> None:
        now = self._now()
        kept_files = any(wheel.pointer is not None for wheel in self.copies.values())
        self._align_kept_copies()
        for wheel in self.copies.values():
            wheel.start(now)
        self.cluster.delay_routers["wheel"] = self
        self.cluster.broker_hooks.append(self)
        rf = self.config.copies(len(self.cluster.brokers))
        new_ingest_topic = INGEST_TOPIC not in self.cluster.topics
        for topic in (INGEST_TOPIC, DELAY_OFFSETS_TOPIC):
            if topic not in self.cluster.topics:
                configs = dict(COMPACTED) if topic == DELAY_OFFSETS_TOPIC else dict(PURGED)
                self.cluster.create_topic(TopicSpec(topic, 1, rf, internal=True, configs=configs))
        self.incarnation = self._incarnation(new_topic=new_ingest_topic and kept_files)
        nursery.start_soon(self._run)
        ingest = WheelIngest(
            self.cluster,
            self.write,
            self._invalid,
            self.config.retry_backoff_ms,
            self.incarnation,
            self.config.purge_interval_ms,
        )
        nursery.start_soon(ingest.run)

    def _align_kept_copies(self) -> None:
        """Replace each kept copy whose pointer differs from the first copy's by the first copy's files.

        A process killed between two copies' completion of a tick (each copy writes its own pointer),
        or after an append that reached some copies only (never acknowledged), leaves the copies' pointers
        apart; every tick fires on all copies at once, so they must start from one pointer. The first
        copy is the one that forwards, and every acknowledged write is in every copy: its files hold
        everything the others do.
        """
        source = min(self.copies)
        if self.copies[source].pointer is None:
            return  # a new wheel
        for broker_id, wheel in list(self.copies.items()):
            if broker_id == source or wheel.pointer == self.copies[source].pointer:
                continue
            wheel.close()
            target = self._directory(broker_id)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self._directory(source), target)
            self.copies[broker_id] = self._open_copy(broker_id)
            self._emit("delay.wheel.in_sync", broker=broker_id, copied_from=source)

    def _incarnation(self, new_topic: bool) -> int:
        """The wheel's incarnation (``wheel_ingest``): kept in each copy's ``incarnation`` file, one
        up when the wheel kept files and ``__delay_wheel`` is new (its offsets start at 0 again)."""
        paths = [os.path.join(self._directory(b), "incarnation") for b in self.copies]
        current = 0
        for path in paths:
            try:
                with open(path) as f:
                    current = max(current, int(f.read().strip() or 0))
            except (FileNotFoundError, ValueError):
                pass  # none yet (or torn: the rename below makes that a crash before it, never after)
        if not new_topic:
            return current
        current += 1
        for path in paths:
            with open(path + ".tmp", "w") as f:
                f.write(str(current))
            os.replace(path + ".tmp", path)
        self._emit("delay.wheel.incarnation", incarnation=current, ids=f"{ingest_label(current)}@<offset>")
        return current

    def _invalid(self, partition: str, reason: str) -> None:
        self.stats.invalid += 1
        self._emit("delay.invalid", partition=partition, reason=reason)

    def live_in_sync(self) -> list[int]:
        return sorted(b for b in self.in_sync if self.cluster.is_alive(b))

    def broker_stopped(self, broker_id: int) -> None:
        if broker_id == self.active and self._fire_scope is not None:
            self._fire_scope.cancel()  # the forwarder dies with its broker, its batch in flight
        if broker_id in self.in_sync and len(self.in_sync) > 1:
            self.in_sync.discard(broker_id)
            self._emit("delay.wheel.out_of_sync", broker=broker_id)
        self._wake.set()

    async def broker_started(self, broker_id: int) -> None:
        if broker_id not in self.copies:
            return
        if self._firing:
            self._pending_sync.add(broker_id)  # copied once the tick being fired is complete
        else:
            self._sync(broker_id)
        self._wake.set()

    def _sync(self, broker_id: int) -> None:
        """Bring a restarted broker's copy back in sync: replace it by the active copy's files."""
        live = [b for b in self.live_in_sync() if b != broker_id]
        if broker_id not in self.in_sync and live and self.cluster.is_alive(broker_id):
            source = self.active if self.active in live else live[0]
            self.copies[broker_id].close()
            self.copies[source].save_pointer()
            target = self._directory(broker_id)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self._directory(source), target)
            self.copies[broker_id] = self._open_copy(broker_id)
            self.in_sync.add(broker_id)
            self._emit("delay.wheel.in_sync", broker=broker_id, copied_from=source)

    # --- the router ------------------------------------------------------------------------------
    def send(
        self, producer: Producer, real: TopicPartition, count: int, size: int, delay_ms: int, name: str | None
    ) -> ClientRequest:
        """Write ``count`` delayed records to every live in-sync copy; the request completes at once."""
        if delay_ms < 1:
            raise DelayError(f"delay_ms: expected at least 1, got {delay_ms}")
        check_real(self.cluster, real)
        if not self.live_in_sync():
            return producer.complete_locally(-1, WHEEL_PARTITION, Errors.NOT_ENOUGH_REPLICAS, name)
        now = self._now()
        messages = new_messages(self.numbers, producer.client_id, real, count, size, now, now + delay_ms)
        live = self.write(messages)
        if name is not None:
            self.named_ids[name] = [m.message_id for m in messages]
        return producer.complete_locally(live[0], WHEEL_PARTITION, Errors.NONE, name)

    def write(self, messages: list[DelayedMessage]) -> list[int]:
        """Append ``messages`` to every live in-sync copy; the copies written (none: not written)."""
        live = self.live_in_sync()
        encoded = [encode_message(m) for m in messages] if len(live) > 1 else None
        for broker_id in live:
            self.copies[broker_id].append(messages, encoded)
        if live and self.tracer.enabled:
            for m in messages:
                tick = self.copies[live[0]].tick_for(m.due_ms)
                self._emit(
                    "delay.wheel.append",
                    id=m.message_id,
                    due_ms=m.due_ms - self.epoch_origin_ms,
                    tick=tick,
                    slot=tick % self.config.slots,
                    copies=live,
                )
        self._wake.set()
        return live

    # --- the forwarder ---------------------------------------------------------------------------
    def _producer(self, broker_id: int) -> Producer:
        from minibroker.clients import Producer

        producer = self._producers.get(broker_id)
        if producer is None:
            producer = Producer(self.cluster, f"delay-wheel-{broker_id}", ProducerConfig(acks=-1))
            self._producers[broker_id] = producer
        return producer

    async def _run(self) -> None:
        clock = self.cluster.clock
        while True:
            live = self.live_in_sync()
            if not live:
                with trio.move_on_after(self.config.tick_ms / 1000):
                    await self._wake.wait()
                self._wake = trio.Event()
                continue
            if self.active != live[0]:
                self.active = live[0]
                self._emit("delay.wheel.active", broker=self.active)
            wheel = self.copies[self.active]
            ticks = wheel.due_ticks(self._now())
            if not ticks:
                with trio.move_on_at(clock.to_seconds(wheel.next_tick_ms() - self.epoch_origin_ms)):
                    await self._wake.wait()
                self._wake = trio.Event()
                continue
            self._firing = True
            try:
                with trio.CancelScope() as self._fire_scope:
                    await self._fire(ticks[0], live)
            finally:
                self._firing = False
                self._fire_scope = None
            for broker_id in sorted(self._pending_sync):
                self._sync(broker_id)
            self._pending_sync.clear()

    async def _fire(self, tick: int, live: list[int]) -> None:
        """Fire ``tick`` on every live in-sync copy and forward from the first, until done or failed over.

        Up to ``delay.wheel.forward.in.flight`` batches are sent before the first is acknowledged; their
        answers are taken in order, and each acknowledged batch is checkpointed (and passed by the
        standbys) only after every batch before it: a crash forwards again only the batches in flight.
        """
        active = live[0]
        firings = {broker_id: self.copies[broker_id].fire(tick) for broker_id in live}
        lead = firings[active]
        window: deque[tuple[list[DelayedMessage], int, PendingForward]] = deque()
        try:
            while True:
                while len(window) < self.config.forward_in_flight and (batch := lead.next_batch()):
                    sent = send_forward(self._producer(active), batch, self.epoch_origin_ms, self._emit)
                    window.append((batch, lead.position, sent))
                if not window:
                    break
                batch, position, sent = window.popleft()
                if not await self._forward_batch(active, batch, sent):
                    return  # the active broker died with its batches in flight: the next copy re-fires
                lead.checkpoint(position)
                ids = [m.message_id for m in batch]
                for broker_id, firing in firings.items():
                    if broker_id != active and broker_id in self.in_sync and self.cluster.is_alive(broker_id):
                        firing.follow(ids)
            self._emit(
                "delay.wheel.fire",
                broker=active,
                tick=tick,
                slot=lead.slot,
                forward=lead.forwarded,
                roll=lead.rolled,
            )
            for broker_id, firing in firings.items():
                if self.cluster.is_alive(broker_id):
                    firing.complete()
        finally:
            for firing in firings.values():
                firing.close()

    async def _forward_batch(
        self, active: int, batch: list[DelayedMessage], sent: PendingForward | None
    ) -> bool:
        """Forward ``batch`` (``sent`` already) until every message is acknowledged; False if ``active``
        stopped being active."""
        pending = batch
        while pending:
            if sent is None:
                sent = send_forward(self._producer(active), pending, self.epoch_origin_ms, self._emit)
            outcomes = await forward_outcomes(sent)
            sent = None
            if self.live_in_sync()[:1] != [active]:
                return False
            done_at = self.cluster.now()
            failed = []
            lost = []
            for message, (partition, error) in zip(pending, outcomes, strict=True):
                if undeliverable((partition, error)):  # no such topic or partition here
                    lost.append(message)
                    continue
                if error != Errors.NONE.name:
                    failed.append(message)
                    self.stats.forward_failures += 1
                    self._emit("delay.forward.failed", id=message.message_id, error=error)
                    continue
                due_ms = message.due_ms - self.epoch_origin_ms
                self.stats.delivered(message.message_id, partition, 0, due_ms, done_at)
                self._emit(
                    "delay.delivered",
                    design="wheel",
                    id=message.message_id,
                    partition=partition,
                    due_ms=due_ms,
                    lateness_ms=done_at - due_ms,
                )
            if lost and not await self._park(active, lost):
                return False
            pending = failed
            if pending:
                await trio.sleep(self.config.retry_backoff_ms / 1000)
        return True

    async def _park(self, active: int, messages: list[DelayedMessage]) -> bool:
        """Write ``messages`` (their real topic or partition does not exist) to the wheel again, due
        after the backoff, or past their last attempt dead-letter or drop them; False if ``active``
        stopped being active."""
        c = self.config
        limits = (c.undeliverable_attempts, c.undeliverable_backoff_ms, c.dead_letter_topic)
        again = []
        letters = []
        for message in messages:
            verdict, out = settle(
                message, self.cluster, limits, self._now(), self.epoch_origin_ms, self.stats, self._emit
            )
            if out is not None:
                (again if verdict == "park" else letters).append(out)
        if again:
            self.write(again)
        while letters:
            outcomes = await forward(self._producer(active), letters, self.epoch_origin_ms, self._emit)
            if self.live_in_sync()[:1] != [active]:
                return False
            failed = []
            for letter, (partition, error) in zip(letters, outcomes, strict=True):
                if error == Errors.NONE.name:
                    self.stats.dead_lettered += 1
                    self._emit(
                        "delay.dead", id=letter.message_id, partition=partition, error=UNKNOWN_PARTITION
                    )
                else:
                    failed.append(letter)
                    self._emit("delay.forward.failed", id=letter.message_id, error=error)
            letters = failed
            if letters:
                await trio.sleep(c.retry_backoff_ms / 1000)
        return True

    # --- views -----------------------------------------------------------------------------------
    def view(self) -> dict[int, WheelView]:
        return {b: wheel.view() for b, wheel in self.copies.items()}
