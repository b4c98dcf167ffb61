"""InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn over the wire.

Each becomes one ``coordinator.transaction`` request sent over the emulated network to the
connection's broker, whose ``TransactionCoordinator`` answers it (NOT_COORDINATOR when it does
not lead the id's ``__transaction_state`` partition; the client finds the right one with
FindCoordinator key type 1). AddPartitionsToTxn v0-v3 (one transaction per request) answers
the coordinator's error for every partition, except that unknown partitions get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka's handler does;
the batched v4+ (KIP-890, what a partition leader sends its coordinator) carries several
transactions, each ``verify_only`` (is each partition in the open transaction? NONE or
TRANSACTION_ABORTABLE) or not (add them). AddOffsetsToTxn adds the group's ``__consumer_offsets``
partition to the transaction. EndTxn v5+ is transaction protocol version 2: the answer carries the
producer id and the bumped epoch the client goes on with; ApiVersions advertises the finalized
feature ``transaction.version`` 2 (``codec.FEATURES``).

DescribeTransactions and ListTransactions (KIP-664) read the coordinator's state: a transactional
id's coordinator describes it (TRANSACTIONAL_ID_NOT_FOUND when it has no state), each broker lists
the ids it coordinates (admin clients ask every broker); start times are wall-clock ms.
DescribeProducers reads each partition leader's producer state: id, epoch, last sequence and the
first offset of its open transaction (-1 when none) and the coordinator epoch of its last marker;
last timestamps are not kept (-1).

WriteTxnMarkers (the request a transaction coordinator sends, and Kafka's admin client for
KIP-664's abortTransaction) has the connection's broker append each marker, acks=-1 with
``request.timeout.ms``, to the partitions it leads; each partition answers the append's error.

TxnOffsetCommit goes to the group coordinator (``coordinator.group``), which holds the offsets
pending until the transaction's marker reaches the group's partition; v3+ carries the member and
generation (KIP-447), checked when given; v5+ (transaction protocol version 2) first has the
broker add the group's partition to the transaction, as AddOffsetsToTxn would.
"""

from __future__ import annotations

import trio
from kafka.protocol.admin import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
    WriteTxnMarkersResponse,
)

from minibroker.broker.partition import PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceRequest, TopicPartition
from minibroker.coordinator.group import OFFSETS_TOPIC, partition_for
from minibroker.coordinator.group import messages as groups
from minibroker.coordinator.transaction import messages as m
from minibroker.coordinator.transaction.transaction_coordinator import marker_data
from minibroker.server.codec import Request
from minibroker.server.context import RESPONSE_GRACE_MS, Connection
from minibroker.server.group_admin import commit_offsets

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
BatchedResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
BatchedTopic = BatchedResult.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
TxnCommitTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic


def _wait(conn: Connection) -> int:
    """How long a connection waits for the coordinator (a write to __transaction_state, at most)."""
    return conn.cluster.brokers[conn.broker_id].config.request_timeout_ms + RESPONSE_GRACE_MS


async def init_transactional_producer_id(request: Request, conn: Connection) -> InitProducerIdResponse:
    body = request.body
    given = (body.producer_id, body.producer_epoch) if request.api_version >= 3 else (-1, -1)
    message = m.InitProducerIdRequest(body.transactional_id, body.transaction_timeout_ms, *given)
    answer: m.InitProducerIdResponse = await conn.call(message, _wait(conn))
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )


async def add_partitions_to_txn(request: Request, conn: Connection) -> AddPartitionsToTxnResponse:
    body = request.body
    if request.api_version >= 4:
        results = [await _add_partitions_batched(one, conn) for one in body.transactions]
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    message = m.AddPartitionsToTxnRequest(
        body.v3_and_below_transactional_id,
        body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch,
        tuple(wanted),
    )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, results_by_topic_v3_and_below=await _add_partitions(message, conn)
    )


