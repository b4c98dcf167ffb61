"""The retry service: the scheduler of seed 004 as a standalone process against any Kafka cluster.

It consumes every ``<topic>-retry-<n>`` of its configured topics in one consumer group (kafka-python,
``enable.auto.commit`` off), holds each record in its backend until ``retry.due.ms``, then produces it
back to ``retry.original.topic`` (its original partition when the header names one) with acks=all, or
to ``<topic>-dlt`` once ``retry.attempt`` reached the topic's ``attempts``; only after the produce was
acknowledged is the record forgotten. Nothing here imports the emulator: only the retry package's
policy, headers and schedulers, kafka-python and (for ``redis``) redis-py.

Commit rule: a retry-topic offset is committed only once its record is safe without the topic (see
``holding``): ``wheel`` after the produce back, ``redis`` after the ZADD. So a crash at any point loses
nothing; what it can cost is duplicates, bounded as docs/retry-service.md states.

Shutdown: ``stop()`` (the command calls it on SIGINT/SIGTERM) lets the current batch finish, commits,
leaves the group and closes; records held in memory (``wheel``) are read again by the next instance.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from minibroker.retry import headers as h
from minibroker.retry.holding import Held, RedisHolding, WheelHolding
from minibroker.retry.policy import dlt_topic
from minibroker.retry.service_config import ServiceConfig


class ServiceError(Exception):
    """The service cannot start (unreachable cluster or Redis, missing topics): one line, exit 2."""


def now_ms() -> int:
    """Epoch milliseconds: the scale of ``retry.due.ms`` as applications write it."""
    return time.time_ns() // 1_000_000


def _stderr(line: str) -> None:
    print(f"retry-service: {line}", file=sys.stderr, flush=True)


class RetryService:
    """One instance of the service; ``open()`` then ``run()`` (returns after ``stop()``), then ``close()``."""

    def __init__(self, config: ServiceConfig, bootstrap: str, log: Callable[[str], None] = _stderr) -> None:
        self.config, self.bootstrap, self.log = config, bootstrap, log
        self.sources = config.retry_topics()
        self.stopping = False
        self.read = self.delivered = self.dead_lettered = self.produce_failures = 0
        self.consumer: Any = None
        self.producer: Any = None
        self.holding: Any = None
        self._committed: dict[Any, int] = {}
        self._partitions: dict[str, set[int]] = {}
        self._recovered_at = 0
        #: partitions assigned by the last rebalance whose position ``_position`` has not set yet
        self._unpositioned: set[Any] = set()

    # -- start-up -----------------------------------------------------------------------------------------

    def open(self) -> None:
        """Connect to the backend and the cluster and check every topic exists; ``ServiceError`` if not."""
        self.holding = self._open_backend()
        from kafka import KafkaConsumer, KafkaProducer
        from kafka.errors import KafkaError

        c = self.config
        common = {"bootstrap_servers": self.bootstrap, "bootstrap_timeout_ms": c.bootstrap_timeout_ms}
        try:
            self.consumer = KafkaConsumer(
                **common,
                group_id=c.group_id,
                client_id=c.client_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=c.session_timeout_ms,
                heartbeat_interval_ms=max(1, c.session_timeout_ms // 3),
                max_poll_records=c.max_poll_records,
            )
            self.producer = KafkaProducer(**common, client_id=c.client_id, acks="all", linger_ms=2)
            existing = self.consumer.topics()
        except (KafkaError, OSError) as error:
            raise ServiceError(
                f"--bootstrap {self.bootstrap}: no broker answered within {c.bootstrap_timeout_ms} ms "
                f"({type(error).__name__})"
            ) from None
        needed = [*self.sources, *c.topics, *(dlt_topic(t) for t in c.topics)]
        missing = [t for t in needed if t not in existing]
        if missing:
            raise ServiceError(
                f"topic {missing[0]} does not exist on {self.bootstrap} ({len(missing)} missing; the service "
                "needs <topic>, <topic>-retry-1..<attempts-1> and <topic>-dlt and creates none)"
            )
        for topic in self.sources:  # metadata first: the group's leader assigns from what it knows
            self.consumer.partitions_for_topic(topic)
        self.consumer.subscribe(topics=sorted(self.sources), listener=_listener(self))

    def _open_backend(self) -> Any:
        b = self.config.backend
        if b.kind == "wheel":
            return WheelHolding(now_ms())
        try:
            import redis
        except ModuleNotFoundError:
            message = "[backend] kind = \"redis\" needs redis-py: pip install 'minibroker[retry]'"
            raise ServiceError(message) from None
        from minibroker.retry.redis_scheduler import RedisScheduler

        timeout = b.connect_timeout_ms / 1000
        try:
            client = redis.Redis.from_url(b.url, socket_connect_timeout=timeout, socket_timeout=timeout)
            client.ping()
        except (redis.RedisError, ValueError, OSError) as error:
            raise ServiceError(f"[backend] url {b.url}: Redis unreachable ({error})") from None
        return RedisHolding(RedisScheduler(client, b.key, batch=b.claim_batch, dedup_ms=b.dedup_ms))

    # -- the loop -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the current batch, commit and return from ``run`` (safe from a signal handler)."""
        self.stopping = True

    def run(self) -> None:
        c = self.config
        while not self.stopping:
            due = self.holding.next_due()
            wait = c.poll_ms if due is None else min(c.poll_ms, max(0, due - now_ms()))
            polled = self.consumer.poll(timeout_ms=wait, max_records=c.max_poll_records)
            if self._unpositioned:
                self._unpositioned -= set(polled)  # kafka-python found their positions itself
                self._position()
            batch = [self._held(tp, record) for tp, records in polled.items() for record in records]
            if batch:
                self.holding.hold(batch)
                self.read += len(batch)
            self._deliver_due()
            self._commit()
            if c.backend.kind == "redis" and now_ms() - self._recovered_at >= c.backend.lease_ms // 2:
                self._recovered_at = now_ms()
                if recovered := self.holding.recover(self._recovered_at, c.backend.lease_ms):
                    self.log(f"recovered {recovered} records claimed over {c.backend.lease_ms} ms ago")
        self._commit()

    def _position(self) -> None:
        """Start newly assigned partitions at the group's committed offsets (the earliest without one).

        Done here, outside ``poll``, with the public ``committed``/``seek``: kafka-python 3.0.12 was seen
        to spin in ``poll`` without ever fetching the committed offsets after a rebalance.
        """
        from kafka.errors import KafkaError

        assigned = self.consumer.assignment()
        for tp in sorted(self._unpositioned & assigned):
            try:
                committed = self.consumer.committed(tp, timeout_ms=self.config.bootstrap_timeout_ms)
            except KafkaError as error:  # the coordinator is moving: the next loop tries again
                self.log(f"reading the committed offset of {tp.topic}[{tp.partition}] failed ({error})")
                return
            if committed is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, committed)
            self._unpositioned.discard(tp)
        self._unpositioned &= assigned

    def _held(self, tp: Any, record: Any) -> Held:
        """A retry-topic record as held: its source topic from the topic's name; a malformed one is due now
        with ``attempts`` set, so it goes to the DLT with the reason."""
        source, attempt = self.sources[tp.topic]
        policy = self.config.topics[source]
        headers = [(name, value or b"") for name, value in (record.headers or [])]
        try:
            parsed = h.parse(record.key, record.value, record.timestamp, headers)
        except ValueError as error:
            extra = tuple((n, v) for n, v in headers if not n.startswith("retry."))
            reason = f"malformed retry headers: {error}"
            fields = {h.ATTEMPT: policy.attempts, h.DUE: record.timestamp, h.ERROR: reason}
            parsed = h.RetryRecord(record.key, record.value, record.timestamp, fields, extra)
        fields = {**parsed.headers, h.ORIGINAL_TOPIC: source}
        fields.setdefault(h.ATTEMPT, attempt)
        fields.setdefault(h.DUE, record.timestamp + policy.delay_after(int(fields[h.ATTEMPT])))
        parsed = h.RetryRecord(parsed.key, parsed.value, parsed.timestamp, fields, parsed.extra)
        return Held(tp, record.offset, parsed, int(fields[h.DUE]))

    def _deliver_due(self) -> None:
        """Produce every due record back (or to the DLT), a claimed batch at a time, each batch awaited."""
        c = self.config
        while True:
            claimed = self.holding.claim(now_ms(), c.backend.claim_batch)
            if not claimed:
                return
            sent = [(held, self._send(held)) for held in claimed]
            self.producer.flush(timeout=c.produce_timeout_ms / 1000)
            ok = [(held, dead) for held, (future, dead) in sent if future.is_done and future.succeeded()]
            failed = [held for held, (future, _) in sent if not (future.is_done and future.succeeded())]
            self.holding.done([held for held, _ in ok])
            self.dead_lettered += sum(dead for _, dead in ok)
            self.delivered += len(ok) - sum(dead for _, dead in ok)
            self._commit()  # bounds what a crash delivers again to about one batch
            if failed:
                self.produce_failures += len(failed)
                first = next((f.exception for _, (f, _) in sent if f.is_done and f.failed()), "timed out")
                self.log(f"{len(failed)} produces failed ({first}); again in {c.retry_backoff_ms} ms")
                self.holding.release(failed, now_ms() + c.retry_backoff_ms)
            if self.stopping:
                return

    def _send(self, held: Held) -> tuple[Any, bool]:
        """Produce ``held`` back (or to the DLT); the future and whether it is dead-lettered."""
        record = held.record
        source = str(record.headers[h.ORIGINAL_TOPIC])
        fields = dict(record.headers)
        dead = record.attempt >= self.config.topics[source].attempts
        target = dlt_topic(source) if dead else source
        if dead:
            fields[h.DUE] = now_ms()
        partition = fields.get(h.ORIGINAL_PARTITION)
        if not isinstance(partition, int) or partition not in self._partitions_of(target):
            partition = None  # the key picks one, as the producer's partitioner does
        out = h.RetryRecord(record.key, record.value, record.timestamp, fields, record.extra)
        future = self.producer.send(
            target,
            key=record.key,
            value=record.value,
            headers=out.encode_headers(),
            partition=partition,
            timestamp_ms=record.timestamp,
        )
        return future, dead

    def _partitions_of(self, topic: str) -> set[int]:
        if topic not in self._partitions:
            self._partitions[topic] = set(self.producer.partitions_for(topic) or ())
        return self._partitions[topic]

    def _commit(self) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        points = {
            tp: OffsetAndMetadata(offset, "", -1)
            for tp, offset in self.holding.commit_points().items()
            if self._committed.get(tp) != offset
        }
        if not points:
            return
        try:
            self.consumer.commit(points)
        except KafkaError as error:  # a rebalance: the next owner reads from the last commit point
            self.log(f"commit failed ({type(error).__name__}); records may be delivered again")
            return
        self._committed.update({tp: meta.offset for tp, meta in points.items()})

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close(autocommit=False)
        if self.producer is not None:
            self.producer.close(timeout=self.config.produce_timeout_ms / 1000)

    def summary(self) -> str:
        return (
            f"read {self.read}, delivered {self.delivered}, dead-lettered {self.dead_lettered}, "
            f"still held {self.holding.pending() if self.holding else 0}"
        )


def _listener(service: RetryService) -> Any:
    """Rebalance callbacks: commit, then drop what is held of the revoked partitions."""
    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            service._commit()
            service.holding.revoke(list(revoked))
            for tp in revoked:
                service._committed.pop(tp, None)

        def on_partitions_assigned(self, assigned: Any) -> None:
            """Reading starts from the group's committed offsets; say which partitions are ours."""
            service._unpositioned = set(assigned)
            names = sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned)
            service.log(f"assigned {len(names)} partitions: {', '.join(names) or 'none'}")

    return Listener()
