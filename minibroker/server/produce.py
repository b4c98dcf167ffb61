"""Produce and InitProducerId.

Produce: each partition's record batches are validated (``records.py``); bad
ones answer Kafka's code for the fault (CORRUPT_MESSAGE, INVALID_RECORD, ...)
and are not sent on; before v7 an unknown compression codec fails the whole
request, as in Kafka. The rest goes to the broker as
one emulated ``ProduceRequest`` with the request's ``acks`` and ``timeout_ms``,
which becomes the DelayedProduce's delay when ``acks=-1`` has to wait for the
ISR (zero or negative: the records are appended and the answer is an immediate
REQUEST_TIMED_OUT unless the ISR already has them, as in Kafka). The answer keeps
the request's topic and partition order.

``acks=0``: the broker appends and answers nothing. As in Kafka, a partition
error that can be seen at once (corrupt records, unknown topic, not the leader)
closes the connection instead, so the producer refreshes its metadata.

InitProducerId hands out producer ids from 1000 up with epoch 0; a request
naming the current id and epoch (v3+) gets a new id too, as Kafka's coordinator
answers any non-transactional producer. Idempotence is
enforced by the partition leader as Kafka does (``broker.producer_state``): a
retried batch is answered with its first offset and not appended again, a gap
in the sequence is OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch
INVALID_PRODUCER_EPOCH. A transactional id goes to the transaction coordinator
(``transactions.py``); a transactional Produce's batches open their producer's
transaction on each partition (``broker.producer_state``).
"""

from __future__ import annotations

import struct

import attrs
from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import (
    PartitionProduceResponse,
    ProduceData,
    ProduceRequest,
    TopicPartition,
    transaction_operation,
)
from minibroker.common.messages import (
    ProduceResponse as ClusterProduceResponse,
)
from minibroker.server.acl_checks import topic_denied
from minibroker.server.authorizer import WRITE
from minibroker.server.codec import Request, frame_response
from minibroker.server.context import (
    RESPONSE_GRACE_MS,
    UNKNOWN_SERVER_ERROR,
    CloseConnection,
    Connection,
)
from minibroker.server.log_validator import (
    NO_TIMESTAMP,
    RecordValidationError,
    TopicLimits,
    check_batch_sizes,
    validate_for_log,
)
from minibroker.server.records import InvalidRecords, WholeRequest, validate_records
from minibroker.server.transactions import init_transactional_producer_id

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
RecordErrorEntry = PartitionResponse.BatchIndexAndErrorMessage


async def produce(request: Request, conn: Connection) -> ProduceResponse | bytes | None:
    body = request.body
    order = [TopicPartition(t.name, p.index) for t in body.topic_data for p in t.partition_data]
    local: dict[TopicPartition, PartitionProduceResponse] = {}
    data: dict[TopicPartition, ProduceData] = {}
    cluster = conn.cluster
    broker_config = cluster.brokers[conn.broker_id].config
    limit = broker_config.socket_request_max_bytes
    now_ms = conn.state.epoch_origin_ms + cluster.now()
    details: dict[TopicPartition, RecordValidationError] = {}
    append_times: dict[TopicPartition, int] = {}
    for topic in body.topic_data:
        limits = TopicLimits.of_topic(topic.name, cluster.topic_overrides(topic.name), broker_config)
        write_denied = topic_denied(conn, WRITE, topic.name)
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            if write_denied:  # Kafka's order: authorization, then the partition, then its records
                local[tp] = PartitionProduceResponse(Errors.TOPIC_AUTHORIZATION_FAILED)
                continue
            if not cluster.known(tp):  # Kafka's order: an unknown partition before its records are read
                local[tp] = PartitionProduceResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            try:
                if part.records:
                    check_batch_sizes(bytes(part.records), tp, limits)
                records = validate_records(part.records, request.api_version, limit)
                if records.count:
                    raw, append_time = validate_for_log(records.raw, tp, limits, now_ms)
                    if append_time != NO_TIMESTAMP:
                        append_times[tp] = append_time
                        records = attrs.evolve(records, raw=raw)
            except WholeRequest as invalid:
                conn.log(f"Produce to {tp}: {invalid.error.name} for the whole request ({invalid})")
                if body.acks == 0:
                    raise CloseConnection(
                        f"acks=0 Produce to {tp} failed with {invalid.error.name}"
                    ) from None
                return _response([(tp, None) for tp in order], error=int(invalid.error))
            except InvalidRecords as invalid:
                conn.log(f"Produce to {tp}: {invalid.error.name} ({invalid})")
                local[tp] = PartitionProduceResponse(invalid.error)
                if isinstance(invalid, RecordValidationError):
                    details[tp] = invalid
                continue
            if records.count == 0:
                local[tp] = PartitionProduceResponse(Errors.NONE)
            else:
                data[tp] = ProduceData(
                    records.count, len(records.raw), raw=records.raw, producers=records.producers
                )
    message = ProduceRequest(
        body.acks,
        body.timeout_ms,
        data,
        conn.request_id(request.correlation_id),
        body.transactional_id,
        transaction_operation(request.api_version),
    )
    if body.acks == 0:
        _check_acks_zero(conn, local, data)
        if data:
            conn.send(message)
        return None
    answered = dict(local)
    if data:
        # the DelayedProduce takes timeout_ms as it is (a negative one expires at once: REQUEST_TIMED_OUT,
        # as Kafka's timer runs an already-expired task); the connection waits at least the grace
        wait_ms = max(0, body.timeout_ms) + RESPONSE_GRACE_MS
        response: ClusterProduceResponse = await conn.call(message, wait_ms)
        answered.update(response.partitions)
    for tp, append_time in append_times.items():
        part = answered.get(tp)
        if part is not None and part.error is Errors.NONE:
            answered[tp] = attrs.evolve(part, log_append_time_ms=append_time)
    parts = [(tp, answered.get(tp)) for tp in order]
    if details:
        return _response(parts, details=details)
    return frame_response(request, encode_partitions(parts, request.api_version))