async def _add_partitions(message: m.AddPartitionsToTxnRequest, conn: Connection) -> list:
    """One transaction's partitions added (or verified): the topic results of either version."""
    wanted = list(message.partitions)
    unknown = {tp for tp in wanted if not conn.cluster.known(TopicPartition(*tp))}
    if unknown:
        errors = {
            tp: Errors.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else Errors.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        answer: m.TxnResponse = await conn.call(message, _wait(conn))
        errors = dict.fromkeys(wanted, answer.error)
        errors.update(answer.partition_errors)
    topics: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append(
            PartitionResult(partition_index=partition, partition_error_code=int(error))
        )
    return [TopicResult(name=name, results_by_partition=parts) for name, parts in topics.items()]


async def _add_partitions_batched(one, conn: Connection) -> BatchedResult:
    """AddPartitionsToTxn v4+ (KIP-890): one of the batch's transactions, ``verify_only`` or not."""
    message = m.AddPartitionsToTxnRequest(
        one.transactional_id,
        one.producer_id,
        one.producer_epoch,
        tuple((t.name, p) for t in one.topics for p in t.partitions),
        verify_only=one.verify_only,
        # a broker adding partitions (not verifying) does it for a transaction-version-2 write
        transaction_version=1 if one.verify_only else 2,
    )
    topics = await _add_partitions(message, conn)
    return BatchedResult(
        transactional_id=one.transactional_id,
        topic_results=[
            BatchedTopic(
                name=t.name,
                results_by_partition=[
                    BatchedTopic.AddPartitionsToTxnPartitionResult(
                        partition_index=p.partition_index, partition_error_code=p.partition_error_code
                    )
                    for p in t.results_by_partition
                ],
            )
            for t in topics
        ],
    )


async def add_offsets_to_txn(request: Request, conn: Connection) -> AddOffsetsToTxnResponse:
    body = request.body
    spec = conn.cluster.ensure_offsets_topic()
    partition = (OFFSETS_TOPIC, partition_for(body.group_id, spec.partitions))
    message = m.AddPartitionsToTxnRequest(
        body.transactional_id, body.producer_id, body.producer_epoch, (partition,)
    )
    answer: m.TxnResponse = await conn.call(message, _wait(conn))
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(answer.error))


async def end_txn(request: Request, conn: Connection) -> EndTxnResponse:
    body = request.body
    version = 2 if request.api_version >= 5 else 1  # EndTxn v5+: transaction protocol version 2
    message = m.EndTxnRequest(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed, version
    )
    answer: m.TxnResponse = await conn.call(message, _wait(conn))
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        producer_id=answer.producer_id,
        producer_epoch=answer.producer_epoch,
    )


async def txn_offset_commit(request: Request, conn: Connection) -> TxnOffsetCommitResponse:
    body = request.body
    version = request.api_version
    offsets = commit_offsets(body.topics, version >= 2)
    message = groups.TxnOffsetCommitRequest(
        body.group_id,
        body.producer_id,
        body.producer_epoch,
        offsets,
        body.generation_id if version >= 3 else -1,
        body.member_id if version >= 3 else "",
        body.group_instance_id if version >= 3 else None,
    )
    wait = conn.cluster.brokers[conn.broker_id].config.offsets_commit_timeout_ms + RESPONSE_GRACE_MS
    added = Errors.NONE
    if version >= 5:  # transaction protocol version 2: the commit adds the group's partition itself
        added = await _add_offsets_partition(body, conn)
    if added is not Errors.NONE:
        answered = [(o.topic, o.partition, added) for o in offsets]
    else:
        answer: groups.OffsetCommitResponse = await conn.call(message, wait)
        answered = list(answer.partitions)
    topics: dict[str, list] = {}
    for topic, partition, error in answered:
        topics.setdefault(topic, []).append(
            TxnCommitTopic.TxnOffsetCommitResponsePartition(partition_index=partition, error_code=int(error))
        )
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[TxnCommitTopic(name=name, partitions=parts) for name, parts in topics.items()],
    )


async def _add_offsets_partition(body, conn: Connection) -> Errors:
    """Have the group coordinator's broker add the group's ``__consumer_offsets`` partition to the
    transaction (TxnOffsetCommit v5+, as Kafka's group coordinator does through its
    AddPartitionsToTxnManager)."""
    spec = conn.cluster.ensure_offsets_topic()
    partition = ((OFFSETS_TOPIC, partition_for(body.group_id, spec.partitions)),)
    done = trio.Event()
    box: list[Errors] = []

    def then(error: Errors) -> None:
        box.append(error)
        done.set()

    conn.replica_manager().add_partitions_to_txn.add_partitions(
        body.transactional_id, body.producer_id, body.producer_epoch, partition, then
    )
    await done.wait()  # the broker's request to the coordinator answers or times out
    return box[0]


