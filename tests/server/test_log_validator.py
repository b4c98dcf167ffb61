"""The log's checks on produced records (``server.log_validator``): exact codes, messages, record errors."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CkProducer
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minibroker.broker.config import BrokerConfig
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.server.log_validator import TopicLimits, check_batch_sizes, validate_for_log
from minibroker.server.records import InvalidRecords
from tests.server.conftest import WAIT_S, RawClient, scenario

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def batch(*records: tuple[bytes | None, bytes, int | None], compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 24)
    for key, value, timestamp in records:
        builder.append(timestamp=timestamp, key=key, value=value)
    builder.close()
    return bytes(builder.buffer())


def limits(**overrides: str) -> TopicLimits:
    return TopicLimits.of(overrides, BrokerConfig())


def test_kafka_defaults_and_the_broker_fallback():
    assert limits() == TopicLimits(1_048_588, 1_073_741_824, False, False, 2**63 - 1, 3_600_000)
    small = BrokerConfig(message_max_bytes=500)
    assert TopicLimits.of({}, small).max_message_bytes == 500
    assert TopicLimits.of({"max.message.bytes": "900"}, small).max_message_bytes == 900


def test_the_limits_kept_per_topic_follow_its_overrides_and_the_broker_config():
    config = BrokerConfig(message_max_bytes=500)
    overrides = {"max.message.bytes": "900"}
    first = TopicLimits.of_topic("kept", overrides, config)
    assert first == TopicLimits.of(overrides, config)
    assert TopicLimits.of_topic("kept", dict(overrides), config) is first
    overrides["max.message.bytes"] = "800"  # changed in place: not the remembered overrides any more
    assert TopicLimits.of_topic("kept", overrides, config).max_message_bytes == 800
    assert TopicLimits.of_topic("kept", {}, config).max_message_bytes == 500
    assert TopicLimits.of_topic("kept", {}, BrokerConfig(message_max_bytes=700)).max_message_bytes == 700


def test_a_batch_past_max_message_bytes_is_message_too_large():
    raw = batch((b"k", bytes(2000), NOW))
    check_batch_sizes(raw, TP, limits(**{"max.message.bytes": str(len(raw))}))
    with pytest.raises(InvalidRecords) as refused:
        check_batch_sizes(raw, TP, limits(**{"max.message.bytes": str(len(raw) - 1)}))
    assert refused.value.error is Errors.MESSAGE_TOO_LARGE == 10
    assert str(refused.value) == (
        f"The record batch size in the append to t-0 is {len(raw)} bytes which exceeds the maximum "
        f"configured value of {len(raw) - 1}."
    )


def test_records_past_segment_bytes_are_record_list_too_large():
    raw = batch((b"k", bytes(100), NOW))
    with pytest.raises(InvalidRecords) as refused:
        validate_for_log(raw, TP, limits(**{"segment.bytes": "100"}), NOW)
    assert refused.value.error is Errors.RECORD_LIST_TOO_LARGE == 18


@pytest.mark.parametrize("compression", [0, 1])
def test_keyless_records_on_a_compacted_topic_are_named_one_by_one(compression):
    raw = batch(
        (b"a", b"1", NOW), (None, b"2", NOW), (b"c", b"3", NOW), (None, b"4", NOW), compression=compression
    )
    with pytest.raises(InvalidRecords) as refused:
        validate_for_log(raw, TP, limits(**{"cleanup.policy": "compact,delete"}), NOW)
    error = refused.value
    message = "Compacted topic cannot accept message without key in topic partition t-0."
    assert error.error is Errors.INVALID_RECORD
    assert [(r.batch_index, r.message) for r in error.record_errors] == [(1, message), (3, message)]
    assert error.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=3, message='{message}')]"
    )


def test_timestamps_outside_the_bounds_are_invalid_timestamp():
    bounds = limits(**{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"})
    raw = batch(
        (b"a", b"1", NOW - 1000), (b"b", b"2", NOW - 1001), (b"c", b"3", NOW + 500), (b"d", b"4", NOW + 501)
    )
    with pytest.raises(InvalidRecords) as refused:
        validate_for_log(raw, TP, bounds, NOW)
    error = refused.value
    assert error.error is Errors.INVALID_TIMESTAMP == 32
    assert error.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [r.batch_index for r in error.record_errors] == [1, 3]
    assert error.record_errors[0].message == (
        f"Timestamp {NOW - 1001} of message with offset 1 is out of range. The timestamp should be within "
        f"[{NOW - 1000}, {NOW + 500}]"
    )
    # the default after.max.ms (one hour) applies without a before bound too
    with pytest.raises(InvalidRecords):
        validate_for_log(batch((b"a", b"1", NOW + 3_600_001)), TP, limits(), NOW)
    assert validate_for_log(batch((b"a", b"1", 0)), TP, limits(), NOW)[1] == -1


def test_log_append_time_stamps_every_batch_with_the_broker_clock():
    raw = batch((b"a", b"1", 5), (b"b", b"2", 6))
    stamped, append_time = validate_for_log(
        raw, TP, limits(**{"message.timestamp.type": "LogAppendTime"}), NOW
    )
    assert append_time == NOW
    out = DefaultRecordBatch(stamped)
    assert out.validate_crc() and out.timestamp_type == 1 and out.max_timestamp == NOW
    assert [r.timestamp for r in out] == [NOW, NOW]


@pytest.fixture
def server(serve):
    return serve(scenario(brokers=1, topics='name = "t"\npartitions = 1\nreplication_factor = 1'))


def produce(client: RawClient, raw: bytes, topic: str = "t", partition: int = 0):
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=raw)
    data = [ProduceRequest.TopicProduceData(name=topic, partition_data=[part])]
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=data)
    return client.request(request, ProduceResponse, 9).responses[0].partition_responses[0]


def test_the_wire_answers_record_errors_and_log_append_time(server):
    server.call(server.cluster.set_topic_configs, "t", {"cleanup.policy": "compact"})
    client = RawClient(server.port(0))
    try:
        refused = produce(client, batch((b"a", b"1", None), (None, b"2", None)))
        assert refused.error_code == Errors.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
            (1, "Compacted topic cannot accept message without key in topic partition t-0.")
        ]
        assert refused.error_message.startswith("One or more records have been rejected due to 1 record")
        server.call(server.cluster.set_topic_configs, "t", {"message.timestamp.type": "LogAppendTime"})
        before = time.time() * 1000
        stamped = produce(client, batch((None, b"x", 1)))
        assert (stamped.error_code, stamped.base_offset) == (0, 0)
        assert before - 1000 <= stamped.log_append_time_ms <= time.time() * 1000 + 1000
        # a partition that does not exist answers UNKNOWN_TOPIC_OR_PARTITION before its records are read
        assert produce(client, b"\x00" * 70, partition=5).error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        client.close()


def test_confluent_kafka_gets_message_too_large_for_an_oversized_record(server):
    server.call(server.cluster.set_topic_configs, "t", {"max.message.bytes": "10000"})
    producer = CkProducer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    results = []
    for size in (20_000, 5_000):  # one batch each
        producer.produce("t", bytes(size), on_delivery=lambda error, message: results.append(error))
        producer.flush(WAIT_S)
    assert [e.code() if e is not None else None for e in results] == [KafkaError.MSG_SIZE_TOO_LARGE, None]


def test_confluent_kafka_lists_the_max_timestamp_offset(server):
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, OffsetSpec

    producer = CkProducer({"bootstrap.servers": server.bootstrap})
    now = int(time.time() * 1000)
    for value, stamp in ((b"a", now - 3000), (b"b", now - 1000), (b"c", now - 2000)):
        producer.produce("t", value, timestamp=stamp)
        producer.flush(WAIT_S)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    tp = CkTP("t", 0)
    answer = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(WAIT_S)
    assert (answer.offset, answer.timestamp) == (1, now - 1000)
