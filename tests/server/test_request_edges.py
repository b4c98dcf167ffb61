"""Request edge cases a fuzzer reaches: null arrays, a negative produce timeout.

Unit tests on the decoder, then each case against a served cluster on loopback (real time; every wait is
bounded by ``WAIT_S``).
"""

from __future__ import annotations

import struct

import pytest
import trio
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from minibroker.server.codec import MalformedRequest, decode_request
from minibroker.server.context import ServerState
from tests.server.conftest import RawClient, scenario
from tests.server.test_purgatories import produce_request
from tests.server.test_robustness import PEER, closed_after

CLIENT = struct.pack(">h", 3) + b"raw"


def produce_v8(topics: bytes) -> bytes:
    """A Produce v8 frame payload (non-flexible): no transactional id, acks -1, timeout 5000."""
    return struct.pack(">hhi", 0, 8, 7) + CLIENT + struct.pack(">hhi", -1, -1, 5000) + topics


def fetch_v12_null_topics() -> bytes:
    """A Fetch v12 frame payload (flexible): its topics are a compact array of length 0, i.e. null."""
    header = struct.pack(">hhi", 1, 12, 7) + CLIENT + b"\x00"
    body = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
    return header + body + b"\x00" + b"\x01" + b"\x01" + b"\x00"


NULL_TOPICS = produce_v8(struct.pack(">i", -1))
NULL_PARTITIONS = produce_v8(struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (NULL_TOPICS, "Produce v8 does not decode: non-nullable field topic_data was serialized as null"),
        (
            NULL_PARTITIONS,
            "Produce v8 does not decode: non-nullable field topic_data[0].partition_data was serialized "
            "as null",
        ),
        (
            fetch_v12_null_topics(),
            "Fetch v12 does not decode: non-nullable field topics was serialized as null",
        ),
    ],
    ids=["produce-topics", "produce-partitions", "fetch-compact-topics"],
)
def test_a_null_non_nullable_array_is_a_malformed_request(payload, message):
    with pytest.raises(MalformedRequest) as raised:
        decode_request(payload)
    assert str(raised.value) == message
    assert raised.value.correlation_id == 7


def test_nullable_fields_may_be_null():
    # Metadata v12's topics is nullable (null: every topic); a null transactional id is the norm
    header = struct.pack(">hhi", 3, 12, 9) + CLIENT + b"\x00"
    request = decode_request(header + b"\x00" + b"\x00" + b"\x00" + b"\x00")
    assert request.body.topics is None
    empty = decode_request(produce_v8(struct.pack(">i", 0)))
    assert (empty.body.transactional_id, empty.body.topic_data) == (None, [])


@pytest.fixture
def server(serve):
    return serve(scenario())


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_a_null_array_closes_the_connection_with_kafkas_reason_not_an_internal_error(server):
    for payload, what in [
        (NULL_TOPICS, r"Produce v8 does not decode: non-nullable field topic_data was serialized as null"),
        (
            fetch_v12_null_topics(),
            r"Fetch v12 does not decode: non-nullable field topics was serialized as null",
        ),
    ]:
        closed_after(server, frame(payload), rf"broker 0: {PEER}: {what}; closing")
    assert not any("internal error" in line for line in server.logs)


def test_a_negative_produce_timeout_appends_and_answers_request_timed_out_at_once(server):
    client = RawClient(server.port(0))
    request = produce_request(-1, -(2**31), b"hurry")
    (part,) = client.request(request, ProduceResponse, 9).responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (7, 0)  # REQUEST_TIMED_OUT; appended at offset 0
    # the connection goes on, and the record replicates as any other
    response = client.request(MetadataRequest(topics=None), MetadataResponse, 12)
    assert [t.name for t in response.topics] == ["t"]
    server.wait_for(lambda: server.cluster.snapshot().partition("t-0").replica(0).high_watermark == 1, "HW 1")
    client.close()
    assert server.logs == []


def test_auto_creation_stops_at_its_bound_and_answers_unknown_topic_after(serve):
    server = serve(scenario(config='"minibroker.auto.create.topics.max" = 3'))
    client = RawClient(server.port(0))
    names = [f"fuzz-{i}" for i in range(6)]
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names])
    response = client.request(request, MetadataResponse, 12)
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("fuzz-0", 5, 0),  # LEADER_NOT_AVAILABLE: created by this request, as Kafka answers
        ("fuzz-1", 5, 0),
        ("fuzz-2", 5, 0),
        ("fuzz-3", 3, 0),  # UNKNOWN_TOPIC_OR_PARTITION, as with auto.create.topics.enable=false
        ("fuzz-4", 3, 0),
        ("fuzz-5", 3, 0),
    ]
    again = client.request(request, MetadataResponse, 12)  # the created ones stay, the rest stay out
    assert [t.error_code for t in again.topics] == [0, 0, 0, 3, 3, 3]
    client.close()
    assert sorted(server.cluster.topics) == ["fuzz-0", "fuzz-1", "fuzz-2", "t"]
    refusals = [line for line in server.logs if "not auto-creating" in line]
    assert refusals == [
        f"broker 0: {server.logs[-1].split(': ')[1]}: Metadata: not auto-creating 'fuzz-3': 3 topics were "
        "auto-created, the most minibroker.auto.create.topics.max allows; answering "
        "UNKNOWN_TOPIC_OR_PARTITION (further refusals are counted, not logged)"
    ]
    assert server.served.server.state.auto_create_refusals == 6


async def test_a_repeated_log_line_goes_out_once_a_second_with_the_count_held_back(autojump_clock):
    lines: list[str] = []
    state = ServerState(None, {}, 0, lines.append)  # the limiter needs nothing of the cluster
    key = (0, "broker 0 is down")
    written = []
    for _ in range(24):  # a client reconnecting every 125 ms for 3 s
        written.append(state.log_limited(key, "x: broker 0 is down; closing"))
        await trio.sleep(0.125)
    assert written == ([True] + [False] * 7) * 3
    assert lines == [
        "x: broker 0 is down; closing",
        "x: broker 0 is down; closing (7 more like this in the last 1.0 s were not logged)",
        "x: broker 0 is down; closing (7 more like this in the last 1.0 s were not logged)",
    ]
    assert state.log_limited((1, "other"), "y") and lines[-1] == "y"  # keys are independent