async def describe_transactions(request: Request, conn: Connection) -> DescribeTransactionsResponse:
    message = m.DescribeTransactionsRequest(tuple(request.body.transactional_ids))
    answer: m.DescribeTransactionsResponse = await conn.call(message, _wait(conn))
    state_cls = DescribeTransactionsResponse.TransactionState
    origin = conn.state.epoch_origin_ms
    states = []
    for t in answer.transactions:
        topics: dict[str, list[int]] = {}
        for topic, partition in t.partitions:
            topics.setdefault(topic, []).append(partition)
        states.append(
            state_cls(
                error_code=int(t.error),
                transactional_id=t.transactional_id,
                transaction_state=t.state,
                transaction_timeout_ms=t.timeout_ms,
                transaction_start_time_ms=t.start_ms + origin if t.start_ms >= 0 else -1,
                producer_id=t.producer_id,
                producer_epoch=t.producer_epoch,
                topics=[state_cls.TopicData(topic=name, partitions=ps) for name, ps in topics.items()],
            )
        )
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


async def list_transactions(request: Request, conn: Connection) -> ListTransactionsResponse:
    body = request.body
    message = m.ListTransactionsRequest(
        tuple(body.state_filters),
        tuple(body.producer_id_filters),
        body.duration_filter if request.api_version >= 1 else -1,
    )
    answer: m.ListTransactionsResponse = await conn.call(message, _wait(conn))
    state_cls = ListTransactionsResponse.TransactionState
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=int(answer.error),
        unknown_state_filters=list(answer.unknown_states),
        transaction_states=[
            state_cls(transactional_id=tid, producer_id=pid, transaction_state=state)
            for tid, pid, state in answer.transactions
        ],
    )


async def describe_producers(request: Request, conn: Connection) -> DescribeProducersResponse:
    topic_cls = DescribeProducersResponse.TopicResponse
    part_cls = topic_cls.PartitionResponse
    state_cls = part_cls.ProducerState
    manager = conn.replica_manager()
    topics = []
    for topic in request.body.topics:
        parts = []
        for index in topic.partition_indexes:
            tp = TopicPartition(topic.name, index)
            partition = manager.partition(tp)
            try:
                if partition is None:
                    known = conn.cluster.known(tp)
                    raise PartitionError(
                        Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION
                    )
                partition.require_leader()
            except PartitionError as failure:
                parts.append(
                    part_cls(partition_index=index, error_code=int(failure.error), active_producers=[])
                )
                continue
            state = partition.log.producer_state
            producers = [
                state_cls(
                    producer_id=pid,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=-1,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=state.ongoing.get(pid, -1),
                )
                for pid, entry in sorted(state.entries.items())
            ]
            parts.append(part_cls(partition_index=index, error_code=0, active_producers=producers))
        topics.append(topic_cls(name=topic.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


async def write_txn_markers(request: Request, conn: Connection) -> WriteTxnMarkersResponse:
    result_cls = WriteTxnMarkersResponse.WritableTxnMarkerResult
    topic_cls = result_cls.WritableTxnMarkerTopicResult
    part_cls = topic_cls.WritableTxnMarkerPartitionResult
    config = conn.cluster.brokers[conn.broker_id].config
    now = conn.cluster.now()
    results = []
    for marker in request.body.markers:
        tps = [TopicPartition(t.name, p) for t in marker.topics for p in t.partition_indexes]
        one = marker_data(
            marker.producer_id,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
            now,
        )
        append = ProduceRequest(
            -1, config.request_timeout_ms, dict.fromkeys(tps, one), conn.request_id(request.correlation_id)
        )
        answer = await conn.call(append, config.request_timeout_ms + RESPONSE_GRACE_MS)
        topics: dict[str, list] = {}
        for tp in tps:
            error = answer.partitions[tp].error
            topics.setdefault(tp.topic, []).append(
                part_cls(partition_index=tp.partition, error_code=int(error))
            )
        results.append(
            result_cls(
                producer_id=marker.producer_id,
                topics=[topic_cls(name=name, partitions=parts) for name, parts in topics.items()],
            )
        )
    return WriteTxnMarkersResponse(markers=results)
