"""Compressed record batches: checked as Kafka's produce path checks them, never stored if bad.

A batch whose attributes claim a codec it does not use is refused, never stored with error 0 (consumers
could not read past it). Unit tests on ``validate_records`` with forged batches, then over the wire: raw
requests for the exact codes, and kafka-python producing with every codec.
"""

from __future__ import annotations

import struct

import pytest
from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.util import calc_crc32c

from minibroker.common.errors import Errors
from minibroker.server.records import HEADER_SIZE, InvalidRecords, WholeRequest, validate_records
from tests.server.conftest import WAIT_S, RawClient, scenario
from tests.server.test_records import batch, read_back
from tests.server.test_robustness import PEER, log_after

ENCODERS = {1: gzip_encode, 2: snappy_encode, 3: lz4_encode, 4: zstd_encode}
NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
VALUES = [b"alpha", b"beta", b"gamma"]


def forge(codec: int, payload: bytes | None = None, values: list[bytes] = VALUES) -> bytes:
    """A batch of ``values`` whose attributes name ``codec`` and whose records are ``payload``
    (default: the plain records compressed with ``codec``), with a correct length and CRC."""
    plain = batch(values)
    records = plain[HEADER_SIZE:]
    if payload is None:
        payload = ENCODERS[codec](records)
    out = bytearray(plain[:HEADER_SIZE] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    (attributes,) = struct.unpack_from(">h", out, 21)
    struct.pack_into(">h", out, 21, (attributes & ~0x07) | codec)
    struct.pack_into(">I", out, 17, calc_crc32c(memoryview(out)[21:]))
    return bytes(out)


def rejected(raw: bytes, version: int = 9, limit: int = 1 << 20) -> InvalidRecords:
    with pytest.raises(InvalidRecords) as failure:
        validate_records(raw, version, limit)
    return failure.value


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=NAMES.values())
def test_every_kafka_codec_is_decompressed_checked_and_kept_as_sent(codec):
    raw = forge(codec)
    produced = validate_records(raw, 9, 1 << 20)
    assert (produced.count, produced.raw) == (3, raw)
    assert [value for _, _, value in read_back(raw)] == VALUES


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_id_kafka_does_not_know_is_unknown_server_error(codec):
    failure = rejected(forge(codec, payload=batch(VALUES)[HEADER_SIZE:]))
    assert (failure.error, str(failure)) == (
        Errors.UNKNOWN_SERVER_ERROR,
        f"batch at 0 names compression codec {codec}; Kafka's codecs are 0-4",
    )
    assert not isinstance(failure, WholeRequest)
    # before Produce v7 Kafka reads the codec while checking for zstd, and the whole request fails
    assert isinstance(rejected(forge(codec, payload=b"x"), version=6), WholeRequest)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=NAMES.values())
def test_bytes_that_do_not_decompress_are_unknown_server_error(codec):
    for payload in (
        b"this is no compressed stream at all",
        ENCODERS[codec](batch(VALUES)[HEADER_SIZE:])[:-3],
    ):
        failure = rejected(forge(codec, payload=payload))
        assert failure.error is Errors.UNKNOWN_SERVER_ERROR
        assert str(failure).startswith(f"batch at 0: its {NAMES[codec]} bytes do not decompress (")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=NAMES.values())
def test_records_that_do_not_parse_after_decompression_are_invalid_record(codec):
    records = batch(VALUES)[HEADER_SIZE:]
    for damaged in (records[:-2], records + b"\x00", b"\x7f" * 40):
        failure = rejected(forge(codec, payload=ENCODERS[codec](damaged)))
        assert failure.error is Errors.INVALID_RECORD
        assert str(failure).startswith(f"batch at 0: its {NAMES[codec]} records do not parse (")


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=NAMES.values())
def test_a_decompression_bomb_stops_at_the_limit(codec):
    bomb = ENCODERS[codec](bytes(4 << 20))  # 4 MiB of zeros: a few kilobytes compressed
    assert len(bomb) < 256 << 10
    failure = rejected(forge(codec, payload=bomb), limit=1 << 20)
    assert (failure.error, str(failure)) == (
        Errors.RECORD_TOO_LARGE,
        f"batch at 0: its {NAMES[codec]} bytes decompress to more than 1048576 bytes",
    )


def test_zstd_needs_produce_v7():
    failure = rejected(forge(4), version=6)
    assert (failure.error, str(failure)) == (
        Errors.UNSUPPORTED_COMPRESSION_TYPE,
        "batch at 0 uses zstd, which Produce v6 may not carry (v7+)",
    )
    assert validate_records(forge(4), 7).count == 3


# --- over the wire ---------------------------------------------------------------------------------------
def produce(raws: list[bytes], acks: int = -1) -> ProduceRequest:
    parts = [
        ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=r) for i, r in enumerate(raws)
    ]
    data = [ProduceRequest.TopicProduceData(name="t", partition_data=parts)]
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=data)


@pytest.fixture
def server(serve):
    both_on_0 = 'name = "t"\npartitions = 2\nreplication_factor = 1\nassignment = [[0], [0]]'
    return serve(scenario(topics=both_on_0))


def test_a_lying_codec_is_refused_and_never_stored(server):
    client = RawClient(server.port(0))
    before = len(server.logs)
    lying = forge(5, payload=batch(VALUES)[HEADER_SIZE:])
    response = client.request(produce([lying, forge(1)]), ProduceResponse, 9)
    parts = response.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, -1, -1), (1, 0, 0)]
    log_after(
        server,
        before,
        rf"broker 0: {PEER}: Produce to t-0: UNKNOWN_SERVER_ERROR \(batch at 0 names compression codec 5; "
        r"Kafka's codecs are 0-4\)",
    )
    view = server.snapshot()
    assert (
        view.partition("t-0").replica(0).log_end_offset,
        view.partition("t-1").replica(0).log_end_offset,
    ) == (
        0,
        3,
    )
    # before v7: the whole request fails, nothing of it is stored, and the connection goes on
    response = client.request(produce([forge(1), lying]), ProduceResponse, 6)
    parts = response.responses[0].partition_responses
    assert [(p.index, p.error_code) for p in parts] == [(0, -1), (1, -1)]
    assert server.snapshot().partition("t-0").replica(0).log_end_offset == 0
    response = client.request(produce([forge(4), forge(2)]), ProduceResponse, 6)
    parts = response.responses[0].partition_responses
    assert [(p.index, p.error_code, p.base_offset) for p in parts] == [(0, 76, -1), (1, 0, 3)]
    client.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_produces_and_consumes_with_every_codec(serve, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = serve(scenario(topics='name = "t"\npartitions = 1\nreplication_factor = 1'))
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap, acks="all", compression_type=codec, linger_ms=5
    )
    values = [f"{codec}-{i}".encode() * 20 for i in range(20)]
    futures = [producer.send("t", v, partition=0) for v in values]
    offsets = [f.get(timeout=WAIT_S).offset for f in futures]
    producer.close(timeout=WAIT_S)
    assert offsets == list(range(20))
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition("t", 0)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
        if len(got) >= 20:
            break
    consumer.close()
    assert got == values
    assert server.logs == []
