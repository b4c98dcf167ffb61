"""The application tests docs/testing.md shows, run as written (kafka-python and confluent-kafka).

Real time on loopback: each wait is bounded by ``WAIT_S`` and finishes far sooner.
"""

from __future__ import annotations

import time

WAIT_S = 15.0


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def replicated(cluster, topic: str, records: int) -> bool:
    return all(r["log_end_offset"] == records for r in cluster.partition(topic, 0)["replicas"])


# --- 1. the producer retries through a leader failover without duplicates -------------------------------
def test_kafka_python_producer_retries_through_a_leader_failover_without_duplicates(minibroker_factory):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster = minibroker_factory(3, topics=["orders:1:3"])
    leader = cluster.partition("orders", 0)["leader"]
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", enable_idempotence=True)
    try:
        producer.send("orders", b"order-1", partition=0).get(timeout=WAIT_S)
        # the leader's answer will take 1.5 s to come back: crash it after it appended and replicated
        cluster.set_client_latency(leader, 1500)
        pending = producer.send("orders", b"order-2", partition=0)
        wait_until(lambda: replicated(cluster, "orders", 2), "order-2 on every replica")
        cluster.crash(leader)
        assert pending.get(timeout=WAIT_S).offset == 1  # the retry was recognised by the new leader
    finally:
        producer.close(timeout=WAIT_S)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    consumer.assign([TopicPartition("orders", 0)])
    consumer.seek_to_beginning()
    values = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < 2 and time.monotonic() < deadline:
        values += [r.value for records in consumer.poll(timeout_ms=200).values() for r in records]
    consumer.close()
    assert values == [b"order-1", b"order-2"]
    assert cluster.partition("orders", 0)["leader"] != leader


def test_confluent_kafka_producer_retries_through_a_leader_failover_without_duplicates(minibroker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster = minibroker_factory(3, topics=["orders:1:3"])
    leader = cluster.partition("orders", 0)["leader"]
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "acks": "all"}
    )
    offsets = []
    producer.produce(
        "orders", b"order-1", partition=0, on_delivery=lambda e, m: offsets.append((e, m.offset()))
    )
    producer.flush(WAIT_S)
    cluster.set_client_latency(leader, 1500)
    producer.produce(
        "orders", b"order-2", partition=0, on_delivery=lambda e, m: offsets.append((e, m.offset()))
    )
    producer.poll(0)
    wait_until(lambda: replicated(cluster, "orders", 2), "order-2 on every replica")
    cluster.crash(leader)
    producer.flush(WAIT_S)
    assert offsets == [(None, 0), (None, 1)]
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "audit", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("orders", 0, 0)])
    values = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [b"order-1", b"order-2"]


# --- 2. the consumer survives NOT_LEADER_OR_FOLLOWER ----------------------------------------------------
def read_six(poll, produce_more) -> list[bytes]:
    """Poll until six values arrive; once the first three are in, three more are produced (once)."""
    values: list[bytes] = []
    produced = False
    deadline = time.monotonic() + WAIT_S
    while len(values) < 6 and time.monotonic() < deadline:
        if len(values) >= 3 and not produced:
            produce_more()
            produced = True
        values += poll()
    return values


def metadata_refreshed(cluster, before: int, poll) -> bool:
    """Whether the client sent a Metadata request after the first ``before``: polled until it did or
    WAIT_S passed. A client sends the refresh a fetch error asks for on its own schedule (kafka-python
    from a background loop), so it may come after the data it was reading has arrived."""
    deadline = time.monotonic() + WAIT_S
    while cluster.requests().get("Metadata", 0) <= before and time.monotonic() < deadline:
        poll()
    return cluster.requests().get("Metadata", 0) > before


def test_kafka_python_consumer_survives_not_leader_or_follower(minibroker_factory):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster = minibroker_factory(3, topics=["events:1:3"])
    leader = cluster.partition("events", 0)["leader"]
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    try:
        for i in range(3):
            producer.send("events", b"e%d" % i, partition=0)
        producer.flush(WAIT_S)
        consumer.assign([TopicPartition("events", 0)])
        consumer.seek_to_beginning()
        # the leader's next three fetches of events-0 answer NOT_LEADER_OR_FOLLOWER
        cluster.push_errors(
            "fetch", ["NOT_LEADER_OR_FOLLOWER"] * 3, broker=leader, topic="events", partition=0
        )
        metadata_before = cluster.requests().get("Metadata", 0)

        def produce_more() -> None:
            for i in range(3, 6):
                producer.send("events", b"e%d" % i, partition=0)
            producer.flush(WAIT_S)

        values = read_six(
            lambda: [r.value for records in consumer.poll(timeout_ms=200).values() for r in records],
            produce_more,
        )
        refreshed = metadata_refreshed(cluster, metadata_before, lambda: consumer.poll(timeout_ms=100))
    finally:
        producer.close(timeout=WAIT_S)
        consumer.close()
    assert values == [b"e%d" % i for i in range(6)]
    assert cluster.pending_errors(leader) == {}  # all three errors were handed out
    assert refreshed  # the consumer refreshed its metadata


def test_confluent_kafka_consumer_survives_not_leader_or_follower(minibroker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster = minibroker_factory(3, topics=["events:1:3"])
    leader = cluster.partition("events", 0)["leader"]
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "audit", "enable.auto.commit": False}
    )
    for i in range(3):
        producer.produce("events", b"e%d" % i, partition=0)
    producer.flush(WAIT_S)
    consumer.assign([TopicPartition("events", 0, 0)])
    cluster.push_errors("fetch", ["NOT_LEADER_OR_FOLLOWER"] * 3, broker=leader, topic="events", partition=0)
    metadata_before = cluster.requests().get("Metadata", 0)

    def produce_more() -> None:
        for i in range(3, 6):
            producer.produce("events", b"e%d" % i, partition=0)
        producer.flush(WAIT_S)

    def poll() -> list[bytes]:
        message = consumer.poll(0.2)
        return [message.value()] if message is not None and message.error() is None else []

    values = read_six(poll, produce_more)
    refreshed = metadata_refreshed(cluster, metadata_before, poll)
    consumer.close()
    assert values == [b"e%d" % i for i in range(6)]
    assert cluster.pending_errors(leader) == {}
    assert refreshed
