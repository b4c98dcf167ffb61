"""Fetch, ListOffsets and OffsetForLeaderEpoch: a consumer's side.

Fetch becomes one emulated consumer ``FetchRequest`` (replica id -1) with the
request's ``max_wait_ms``, ``min_bytes``, ``max_bytes`` and per-partition
offsets and limits; isolation READ_COMMITTED reads up to the LSO
(TXN_COMMITTED: the first offset of the earliest open transaction, never above
the HW) and its answer lists the aborted transactions the records returned
overlap (from the leader's aborted-transaction index, Kafka's
``collectAbortedTransactions``), so the client drops their records;
READ_UNCOMMITTED reads up to the HW. Not enough bytes parks a DelayedFetch in the broker's fetch purgatory
until ``min_bytes`` arrive or ``max_wait_ms`` passes. Batches come back as the
producer's bytes at their log offsets (``records.encode_batches``).

Fetch sessions (KIP-227) are Kafka's (``fetch_sessions.py``): a full fetch
creates one, an incremental fetch reads every partition of its session and the
answer carries only those with news.

ListOffsets: -2 (earliest) is the log start offset, -1 (latest) the HW (the
LSO for READ_COMMITTED, v2+), a timestamp the first record stamped
at or after it below the HW; -3 (max timestamp, v7+) the first record stamped
latest below the HW, with its batch's leader epoch; -4 (earliest local, v8+) the
local log start offset; -5 (latest tiered, v9+) the highest offset in remote
storage (-1 and epoch -1 without one, as Kafka answers). OffsetForLeaderEpoch answers
from the leader's epoch cache. Both read the leader's state directly, except a timestamp
on a topic in tiered storage: it goes to the broker's ``ReplicaManager.list_offsets``,
which looks in the remote tier first and waits in the RemoteListOffsets purgatory
(records there are found by append time).
"""

from __future__ import annotations

from typing import Any

import attrs
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse

from minibroker.broker.partition import Partition, PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    CONSUMER_REPLICA_ID,
    EARLIEST_LOCAL_TIMESTAMP,
    HIGH_WATERMARK,
    LATEST_TIERED_TIMESTAMP,
    TXN_COMMITTED,
    FetchRequest,
    ListOffsetsRequest,
    TopicPartition,
)
from minibroker.common.messages import (
    FetchResponse as ClusterFetchResponse,
)
from minibroker.server.acl_checks import topic_denied
from minibroker.server.authorizer import DESCRIBE, READ
from minibroker.server.codec import Request
from minibroker.server.context import INVALID_REQUEST, RESPONSE_GRACE_MS, Connection
from minibroker.server.fetch_sessions import ERROR, answer, new_context
from minibroker.server.records import encode_batches, max_timestamp_offset, offset_for_timestamp

FetchTopic = FetchResponse.FetchableTopicResponse
FetchData = FetchResponse.FetchableTopicResponse.PartitionData
AbortedTransaction = FetchData.AbortedTransaction
OffsetsTopic = ListOffsetsResponse.ListOffsetsTopicResponse
OffsetsPartition = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochPartition = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult.EpochEndOffset

#: ListOffsets' special timestamps
LATEST = -1
EARLIEST = -2
#: ListOffsets v7+ (KIP-734); earliest local (-4, v8+) and latest tiered (-5, v9+) are KIP-1005's
MAX_TIMESTAMP = -3


async def fetch(request: Request, conn: Connection) -> FetchResponse:
    body = request.body
    version = request.api_version
    context = new_context(conn, body, version)
    if context.kind == ERROR:
        return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    read_committed = version >= 4 and body.isolation_level == 1
    message = FetchRequest(
        CONSUMER_REPLICA_ID,
        body.max_wait_ms,
        body.min_bytes,
        body.max_bytes,
        context.partitions,
        TXN_COMMITTED if read_committed else HIGH_WATERMARK,
        conn.request_id(request.correlation_id),
    )
    response: ClusterFetchResponse = await conn.call(message, max(0, body.max_wait_ms) + RESPONSE_GRACE_MS)
    session_id, carried = answer(conn, context, response.partitions)
    origin = conn.state.epoch_origin_ms
    topics: dict[str, list] = {}
    unreadable = {tp.topic for tp in carried if topic_denied(conn, READ, tp.topic)}
    for tp in carried:
        part = response.partitions[tp]
        if tp.topic in unreadable:
            part = attrs.evolve(part, error=Errors.TOPIC_AUTHORIZATION_FAILED)
        ok = part.error is Errors.NONE
        lso, aborted = _transactions(conn, tp, part.batches, read_committed) if ok else (-1, None)
        topics.setdefault(tp.topic, []).append(
            FetchData(
                partition_index=tp.partition,
                error_code=int(part.error),
                high_watermark=part.high_watermark if ok else -1,
                last_stable_offset=min(lso, part.high_watermark) if ok else -1,
                log_start_offset=part.log_start_offset if ok else -1,
                aborted_transactions=aborted,
                preferred_read_replica=-1,
                records=encode_batches(part.batches, origin) if ok else b"",
            )
        )
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=session_id,
        responses=[FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
    )


