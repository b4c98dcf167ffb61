"""Malformed input: Kafka's error answer where Kafka gives one, else a closed connection and one log line.

The broker keeps serving every other connection and loses nothing it accepted. Ends with a Hypothesis
fuzz over raw sockets against one running server.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from minibroker.server.codec import SUPPORTED
from tests.server.conftest import WAIT_S, RawClient, ServedThread, scenario
from tests.server.test_purgatories import fetch_request, produce_request, records

PEER = r"127\.0\.0\.1:\d+"


def metadata_ok(client: RawClient) -> bool:
    response = client.request(MetadataRequest(topics=None), MetadataResponse, 12)
    return [t.name for t in response.topics] == ["t"]


def produce_ok(server, *values: bytes) -> int:
    client = RawClient(server.port(0))
    try:
        response = client.request(produce_request(-1, 5000, *values), ProduceResponse, 9)
    finally:
        client.close()
    (part,) = response.responses[0].partition_responses
    assert part.error_code == 0
    return part.base_offset


def log_after(server, before: int, pattern: str) -> None:
    """Exactly one new log line since ``before``, matching ``pattern``."""
    deadline = time.monotonic() + WAIT_S
    while len(server.logs) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    new = server.logs[before:]
    assert len(new) == 1, new
    assert re.fullmatch(pattern, new[0]), new[0]


def closed_after(server, data: bytes, pattern: str, half_close: bool = False) -> None:
    before = len(server.logs)
    client = RawClient(server.port(0), timeout=5)
    try:
        client.send_bytes(data)
        if half_close:
            client.sock.shutdown(socket.SHUT_WR)
        assert client.closed_by_server()
    finally:
        client.close()
    log_after(server, before, pattern)


@pytest.fixture
def server(serve):
    return serve(scenario(config='"socket.request.max.bytes" = 4096'))


def test_bad_frames_close_only_their_connection(server):
    bystander = RawClient(server.port(0))
    assert produce_ok(server, b"kept-0", b"kept-1") == 0
    header = struct.pack(">hhi", 18, 0, 5)
    cases = [
        (struct.pack(">i", -1) + b"junk", rf"broker 0: {PEER}: invalid frame size -1; closing"),
        (
            struct.pack(">i", 2**31 - 1),
            rf"broker 0: {PEER}: frame of 2147483647 bytes exceeds socket.request.max.bytes \(4096\); "
            "closing",
        ),
        (
            struct.pack(">i", 0),
            rf"broker 0: {PEER}: request of 0 bytes is shorter than a request header; closing",
        ),
        (
            struct.pack(">i", 10) + struct.pack(">hhi", 1000, 0, 1) + b"\x00\x00",
            rf"broker 0: {PEER}: unknown api key 1000; closing",
        ),
        (
            struct.pack(">i", 10) + struct.pack(">hhi", 0, 13, 1) + b"\xff\xff",
            rf"broker 0: {PEER}: Produce v13 is not supported \(v3-v12\); closing",
        ),
        (
            struct.pack(">i", 11) + struct.pack(">hhi", 3, 12, 1) + b"\x00\x05a",
            rf"broker 0: {PEER}: Metadata v12 does not decode: .*; closing",
        ),
        (_frame(header + b"\x00"), rf"broker 0: {PEER}: ApiVersions v0 does not decode: .*; closing"),
    ]
    for data, pattern in cases:
        closed_after(server, data, pattern)
    # frames cut short: the server waits for the rest until the client ends its side
    closed_after(
        server,
        struct.pack(">i", 100) + b"x" * 50,
        rf"broker 0: {PEER}: the client closed the connection after 50 of a 100-byte frame; closing",
        half_close=True,
    )
    closed_after(
        server,
        b"\x00\x00",
        rf"broker 0: {PEER}: the client closed the connection after 2 of the 4 bytes of a frame size; "
        "closing",
        half_close=True,
    )
    assert len(server.logs) == len(cases) + 2
    assert metadata_ok(bystander)
    bystander.close()
    assert produce_ok(server, b"kept-2") == 2
    assert server.snapshot().partition("t-0").replica(0).high_watermark == 3


def test_a_frame_over_socket_request_max_bytes_closes_after_answering_what_came_before(server):
    client = RawClient(server.port(0))
    before = len(server.logs)
    request = produce_request(-1, 5000, b"before the big one")
    client.send(request, 9)
    client.send_bytes(struct.pack(">i", 4097) + b"x" * 4097)
    response = client.receive(ProduceResponse, 9)
    assert response.responses[0].partition_responses[0].error_code == 0
    assert client.closed_by_server()
    client.close()
    log_after(
        server,
        before,
        rf"broker 0: {PEER}: frame of 4097 bytes exceeds socket.request.max.bytes \(4096\); closing",
    )


def test_a_corrupt_crc_gets_corrupt_message_and_the_connection_stays(server):
    client = RawClient(server.port(0))
    good = produce_request(-1, 5000, b"fine")
    bad = produce_request(-1, 5000, b"broken")
    raw = bytearray(bad.topic_data[0].partition_data[0].records)
    raw[-1] ^= 0xFF
    bad.topic_data[0].partition_data[0].records = bytes(raw)
    before = len(server.logs)
    (part,) = client.request(bad, ProduceResponse, 9).responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (2, -1)  # CORRUPT_MESSAGE
    log_after(
        server,
        before,
        rf"broker 0: {PEER}: Produce to t-0: CORRUPT_MESSAGE \(batch at 0 fails its CRC32C check\)",
    )
    (part,) = client.request(good, ProduceResponse, 9).responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (0, 0)
    client.close()


def test_an_unsupported_api_versions_gets_error_35_and_our_table(server):
    client = RawClient(server.port(0))
    # ApiVersions v99 from a newer client: a v2 (flexible) header, then a body we do not parse
    body = struct.pack(">hhi", 18, 99, 41) + b"\x00\x06client\x00" + b"\x07future\x02v\x00"
    client.send_bytes(struct.pack(">i", len(body)) + body)
    response = ApiVersionsResponse.decode(client.receive_frame(), version=0, header=True)
    assert (response.header.correlation_id, response.error_code) == (41, 35)
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        s.key: (s.min_version, s.max_version) for s in SUPPORTED.values()
    }
    assert metadata_ok(client)  # the connection goes on, as in Kafka
    client.close()
    assert server.logs == []


def test_acks_0_with_an_error_closes_the_connection(server):
    client = RawClient(server.port(0))
    before = len(server.logs)
    client.send(produce_request(0, 5000, b"nowhere", topic="missing"), 9)
    assert client.closed_by_server()
    client.close()
    log_after(
        server,
        before,
        rf"broker 0: {PEER}: Produce v9: acks=0 Produce to missing-0 failed with "
        "UNKNOWN_TOPIC_OR_PARTITION; closing",
    )


def test_a_crashed_broker_drops_its_connections_and_serves_again_after_restart(serve):
    server = serve(scenario(topics='name = "t"'))  # no followers: the one parked fetch is ours
    client = RawClient(server.port(0))
    assert metadata_ok(client)
    parked = RawClient(server.port(0))
    parked.send(fetch_request(0, 30_000, 1 << 20), 12)
    server.wait_for(
        lambda: server.cluster.snapshot().broker(0).purgatories[1].num_delayed == 1, "a parked fetch"
    )
    before = len(server.logs)
    server.call(server.cluster.crash, 0)
    # like a killed process: every connection closes at once, idle or waiting, and nobody is let in
    assert parked.closed_by_server()
    assert client.closed_by_server()
    port = server.port(0)
    log_after(
        server,
        before,
        rf"broker 0: down; its listener 127\.0\.0\.1:{port} and connections are closed until it restarts "
        r"\(clients are refused meanwhile\)",
    )
    for _ in range(20):  # a client reconnecting in a loop is refused, and costs no log line
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=WAIT_S).close()
    assert len(server.logs) == before + 1
    server.call_async(server.cluster.restart, 0)
    server.wait_for(lambda: len(server.logs) == before + 2, "the listener to reopen")
    assert server.logs[-1] == f"broker 0: up again, listening on 127.0.0.1:{port}"
    fresh = RawClient(port)
    assert metadata_ok(fresh)
    for c in (client, parked, fresh):
        c.close()


# --- socket-level fuzz ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fuzzed() -> Iterator[ServedThread]:
    server = ServedThread(scenario(config='"socket.request.max.bytes" = 65536')).start()
    yield server
    server.stop()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _valid_produce() -> bytes:
    request = produce_request(-1, 5000, b"fuzz")
    request.API_VERSION = 9
    request.with_header(correlation_id=1, client_id="fuzz")
    return bytes(request.encode(header=True, framed=True))


request_headers = st.builds(
    lambda key, version, correlation, tail: struct.pack(">hhi", key, version, correlation) + tail,
    st.sampled_from([*sorted(SUPPORTED), 4, 10, 1000, -1]),
    st.integers(-1, 20),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=120),
)
chunks = st.one_of(
    st.binary(max_size=200),  # anything at all
    request_headers.map(_frame),  # well-framed requests with random bodies
    st.integers(-(2**31), 2**31 - 1).map(lambda n: struct.pack(">i", n)),  # a bare size
    st.just(_valid_produce()),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(chunks, min_size=1, max_size=6))
def test_socket_fuzz_never_hurts_the_broker(fuzzed, stream):
    with socket.create_connection(("127.0.0.1", fuzzed.port(0)), timeout=5) as sock:
        try:
            for chunk in stream:
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # whatever it answers, it must end the connection
                pass
        except TimeoutError:
            raise AssertionError("the server kept the connection open after the client's end") from None
        except OSError:  # reset, broken pipe, or already closed by the server: all fine
            pass


def test_after_the_fuzz_a_well_formed_client_works_and_accepted_records_are_intact(fuzzed):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    before = fuzzed.snapshot().partition("t-0").replica(0).high_watermark
    producer = KafkaProducer(bootstrap_servers=fuzzed.bootstrap, acks="all")
    values = [f"after-{i}".encode() for i in range(10)]
    offsets = [producer.send("t", v, partition=0).get(timeout=WAIT_S).offset for v in values]
    producer.close(timeout=WAIT_S)
    assert offsets == list(range(before, before + 10))
    consumer = KafkaConsumer(bootstrap_servers=fuzzed.bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition("t", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < before + 10 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += [(r.offset, r.value) for r in batch]
    consumer.close()
    assert [offset for offset, _ in got] == list(range(before + 10))
    assert got[before:] == list(zip(offsets, values, strict=True))
    assert all(value == b"fuzz" for _, value in got[:before])  # only the fuzz's own valid produces
    view = fuzzed.snapshot().partition("t-0")
    assert {r.log_end_offset for r in view.replicas} == {before + 10}
    assert all(line.endswith("; closing") or ": Produce to t-" in line for line in fuzzed.logs)


def test_records_helper_is_v2():
    assert records(b"x")[16] == 2
