"""ReplicaFetcher: one trio task per (follower broker, leader broker), Kafka's ReplicaFetcherThread.

It sends one follower fetch at a time for every partition it follows on that
leader: fetch offset = the local LEO, the known leader epoch, and the last
fetched epoch (so the leader can report a diverging log, KIP-320), with
``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` / ``replica.fetch.max.bytes``.
On the leader the fetch parks in the fetch purgatory until there is data. The
follower appends what comes back, takes the leader's HW capped at its own LEO,
and fetches again from its new LEO. It also takes the leader's log start offset
(capped at its LEO), which its next fetch reports back: that is how DeleteRecords'
low watermark rises on the leader.

After a network error, or when every partition erred, it backs off
``replica.fetch.backoff.ms``. Paused, it sends nothing new (an answer already on
its way is still applied). One rule Kafka does not need: a round that took no
virtual time and brought nothing waits 1 ms, so ``replica.fetch.wait.max.ms=0``
cannot spin forever at one instant of virtual time.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

from minibroker.broker.config import BrokerConfig
from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.log import Log
from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    LOG_END,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    NetworkError,
    PartitionFetchResponse,
    TopicPartition,
)
from minibroker.common.network import NetworkClient
from minibroker.purgatory import DelayedOperationPurgatory
from minibroker.runtime import MsClock
from minibroker.trace import Tracer


class FollowerHost(Protocol):
    """What a fetcher uses of its broker's ``ReplicaManager``: the partitions it follows, the
    network and settings to fetch with, and the fetch purgatory its appends wake."""

    broker_id: int
    config: BrokerConfig
    clock: MsClock
    network: NetworkClient
    tracer: Tracer
    partitions: dict[TopicPartition, Partition]
    fetch_purgatory: DelayedOperationPurgatory[DelayedFetch]

    def emit(self, kind: str, **fields: Any) -> None: ...

    def next_request_id(self, kind: str) -> str: ...


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader."""

    def __init__(self, manager: FollowerHost, leader: int) -> None:
        self.manager = manager
        self.leader = leader
        self.partitions: dict[TopicPartition, None] = {}
        self.paused = False
        self.fetches = 0
        self._wake = trio.Event()
        #: the last fetch's entry of each partition, sent again while it is the same (it is immutable)
        self._sent: dict[TopicPartition, FetchPartition] = {}

    def add_partition(self, tp: TopicPartition) -> None:
        self.partitions[tp] = None
        self._wake.set()

    def remove_partition(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._sent.pop(tp, None)

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._wake.set()

    def _build_request(self) -> FetchRequest:
        manager = self.manager
        config = manager.config
        max_bytes = config.replica_fetch_max_bytes
        sent = self._sent
        parts = {}
        for tp in self.partitions:
            partition = manager.partitions[tp]
            log = partition.log
            end = log.log_end_offset
            leader_epoch = partition.leader_epoch
            last_epoch = log.latest_epoch() if end > 0 else -1
            start = log.log_start_offset
            entry = sent.get(tp)
            if (
                entry is None
                or entry.fetch_offset != end
                or entry.current_leader_epoch != leader_epoch
                or entry.last_fetched_epoch != last_epoch
                or entry.log_start_offset != start
                or entry.partition_max_bytes != max_bytes
            ):
                entry = sent[tp] = FetchPartition(end, max_bytes, leader_epoch, last_epoch, start)
            parts[tp] = entry
        return FetchRequest(
            manager.broker_id,
            config.replica_fetch_wait_max_ms,
            config.replica_fetch_min_bytes,
            config.replica_fetch_max_bytes,
            parts,
            LOG_END,
            manager.next_request_id("replica-fetch"),
        )

    async def run(self) -> None:
        manager = self.manager
        clock = manager.clock
        while True:
            while self.paused or not self.partitions:
                self._wake = trio.Event()
                await self._wake.wait()
            request = self._build_request()
            started = clock.now_ms()
            self.fetches += 1
            response = await manager.network.call(
                manager.broker_id, self.leader, request, manager.config.replica_socket_timeout_ms
            )
            backoff = manager.config.replica_fetch_backoff_ms
            if isinstance(response, NetworkError):
                await clock.sleep_until(clock.now_ms() + backoff)
                continue
            errors = self.process_fetch_response(request, response)
            if errors and errors == len(request.partitions):
                await clock.sleep_until(clock.now_ms() + backoff)
            elif clock.now_ms() == started and not any(p.batches for p in response.partitions.values()):
                await clock.sleep_until(started + 1)

    def _build_remote_log_aux_state(
        self, tp: TopicPartition, log: Log, result: PartitionFetchResponse
    ) -> None:
        """Behind the leader's local log start on a tiered topic (Kafka's ``buildRemoteLogAuxState``):
        start empty at the leader's local log start offset, with the leader's log start offset; the
        records between the two stay in the remote tier."""
        removed = log.log_end_offset - log.log_start_offset
        log.truncate_fully_and_start_at(result.local_log_start_offset)
        log.log_start_offset = min(result.log_start_offset, result.local_log_start_offset)
        if self.manager.tracer.enabled:
            self.manager.emit(
                "truncate",
                partition=str(tp),
                offset=result.local_log_start_offset,
                removed=removed,
                leo=log.log_end_offset,
            )

    def process_fetch_response(self, request: FetchRequest, response: FetchResponse) -> int:
        """Apply a fetch response on this follower (Kafka's processPartitionData); count erred partitions.

        Answers about a partition this broker no longer follows from this leader, or about an older
        leader epoch, are skipped; a diverging epoch truncates the log; new batches are appended and
        the leader's HW taken (capped at the local LEO by the log); an append wakes parked fetches.
        A partition the answer brings nothing new for (no records, error or diverging epoch, the HW
        it has, a log start offset not above its own) is passed over at once.
        """
        manager = self.manager
        leader = self.leader
        errors = 0
        none = Errors.NONE
        for tp, result in response.partitions.items():
            partition = manager.partitions.get(tp)
            if partition is None:
                continue
            log = partition.log
            if (
                result.error is none
                and not result.batches
                and result.diverging_epoch is None
                and result.high_watermark == log.high_watermark
                and result.log_start_offset <= log.log_start_offset
            ):
                continue  # nothing new: the steps below would change nothing
            if partition.leader_id != leader or partition.is_leader:
                continue
            if request.partitions[tp].current_leader_epoch != partition.leader_epoch:
                continue  # the answer is about an older epoch
            if result.error is Errors.OFFSET_OUT_OF_RANGE:
                if result.log_start_offset > log.log_end_offset:
                    # behind the leader's log start (DeleteRecords): start again there (Kafka asks
                    # ListOffsets first; the leader's answer carries the offset here)
                    removed = log.log_end_offset - log.log_start_offset
                    log.truncate_fully_and_start_at(result.log_start_offset)
                    if manager.tracer.enabled:
                        manager.emit(
                            "truncate",
                            partition=str(tp),
                            offset=log.log_start_offset,
                            removed=removed,
                            leo=log.log_end_offset,
                        )
                    continue
                errors += 1
                continue
            if result.error is Errors.OFFSET_MOVED_TO_TIERED_STORAGE:
                self._build_remote_log_aux_state(tp, log, result)
                continue
            if result.error is not Errors.NONE:
                errors += 1
                continue
            if result.diverging_epoch is not None:
                _, local_end = log.end_offset_for_epoch(result.diverging_epoch.epoch)
                target = min(result.diverging_epoch.end_offset, local_end if local_end >= 0 else 0)
                removed = log.truncate_to(target)
                if manager.tracer.enabled:
                    manager.emit(
                        "truncate", partition=str(tp), offset=target, removed=removed, leo=log.log_end_offset
                    )
                continue
            appended = 0
            for batch in result.batches:
                if batch.base_offset < log.log_end_offset:
                    if not (log.log_end_offset == log.log_start_offset < batch.next_offset):
                        continue
                    # an empty log starting inside this batch (the leader's log start): start at the
                    # batch's base, as Kafka does on UnexpectedAppendOffsetException; the leader's log
                    # start offset is taken again below
                    log.truncate_fully_and_start_at(batch.base_offset)
                log.append(batch)
                appended += batch.count
            log.set_high_watermark(result.high_watermark)
            # the leader's log start offset, as far as this log reaches (the next fetch reports it)
            start_before = log.log_start_offset
            moved = log.maybe_increment_log_start_offset(min(result.log_start_offset, log.log_end_offset))
            if moved and manager.tracer.enabled:
                manager.emit(
                    "log_start", partition=str(tp), offset=log.log_start_offset, previous=start_before
                )
            if appended:
                if manager.tracer.enabled:
                    manager.emit(
                        "replicate",
                        partition=str(tp),
                        leader=leader,
                        count=appended,
                        leo=log.log_end_offset,
                        hw=log.high_watermark,
                    )
                manager.fetch_purgatory.check_and_complete(tp)
        return errors