def _transactions(
    conn: Connection, tp: TopicPartition, batches: Any, read_committed: bool
) -> tuple[int, list | None]:
    """The leader's LSO and, for READ_COMMITTED, the aborted transactions ``batches`` overlap."""
    manager = conn.cluster.brokers[conn.broker_id].replica_manager
    partition = manager.partition(tp) if manager is not None else None
    if partition is None:
        return -1, [] if read_committed else None
    log = partition.log
    if not read_committed:
        return log.last_stable_offset, None
    if not batches:
        return log.last_stable_offset, []
    found = log.producer_state.aborted_between(batches[0].base_offset, batches[-1].next_offset)
    return log.last_stable_offset, [
        AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset) for t in found
    ]


def _leader(conn: Connection, tp: TopicPartition, current_leader_epoch: int) -> Partition:
    """The leader replica of ``tp`` on this broker, or ``PartitionError`` (Kafka's lookup and fencing)."""
    partition = conn.replica_manager().partition(tp)
    if partition is None:
        known = conn.cluster.known(tp)
        raise PartitionError(Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION)
    partition.require_leader()
    partition.check_leader_epoch(current_leader_epoch)
    return partition


async def list_offsets(request: Request, conn: Connection) -> ListOffsetsResponse:
    body = request.body
    version = request.api_version
    topics = []
    for topic in body.topics:
        parts = []
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            epoch = part.current_leader_epoch if version >= 4 else -1
            error, timestamp, offset, leader_epoch = 0, -1, -1, -1
            try:
                if topic_denied(conn, DESCRIBE, tp.topic):
                    raise PartitionError(Errors.TOPIC_AUTHORIZATION_FAILED)
                partition = _leader(conn, tp, epoch)
                leader_epoch = partition.leader_epoch
                log = partition.log
                if part.timestamp == EARLIEST:
                    offset = log.log_start_offset
                elif part.timestamp == MAX_TIMESTAMP:
                    below_hw = log.read(log.log_start_offset, 2**62, log.high_watermark).batches
                    found = max_timestamp_offset(below_hw, conn.state.epoch_origin_ms)
                    if found is not None:
                        timestamp, offset, leader_epoch = found
                elif part.timestamp == LATEST:
                    committed = version >= 2 and body.isolation_level == 1
                    offset = log.last_stable_offset if committed else log.high_watermark
                elif part.timestamp == EARLIEST_LOCAL_TIMESTAMP:
                    offset = log.local_log_start_offset
                elif part.timestamp == LATEST_TIERED_TIMESTAMP:
                    tiers = conn.replica_manager().remote_log_manager
                    offset = tiers.storage.highest_offset(tp) if tiers.enabled_for(tp) else -1
                    if offset == -1:  # nothing in remote storage: Kafka answers -1, epoch -1
                        leader_epoch = -1
                elif part.timestamp >= 0 and conn.replica_manager().remote_log_manager.enabled_for(tp):
                    error, timestamp, offset = await _remote_offset_for_time(
                        conn, request, tp, part.timestamp, epoch
                    )
                elif part.timestamp >= 0:
                    below_hw = log.read(log.log_start_offset, 2**62, log.high_watermark).batches
                    found = offset_for_timestamp(below_hw, part.timestamp, conn.state.epoch_origin_ms)
                    if found is not None:
                        timestamp, offset = found
                else:
                    error = INVALID_REQUEST
            except PartitionError as failure:
                error = int(failure.error)
            parts.append(
                OffsetsPartition(
                    partition_index=tp.partition,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=leader_epoch,
                )
            )
        topics.append(OffsetsTopic(name=topic.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


async def _remote_offset_for_time(
    conn: Connection, request: Request, tp: TopicPartition, target_ms: int, epoch: int
) -> tuple[int, int, int]:
    """A timestamp lookup on a topic in tiered storage, through the broker's RemoteListOffsets purgatory."""
    origin = conn.state.epoch_origin_ms
    message = ListOffsetsRequest(
        {tp: max(0, target_ms - origin)},
        request_id=conn.request_id(request.correlation_id),
        current_leader_epochs={tp: epoch},
    )
    timeout = conn.replica_manager().config.remote_list_offsets_request_timeout_ms
    response = await conn.call(message, timeout + RESPONSE_GRACE_MS)
    part = response.partitions[tp]
    found = part.offset >= 0
    return int(part.error), part.timestamp + origin if found else -1, part.offset


async def offset_for_leader_epoch(request: Request, conn: Connection) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in request.body.topics:
        parts = []
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, part.partition)
            error, epoch, end = 0, -1, -1
            try:
                partition = _leader(conn, tp, part.current_leader_epoch)
                epoch, end = partition.log.end_offset_for_epoch(part.leader_epoch)
            except PartitionError as failure:
                error = int(failure.error)
            parts.append(
                EpochPartition(error_code=error, partition=tp.partition, leader_epoch=epoch, end_offset=end)
            )
        topics.append(EpochTopic(topic=topic.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
