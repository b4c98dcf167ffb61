"""The retry service: the retry scheduler as a standalone process against any Kafka cluster.

It consumes every ``<topic>-retry-<n>`` of its configured topics in one consumer group (kafka-python,
``enable.auto.commit`` off), holds each record in its backend until ``retry.due.ms``, then produces it
back to ``retry.original.topic`` (its original partition when the header names one) with acks=all, or
to ``<topic>-dlt`` once ``retry.attempt`` reached the topic's ``attempts``; only after the produce was
acknowledged is the record forgotten. Nothing here imports the emulator: only the retry package's
policy, headers and schedulers, kafka-python and (for ``redis``) redis-py.

Commit rule: a retry-topic offset is committed only once its record is safe without the topic (see
``holding``): ``wheel`` after the produce back, ``redis`` after the ZADD. So a crash at any point loses
nothing; what it can cost is duplicates, bounded as docs/retry-service.md states.

Outages: a call to Redis or Kafka that fails for want of a connection (a restarted redis-server, a
crashed broker, a reset connection, a produce or commit that fails or times out) is made again after a
backoff (``outage``: exponential from ``retry_backoff_ms`` to ``retry_backoff_max_ms``), with one line
when the outage starts and one when it ends; ``outage_limit_ms`` (0: for ever) ends the service with
exit status 1. The commit rule holds throughout: a Redis call is retried in place (the batch it belongs
to waits for it); a record whose produce failed goes back to its holder, due after the backoff, and its
offset stays uncommitted.

Shutdown: ``stop()`` (the command calls it on SIGINT/SIGTERM) lets the current batch finish, commits,
leaves the group and closes; records held in memory (``wheel``) are read again by the next instance. A
stop during an outage ends the wait at once: what the outage held up is safe where it was (uncommitted
in the retry topic, or claimed in Redis until ``lease_ms``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from minibroker.extras import MissingExtra, optional_import
from minibroker.retry import headers as h
from minibroker.retry.holding import Held, RedisHolding, WheelHolding
from minibroker.retry.outage import Outage, now_ms, reason_of
from minibroker.retry.policy import dlt_topic
from minibroker.retry.service_config import ServiceConfig
from minibroker.retry.service_kafka import KAFKA_ERRORS, failure, held_of, listener, succeeded


class ServiceError(Exception):
    """The service cannot start (unreachable cluster or Redis, missing topics): one line, exit 2."""


class _Stopped(Exception):
    """``stop()`` was called while an outage held the loop up."""


#: the slice of an outage's wait after which ``stop()`` is noticed (ms)
PAUSE_SLICE_MS = 50
#: how much longer than produce_timeout_ms a batch's flush may wait for the producer's verdicts
FLUSH_SLACK_MS = 2_000


def _stderr(line: str) -> None:
    print(f"retry-service: {line}", file=sys.stderr, flush=True)


class RetryService:
    """One instance of the service; ``open()`` then ``run()`` (returns after ``stop()``), then ``close()``."""

    def __init__(self, config: ServiceConfig, bootstrap: str, log: Callable[[str], None] = _stderr) -> None:
        self.config, self.bootstrap, self.log = config, bootstrap, log
        self.sources = config.retry_topics()
        self.stopping = False
        self.read = self.delivered = self.dead_lettered = self.produce_failures = 0
        #: times Redis was found to have come back without the entries it held
        self.redis_lost = 0
        self.consumer: Any = None
        self.producer: Any = None
        self.holding: Any = None
        self._committed: dict[Any, int] = {}
        self._partitions: dict[str, set[int]] = {}
        self._recovered_at = 0
        #: partitions assigned by the last rebalance whose position ``_position`` has not set yet; the
        #: rebalance listener (kafka-python's IO thread) replaces it, under the lock, with a new epoch
        self._unpositioned: set[Any] = set()
        self._assignment_epoch = 0
        self._assignment_lock = threading.Lock()
        c = config
        backoff = (c.retry_backoff_ms, c.retry_backoff_max_ms, c.outage_limit_ms, log)
        self.redis_outage = Outage(f"redis at {c.backend.url}", *backoff)
        self.kafka_outage = Outage(f"kafka at {bootstrap}", *backoff)
        #: commits fail apart from produces: a member out of its group (a rebalance) produces on
        self.commit_outage = Outage(
            f"offset commits of group {c.group_id}", *backoff, down="failing", up="succeeding again"
        )
        #: the exceptions of a Redis that cannot be reached (none for ``wheel``)
        self._redis_errors: tuple[type[BaseException], ...] = ()
        #: no offset commit is tried before this (epoch ms): commits back off through a Kafka outage
        self._commit_after = 0
        #: after a failed produce, the next commit sends every commit point, moved or not: it fails if
        #: the outage cost this instance its group membership (``wheel`` delivers nothing until it passed)
        self._confirm_membership = False

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
            # a record not acknowledged within produce_timeout_ms fails (and is held again) rather than
            # being sent again later by the producer behind the service's back
            request_timeout_ms = max(1, min(30_000, c.produce_timeout_ms - 2))
            self.producer = KafkaProducer(
                **common,
                client_id=c.client_id,
                acks="all",
                linger_ms=2,
                request_timeout_ms=request_timeout_ms,
                delivery_timeout_ms=max(c.produce_timeout_ms, request_timeout_ms + 2),
                max_block_ms=c.produce_timeout_ms,  # a send waiting for metadata of a cluster that is down
                # kafka-python 3.0.12's idempotent producer stops sending for good once a batch it had
                # sent expires (it drops its producer id and never asks for a new one); the service is
                # at-least-once either way
                enable_idempotence=False,
            )
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
        self.consumer.subscribe(topics=sorted(self.sources), listener=listener(self))

    def _open_backend(self) -> Any:
        b = self.config.backend
        if b.kind == "wheel":
            return WheelHolding(now_ms())
        try:
            redis = optional_import("redis", "retry", '[backend] kind = "redis"')
        except MissingExtra as error:
            raise ServiceError(str(error)) from None
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        from minibroker.retry.redis_scheduler import RedisScheduler

        timeout = b.connect_timeout_ms / 1000
        try:
            # one immediate retry (a stale pooled connection); an outage is the service's to back off from
            client = redis.Redis.from_url(
                b.url, socket_connect_timeout=timeout, socket_timeout=timeout, retry=Retry(NoBackoff(), 1)
            )
            client.ping()
        except (redis.RedisError, ValueError, OSError) as error:
            raise ServiceError(f"[backend] url {b.url}: Redis unreachable ({error})") from None
        self._redis_errors = (redis.ConnectionError, redis.TimeoutError)  # BusyLoadingError is one
        scheduler = RedisScheduler(client, b.key, batch=b.claim_batch, dedup_ms=b.dedup_ms)
        scheduler.on_lost = self._redis_lost
        return RedisHolding(scheduler)

    def _redis_lost(self, held: int) -> None:
        """Redis came back without what it held (restarted without persistence): say so, once."""
        b = self.config.backend
        self.redis_lost += 1
        self.log(
            f"redis at {b.url} came back without the entries it held (its marker {b.key}:epoch is gone; "
            f"{held} were held at the last count): their retry-topic offsets were committed, those records "
            "are lost (run Redis with appendonly yes)"
        )

    # -- the loop -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Finish the current batch, commit and return from ``run`` (safe from a signal handler)."""
        self.stopping = True

    def run(self) -> None:
        try:
            while not self.stopping:
                self._step()
        except _Stopped:
            pass
        self._commit(final=True)

    def _step(self) -> None:
        """One turn: poll, hold what was read, deliver what is due, commit, take back stale claims."""
        c = self.config
        due = self._backend("next_due")
        wait = c.poll_ms if due is None else min(c.poll_ms, max(0, due - now_ms()))
        try:
            polled = self.consumer.poll(timeout_ms=wait, max_records=c.max_poll_records)
        except KAFKA_ERRORS as error:  # e.g. a rebalance callback's failure: the group rejoins
            self._pause(self.kafka_outage.failed(f"poll failed ({reason_of(error)})"))
            return
        if self._unpositioned:
            with self._assignment_lock:
                self._unpositioned -= set(polled)  # kafka-python found their positions itself
            self._position()
        batch = [held_of(c, self.sources, tp, r) for tp, records in polled.items() for r in records]
        if batch:
            self._backend("hold", batch)
            self.read += len(batch)
        self._deliver_due()
        self._commit()
        if c.backend.kind == "redis" and now_ms() - self._recovered_at >= c.backend.lease_ms // 2:
            self._recovered_at = now_ms()
            if recovered := self._backend("recover", self._recovered_at, c.backend.lease_ms):
                self.log(f"recovered {recovered} records claimed over {c.backend.lease_ms} ms ago")

    def _backend(self, name: str, *args: Any) -> Any:
        """``holding.<name>(*args)``, made again after a backoff for as long as Redis cannot be reached
        (``_Stopped`` if the service is stopped meanwhile; ``OutageLimitExceeded`` past the limit)."""
        while True:
            try:
                result = getattr(self.holding, name)(*args)
            except self._redis_errors as error:
                self._pause(self.redis_outage.failed(reason_of(error)))
                continue
            self.redis_outage.succeeded()
            return result

    def _pause(self, delay_ms: int) -> None:
        """Wait ``delay_ms`` (an outage's backoff) in slices; ``_Stopped`` as soon as ``stop()`` is called."""
        end = time.monotonic() + delay_ms / 1000
        while not self.stopping and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, PAUSE_SLICE_MS / 1000))
        if self.stopping:
            raise _Stopped

    def _position(self) -> None:
        """Start newly assigned partitions at the group's committed offsets (the earliest without one).

        Done here, outside ``poll``, with the public ``committed``/``seek``: kafka-python 3.0.12 was seen
        to spin in ``poll`` without ever fetching the committed offsets after a rebalance.
        """
        with self._assignment_lock:
            epoch = self._assignment_epoch
            pending = sorted(self._unpositioned & self.consumer.assignment())
        for tp in pending:
            try:
                committed = self.consumer.committed(tp, timeout_ms=self.config.bootstrap_timeout_ms)
                if committed is None:
                    self.consumer.seek_to_beginning(tp)
                else:
                    self.consumer.seek(tp, committed)
            except KAFKA_ERRORS as error:  # the coordinator is moving, or a rebalance took tp: next loop
                self.log(f"positioning {tp.topic}[{tp.partition}] failed ({reason_of(error)})")
                return
            with self._assignment_lock:
                if self._assignment_epoch != epoch:
                    return  # a rebalance meanwhile: its partitions are positioned from scratch
                self._unpositioned.discard(tp)
        with self._assignment_lock:
            if self._assignment_epoch == epoch:
                self._unpositioned &= self.consumer.assignment()

    def _deliver_due(self) -> None:
        """Produce every due record back (or to the DLT), a claimed batch at a time, each batch awaited.

        A record whose produce failed (an error, or no acknowledgement within ``produce_timeout_ms``) goes
        back to its holder, due after the Kafka outage's backoff; the batch's others are done.
        """
        from kafka.errors import KafkaTimeoutError

        c = self.config
        while not self._commits_held_up():
            claimed = self._backend("claim", now_ms(), c.backend.claim_batch)
            if not claimed:
                return
            sent = self._send_all(claimed)
            # the producer fails what it could not deliver within produce_timeout_ms; the slack lets it
            # say so, so that a record it still holds is rarely retried beside it (a duplicate)
            with contextlib.suppress(KafkaTimeoutError):  # the futures not done count as failed below
                self.producer.flush(timeout=(c.produce_timeout_ms + FLUSH_SLACK_MS) / 1000)
            ok = [(held, dead) for held, future, dead in sent if succeeded(future)]
            failed = [(held, future) for held, future, _ in sent if not succeeded(future)]
            self._backend("done", [held for held, _ in ok])
            self.dead_lettered += sum(dead for _, dead in ok)
            self.delivered += len(ok) - sum(dead for _, dead in ok)
            if failed:
                self.produce_failures += len(failed)
                reason = f"{len(failed)} of {len(sent)} produces failed ({failure(failed[0][1])})"
                delay = self.kafka_outage.failed(reason)
                self._confirm_membership = True
                self._backend("release", [held for held, _ in failed], now_ms() + delay)
            else:
                self.kafka_outage.succeeded()
            self._commit()  # bounds what a crash delivers again to about one batch
            if self.stopping or failed:  # after a failure: poll (the group lives on) until due again
                return

    def _commits_held_up(self) -> bool:
        """``wheel`` while commits fail, or after a failed produce until a commit confirmed the group
        membership: what it delivered now would be delivered again by the partition's next owner (this
        instance after a rejoin, too), so it waits for the commits instead. (``redis`` commits only what
        is in Redis, and a record read again is not scheduled again.)"""
        held_up = self.commit_outage.active or self._confirm_membership
        return held_up and self.config.backend.kind == "wheel"

    def _send_all(self, claimed: list[Held]) -> list[tuple[Held, Any, bool]]:
        """``_send`` each record; once one ``send`` raised (each may block ``max_block_ms`` for
        metadata), the rest of the batch fails with it unsent."""
        sent: list[tuple[Held, Any, bool]] = []
        error: BaseException | None = None
        for held in claimed:
            future, dead = self._send(held) if error is None else (error, False)
            error = future if isinstance(future, BaseException) else None
            sent.append((held, future, dead))
        return sent

    def _send(self, held: Held) -> tuple[Any, bool]:
        """Produce ``held`` back (or to the DLT); the future (or the error ``send`` raised, e.g. no
        metadata within ``max_block_ms``) and whether it is dead-lettered."""
        record = held.record
        source = str(record.headers[h.ORIGINAL_TOPIC])
        fields = dict(record.headers)
        dead = record.attempt >= self.config.topics[source].attempts
        target = dlt_topic(source) if dead else source
        if dead:
            fields[h.DUE] = now_ms()
        partition = fields.get(h.ORIGINAL_PARTITION)
        out = h.RetryRecord(record.key, record.value, record.timestamp, fields, record.extra)
        try:
            if not isinstance(partition, int) or partition not in self._partitions_of(target):
                partition = None  # the key picks one, as the producer's partitioner does
            future = self.producer.send(
                target,
                key=record.key,
                value=record.value,
                headers=out.encode_headers(),
                partition=partition,
                timestamp_ms=record.timestamp,
            )
        except KAFKA_ERRORS as error:
            return error, dead
        return future, dead

    def _partitions_of(self, topic: str) -> set[int]:
        if topic not in self._partitions:
            partitions = self.producer.partitions_for(topic)  # KafkaTimeoutError without metadata
            if not partitions:
                return set()  # not cached: asked again next time
            self._partitions[topic] = set(partitions)
        return self._partitions[topic]

    def _commit(self, final: bool = False) -> None:
        """Commit every partition's commit point that moved; a failure (a rebalance, a broker outage) is
        one outage of Kafka: commits back off and the points are committed later (or read again by the
        partition's next owner: duplicates, never losses)."""
        from kafka.structs import OffsetAndMetadata

        if not final and now_ms() < self._commit_after:
            return
        points = {
            tp: OffsetAndMetadata(offset, "", -1)
            for tp, offset in self.holding.commit_points().items()
            if self._confirm_membership or self._committed.get(tp) != offset
        }
        if not points:
            self._confirm_membership = False  # nothing held: nothing to deliver twice
            return
        try:
            self.consumer.commit(points, timeout_ms=self.config.produce_timeout_ms)
        except KAFKA_ERRORS as error:
            if not final:
                delay = self.commit_outage.failed(reason_of(error))
                self._commit_after = now_ms() + delay
            else:
                self.log(f"the last commit failed ({reason_of(error)}); records may be delivered again")
            return
        self._commit_after = 0
        self._confirm_membership = False
        self.commit_outage.succeeded()
        self._committed.update({tp: meta.offset for tp, meta in points.items()})

    def close(self) -> None:
        """Leave the group and close the clients; a cluster that is down makes this a line, not a
        traceback (the producer's unsent records are held again by the next instance: uncommitted)."""
        for name, client, close in (
            ("consumer", self.consumer, lambda c: c.close(autocommit=False)),
            ("producer", self.producer, lambda p: p.close(timeout=self.config.produce_timeout_ms / 1000)),
        ):
            if client is None:
                continue
            try:
                close(client)
            except KAFKA_ERRORS as error:
                self.log(f"closing the {name} failed ({reason_of(error)})")

    def summary(self) -> str:
        try:
            held = self.holding.pending() if self.holding else 0
        except self._redis_errors:
            held = "unknown (redis unreachable)"
        return (
            f"read {self.read}, delivered {self.delivered}, dead-lettered {self.dead_lettered}, "
            f"still held {held}"
        )
