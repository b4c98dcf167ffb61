"""Fetch sessions (KIP-227) over a raw socket: which partitions each answer carries, and the exact errors.

The topics: t and u, one partition each, RF 3, led by broker 0. Every fetch has
max_wait 0 so it answers at once with what the log holds.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceResponse

from minibroker.server.fetch_sessions import session_figures
from tests.server.conftest import WAIT_S, RawClient, scenario
from tests.server.test_purgatories import produce_request

TOPICS = 'name = "t"\npartitions = 1\nreplication_factor = 3\n\n[[topics]]\nname = "u"\npartitions = 1'


def fetch(session_id: int, epoch: int, offsets: dict[str, int], forget: tuple[str, ...] = ()) -> FetchRequest:
    part = FetchRequest.FetchTopic.FetchPartition
    topics = [
        FetchRequest.FetchTopic(
            topic=name, partitions=[part(partition=0, fetch_offset=o, partition_max_bytes=1 << 20)]
        )
        for name, o in offsets.items()
    ]
    forgotten = [FetchRequest.ForgottenTopic(topic=name, partitions=[0]) for name in forget]
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        session_id=session_id,
        session_epoch=epoch,
        topics=topics,
        forgotten_topics_data=forgotten,
    )


def carried(response) -> dict[str, tuple[int, int, bool]]:
    """topic -> (error, high watermark, has records) of each partition the answer carries."""
    return {
        t.topic: (p.error_code, p.high_watermark, bool(p.records))
        for t in response.responses
        for p in t.partitions
    }


@pytest.fixture
def server(serve):
    return serve(scenario(config='"auto.create.topics.enable" = false', topics=TOPICS))


@pytest.fixture
def client(server):
    raw = RawClient(server.port(0))
    yield raw
    raw.close()


def ask(client: RawClient, request: FetchRequest, version: int = 12):
    return client.request(request, FetchResponse, version)


def produce(client: RawClient, topic: str, value: bytes = b"x") -> None:
    response = client.request(produce_request(-1, 5000, value, topic=topic), ProduceResponse, 9)
    (part,) = response.responses[0].partition_responses
    assert part.error_code == 0


def figures(server) -> dict[str, int]:
    return server.call(session_figures, server.served.server.state, 0)


def test_incremental_fetches_carry_only_partitions_with_news(server, client):
    produce(client, "t")
    full = ask(client, fetch(0, 0, {"t": 0, "u": 0}))
    assert full.error_code == 0 and full.session_id != 0
    assert carried(full) == {"t": (0, 1, True), "u": (0, 0, False)}  # a full answer carries everything
    session = full.session_id

    # epoch 1, nothing changed on the client's side: t is still read from offset 0, so it has records
    first = ask(client, fetch(session, 1, {}))
    assert (first.error_code, first.session_id, carried(first)) == (0, session, {"t": (0, 1, True)})
    # the client moves t to offset 1: no records, same HW -> nothing to carry
    second = ask(client, fetch(session, 2, {"t": 1}))
    assert (second.session_id, carried(second)) == (session, {})
    # a record on u: u comes back (records and a new HW), t does not
    produce(client, "u")
    third = ask(client, fetch(session, 3, {}))
    assert carried(third) == {"u": (0, 1, True)}
    assert figures(server) | {} == {
        "sessions": 1,
        "partitions_cached": 2,
        "evictions": 0,
        "full_fetches": 1,
        "incremental_fetches": 3,
        "sessionless_fetches": 0,
        "error_fetches": 0,
    }


def test_an_error_is_always_carried_and_the_partition_comes_back_when_it_clears(server, client):
    session = ask(client, fetch(0, 0, {"t": 0})).session_id
    out_of_range = ask(client, fetch(session, 1, {"t": 5}))
    assert carried(out_of_range) == {"t": (1, -1, False)}  # OFFSET_OUT_OF_RANGE
    assert carried(ask(client, fetch(session, 2, {}))) == {"t": (1, -1, False)}  # still wrong: carried again
    assert carried(ask(client, fetch(session, 3, {"t": 0}))) == {"t": (0, 0, False)}  # cleared: HW resent


def test_unknown_session_and_wrong_epoch_get_kafkas_codes_and_keep_the_session(server, client):
    unknown = ask(client, fetch(12345, 1, {"t": 0}))
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (
        70,
        0,
        [],
    )  # FETCH_SESSION_ID_NOT_FOUND
    session = ask(client, fetch(0, 0, {"t": 0})).session_id
    for wrong in (2, 7):
        stale = ask(client, fetch(session, wrong, {}))
        assert (stale.error_code, stale.session_id, stale.responses) == (
            71,
            0,
            [],
        )  # INVALID_FETCH_SESSION_EPOCH
    assert ask(client, fetch(session, 1, {})).session_id == session  # the session's epoch did not move
    assert figures(server)["error_fetches"] == 3


def test_forgotten_topics_leave_the_session_and_an_emptied_session_closes(server, client):
    session = ask(client, fetch(0, 0, {"t": 0, "u": 0})).session_id
    assert carried(ask(client, fetch(session, 1, {}, forget=("u",)))) == {}
    produce(client, "u")
    assert carried(ask(client, fetch(session, 2, {}))) == {}  # u is no longer in the session
    emptied = ask(client, fetch(session, 3, {}, forget=("t",)))
    assert (emptied.error_code, emptied.session_id, emptied.responses) == (0, 0, [])  # sessionless now
    assert ask(client, fetch(session, 4, {})).error_code == 70
    assert figures(server)["sessions"] == 0


def test_full_and_final_epoch_fetches_close_the_session_they_name(server, client):
    first = ask(client, fetch(0, 0, {"t": 0})).session_id
    second = ask(client, fetch(first, 0, {"t": 0})).session_id  # a full fetch naming a session closes it
    assert second not in (0, first)
    assert ask(client, fetch(first, 1, {})).error_code == 70
    closing = ask(client, fetch(second, -1, {"t": 0}))
    assert (closing.error_code, closing.session_id, list(carried(closing))) == (0, 0, ["t"])
    assert ask(client, fetch(second, 1, {})).error_code == 70
    assert figures(server)["sessions"] == 0


def test_before_v7_and_with_epoch_minus_one_fetches_are_sessionless(server, client):
    old = ask(client, fetch(0, 0, {"t": 0}), version=6)
    assert (old.session_id, list(carried(old))) == (0, ["t"])
    sessionless = ask(client, fetch(0, -1, {"t": 0}))
    assert (sessionless.session_id, list(carried(sessionless))) == (0, ["t"])
    assert figures(server)["sessionless_fetches"] == 2 and figures(server)["sessions"] == 0


def test_a_full_cache_answers_session_id_zero_and_a_restart_forgets_every_session(serve):
    server = serve(scenario(config='"max.incremental.fetch.session.cache.slots" = 1', topics=TOPICS))
    a, b = RawClient(server.port(0)), RawClient(server.port(0))
    try:
        session = ask(a, fetch(0, 0, {"t": 0})).session_id
        assert session != 0
        refused = ask(b, fetch(0, 0, {"t": 0, "u": 0}))  # young consumer sessions are never evicted
        assert (refused.error_code, refused.session_id, sorted(carried(refused))) == (0, 0, ["t", "u"])
        server.call(server.cluster.crash, 0)
        server.call_async(server.cluster.restart, 0)
        server.wait_for(lambda: any("up again" in line for line in server.logs), "broker 0 to listen again")
    finally:
        a.close()
        b.close()
    c = RawClient(server.port(0), timeout=WAIT_S)
    try:
        assert ask(c, fetch(session, 1, {})).error_code == 70  # a crash loses the cache
    finally:
        c.close()


def test_kafka_python_consumes_through_incremental_fetches(server):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, fetch_max_wait_ms=100)
    got: list[bytes] = []

    def consume(count: int) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value for r in records)

    try:
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek_to_beginning()
        for value in (b"a", b"b", b"c"):
            producer.send("t", value, partition=0).get(timeout=WAIT_S)
        consume(3)
        before = figures(server)
        for value in (b"d", b"e"):
            producer.send("t", value, partition=0).get(timeout=WAIT_S)
        consume(5)
        after = figures(server)
    finally:
        consumer.close()
        producer.close(timeout=WAIT_S)
    assert got == [b"a", b"b", b"c", b"d", b"e"]
    # one full fetch opened the session; the later records came through incremental fetches in it
    assert (after["sessions"], after["full_fetches"], after["error_fetches"]) == (1, 1, 0), after
    assert after["incremental_fetches"] > before["incremental_fetches"] >= 0, (before, after)
    assert after["sessionless_fetches"] == 0
    assert server.logs == []


def test_confluent_kafka_consumes_sessionless(server):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
    from confluent_kafka import TopicPartition as Partition

    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 0})
    for value in (b"a", b"b", b"c"):
        producer.produce("t", value, partition=0)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g", "fetch.wait.max.ms": 100})
    got: list[bytes] = []
    try:
        consumer.assign([Partition("t", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [b"a", b"b", b"c"]
    # librdkafka sends session id 0 and epoch -1 on every fetch: it never opens a session
    kinds = figures(server)
    assert kinds["sessionless_fetches"] >= 1
    assert (kinds["sessions"], kinds["full_fetches"], kinds["incremental_fetches"]) == (0, 0, 0)
