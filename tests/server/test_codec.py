"""Request decoding: every supported API and version round-trips; any bytes fail only as RequestError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from minibroker.server.codec import (
    SUPPORTED,
    MalformedRequest,
    Request,
    RequestError,
    UnknownApiKey,
    UnsupportedVersion,
    api_versions_body,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)


def _encode(request, version: int, correlation: int = 7) -> bytes:
    request.API_VERSION = version
    request.with_header(correlation_id=correlation, client_id="test")
    return bytes(request.encode(header=True))


def _produce() -> ProduceRequest:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"x" * 70)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1500,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[part])],
    )


def _fetch() -> FetchRequest:
    part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1024)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        topics=[FetchRequest.FetchTopic(topic="t", partitions=[part])],
    )


def test_the_table_advertises_each_api_at_its_version_range():
    assert {s.name: (s.min_version, s.max_version) for s in SUPPORTED.values()} == {
        "Produce": (3, 12),
        "Fetch": (4, 12),
        "ListOffsets": (1, 9),
        "Metadata": (0, 12),
        "ApiVersions": (0, 4),
        "InitProducerId": (0, 4),
        "FindCoordinator": (0, 4),
        "JoinGroup": (0, 9),
        "SyncGroup": (0, 5),
        "Heartbeat": (0, 4),
        "LeaveGroup": (0, 5),
        "OffsetCommit": (2, 10),
        "OffsetFetch": (1, 10),
        "DescribeGroups": (0, 5),
        "ListGroups": (0, 5),
        "DeleteGroups": (0, 2),
        "OffsetForLeaderEpoch": (2, 4),
        # the transaction coordinator, transaction protocol version 1
        "AddPartitionsToTxn": (0, 5),
        "AddOffsetsToTxn": (0, 4),
        "EndTxn": (0, 5),
        "TxnOffsetCommit": (0, 5),
        "WriteTxnMarkers": (1, 1),
        "DescribeProducers": (0, 0),
        "DescribeTransactions": (0, 0),
        "ListTransactions": (0, 1),
        # the admin APIs at Kafka 4's version ranges
        "CreateTopics": (2, 7),
        "DeleteTopics": (1, 6),
        "DeleteRecords": (0, 2),
        "DescribeConfigs": (1, 4),
        "CreatePartitions": (0, 3),
        "ElectLeaders": (0, 2),
        "IncrementalAlterConfigs": (0, 1),
        "DescribeCluster": (0, 2),
        "ShareGroupHeartbeat": (1, 1),
        "ShareGroupDescribe": (1, 1),
        "ShareFetch": (1, 1),
        "ShareAcknowledge": (1, 1),
        "DescribeShareGroupOffsets": (0, 0),
        "AlterShareGroupOffsets": (0, 0),
        "DeleteShareGroupOffsets": (0, 0),
        "AlterConfigs": (0, 2),
        "DescribeAcls": (1, 3),
        "CreateAcls": (1, 3),
        "DeleteAcls": (1, 3),
        "DescribeLogDirs": (1, 4),
        "AlterReplicaLogDirs": (1, 2),
        "DescribeQuorum": (0, 2),
        "DescribeTopicPartitions": (0, 0),
        "OffsetDelete": (0, 0),
        "ConsumerGroupHeartbeat": (0, 1),
        "ConsumerGroupDescribe": (0, 1),
        "AlterPartitionReassignments": (0, 1),
        "ListPartitionReassignments": (0, 0),
        "DescribeUserScramCredentials": (0, 0),
        "AlterUserScramCredentials": (0, 0),
    }


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_round_trips_at_every_supported_version(version):
    request = decode_request(_encode(_produce(), version))
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        0,
        version,
        7,
        "test",
    )
    assert request.body.acks == -1 and request.body.timeout_ms == 1500
    assert request.body.topic_data[0].partition_data[0].records == b"x" * 70


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_round_trips_at_every_supported_version(version):
    body = decode_request(_encode(_fetch(), version)).body
    assert (body.max_wait_ms, body.min_bytes) == (500, 1)
    assert body.topics[0].partitions[0].fetch_offset == 5


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_round_trips_at_every_supported_version(version):
    topics = [MetadataRequest.MetadataRequestTopic(name="t")]
    body = decode_request(_encode(MetadataRequest(topics=topics), version)).body
    assert [t.name for t in body.topics] == ["t"]


def test_unknown_key_and_unsupported_versions_are_told_apart():
    with pytest.raises(UnknownApiKey) as unknown:
        decode_request(struct.pack(">hhi", 1000, 0, 42) + b"\xff\xff")
    assert (unknown.value.api_key, unknown.value.correlation_id) == (1000, 42)
    with pytest.raises(UnsupportedVersion, match=r"Produce v13 is not supported \(v3-v12\)"):
        decode_request(struct.pack(">hhi", 0, 13, 1))
    with pytest.raises(UnsupportedVersion):
        decode_request(_encode(ListOffsetsRequest(replica_id=-1, topics=[]), 10))
    with pytest.raises(MalformedRequest, match="shorter than a request header"):
        decode_request(b"\x00\x03\x00")


def test_a_truncated_request_is_malformed_at_every_cut():
    data = _encode(_produce(), 9)
    for cut in range(8, len(data)):
        with pytest.raises(MalformedRequest):
            decode_request(data[:cut])


def test_unsupported_api_versions_answer_is_v0_with_error_35_and_our_table():
    frame = unsupported_api_versions_response(correlation_id=9)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    response = ApiVersionsResponse.decode(frame[4:], version=0, header=True)
    assert response.header.correlation_id == 9
    assert response.error_code == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        s.key: (s.min_version, s.max_version) for s in SUPPORTED.values()
    }


def test_api_versions_v3_finalizes_transaction_version_2_as_kafka_4_0_does():
    frame = encode_response(Request(18, 3, 5, None, None), api_versions_body(3))
    response = ApiVersionsResponse.decode(frame[4:], version=3, header=True)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 0, 2)
    ]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2)
    ]
    assert response.finalized_features_epoch == 0


def test_api_versions_v3_request_carries_the_client_software():
    request = ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0.12")
    body = decode_request(_encode(request, 3)).body
    assert (body.client_software_name, body.client_software_version) == ("kafka-python", "3.0.12")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_fail_as_request_error(data):
    try:
        request = decode_request(data)
    except RequestError:
        return
    assert isinstance(request, Request) and request.api_key in SUPPORTED


header_fields = st.tuples(
    st.sampled_from(sorted(SUPPORTED)), st.integers(0, 14), st.integers(-(2**31), 2**31 - 1)
)


@settings(max_examples=400, deadline=None)
@given(header_fields, st.binary(max_size=200))
def test_known_headers_with_random_bodies_decode_or_fail_as_request_error(fields, tail):
    try:
        decode_request(struct.pack(">hhi", *fields) + tail)
    except RequestError as error:
        assert error.correlation_id == fields[2]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 200), st.integers(0, 255), st.sampled_from([(_produce, 3), (_produce, 9), (_fetch, 12)])
)
def test_a_valid_request_with_one_byte_changed_decodes_or_fails_as_request_error(position, value, made):
    make, version = made
    data = bytearray(_encode(make(), version))
    data[position % len(data)] = value
    with contextlib.suppress(RequestError):
        decode_request(bytes(data))


# --- headers and bodies written directly: the same bytes kafka-python writes ------------------------


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_answers_written_directly_are_kafka_pythons_bytes(version):
    from minibroker.common.errors import Errors
    from minibroker.common.messages import PartitionProduceResponse, TopicPartition
    from minibroker.server.codec import frame_response
    from minibroker.server.produce import _response, encode_partitions

    parts = [
        (TopicPartition("bench", 0), PartitionProduceResponse(Errors.NONE, 5, -1, 0)),
        (TopicPartition("ü-topic", 3), PartitionProduceResponse(Errors.NOT_LEADER_OR_FOLLOWER)),
        (TopicPartition("bench", 2), PartitionProduceResponse(Errors.NONE, 2**40, 1_700_000_000_000, 7)),
        (TopicPartition("bench", 1), None),  # no answer: UNKNOWN_SERVER_ERROR
    ]
    request = Request(0, version, 12345, "c", None)
    expected = encode_response(request, _response(parts))
    assert frame_response(request, encode_partitions(parts, version)) == expected
    assert frame_response(request, encode_partitions([], version)) == encode_response(request, _response([]))


def test_request_headers_read_directly_match_kafka_pythons_reading():
    for version in (3, 9, 12):
        for client_id in ("rdkafka", "", None, "é" * 40):
            request = ProduceRequest(acks=-1, timeout_ms=100, topic_data=[], transactional_id=None)
            request.with_header(correlation_id=77, client_id=client_id)
            frame = bytes(request.encode(version=version, header=True))
            decoded = decode_request(frame)
            assert (decoded.correlation_id, decoded.client_id, decoded.body.timeout_ms) == (
                77,
                client_id,
                100,
            )