def _check_acks_zero(
    conn: Connection,
    local: dict[TopicPartition, PartitionProduceResponse],
    data: dict[TopicPartition, ProduceData],
) -> None:
    """acks=0: an error known before the append closes the connection (Kafka's way to tell the producer)."""
    for tp, part in local.items():
        if part.error is not Errors.NONE:
            raise CloseConnection(f"acks=0 Produce to {tp} failed with {part.error.name}")
    for tp in data:
        if not conn.cluster.known(tp):
            raise CloseConnection(f"acks=0 Produce to {tp} failed with UNKNOWN_TOPIC_OR_PARTITION")
        if conn.cluster.leader_of(tp) != conn.broker_id:
            raise CloseConnection(f"acks=0 Produce to {tp} failed with NOT_LEADER_OR_FOLLOWER")


_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # and the log start offset (v5+)
#: no record errors and a null error message: v8's int32 array length and int16 string length,
#: v9+'s compact lengths and an empty tagged field section
_NO_RECORD_ERRORS = {False: _INT32.pack(0) + _INT16.pack(-1), True: b"\x01\x00\x00"}


def _varint(value: int) -> bytes:
    """Kafka's unsigned varint (the lengths of flexible versions' compact arrays and strings)."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_partitions(
    parts: list[tuple[TopicPartition, PartitionProduceResponse | None]], version: int
) -> bytes:
    """ProduceResponse's body at ``version`` (3-12), written directly: what ``_response`` builds with
    kafka-python's classes and encodes, for answers without record errors (they take ``_response``).

    Partitions group under their topic in order of first appearance; a missing answer is
    UNKNOWN_SERVER_ERROR; throttle time 0; no tagged fields (v10's current leader is only sent with
    NOT_LEADER_OR_FOLLOWER, and this server leaves it out, as ``_response`` does).
    """
    flexible = version >= 9
    topics: dict[str, list[bytes]] = {}
    with_start = version >= 5
    tail = _NO_RECORD_ERRORS[flexible] if version >= 8 else b""
    for tp, part in parts:
        if part is None:
            fields = (tp.partition, UNKNOWN_SERVER_ERROR, -1, -1, -1)
        else:
            fields = (
                tp.partition,
                int(part.error),
                part.base_offset,
                part.log_append_time_ms,
                part.log_start_offset,
            )
        packed = _PARTITION_V5.pack(*fields) if with_start else _PARTITION.pack(*fields[:4])
        topics.setdefault(tp.topic, []).append(packed + tail)
    out = [_varint(len(topics) + 1) if flexible else _INT32.pack(len(topics))]
    for name, partitions in topics.items():
        encoded = name.encode()
        if flexible:
            out += [_varint(len(encoded) + 1), encoded, _varint(len(partitions) + 1), *partitions, b"\x00"]
        else:
            out += [_INT16.pack(len(encoded)), encoded, _INT32.pack(len(partitions)), *partitions]
    out.append(_INT32.pack(0))  # throttle time
    if flexible:
        out.append(b"\x00")
    return b"".join(out)


def _response(
    parts: list[tuple[TopicPartition, PartitionProduceResponse | None]],
    error: int | None = None,
    details: dict[TopicPartition, RecordValidationError] | None = None,
) -> ProduceResponse:
    topics: dict[str, list] = {}
    for tp, part in parts:
        code = error if error is not None else (part.error if part is not None else UNKNOWN_SERVER_ERROR)
        rejected = (details or {}).get(tp)
        topics.setdefault(tp.topic, []).append(
            PartitionResponse(
                index=tp.partition,
                error_code=int(code),
                base_offset=part.base_offset if part is not None and error is None else -1,
                log_append_time_ms=part.log_append_time_ms if part is not None and error is None else -1,
                log_start_offset=part.log_start_offset if part is not None and error is None else -1,
                record_errors=[
                    RecordErrorEntry(batch_index=r.batch_index, batch_index_error_message=r.message)
                    for r in (rejected.record_errors if rejected is not None else ())
                ],
                error_message=rejected.error_message if rejected is not None else None,
            )
        )
    return ProduceResponse(
        responses=[TopicResponse(name=name, partition_responses=ps) for name, ps in topics.items()],
        throttle_time_ms=0,
    )


async def init_producer_id(request: Request, conn: Connection) -> InitProducerIdResponse:
    body = request.body
    if body.transactional_id is not None:
        return await init_transactional_producer_id(request, conn)
    # no transactional id: Kafka's coordinator always hands out a fresh producer id at epoch 0, even when
    # the request names the producer's current id and epoch (v3+, KIP-360)
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=next(conn.state.producer_ids), producer_epoch=0
    )
