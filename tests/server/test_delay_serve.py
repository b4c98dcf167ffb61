"""Delayed messages through ``minibroker serve`` with kafka-python, in real time, by the header contract.

A producer writes to the level topic ``__delay_1s`` with only a ``delay.real.topic`` header; a consumer
assigned to the real topic receives the record no earlier than its due time (the record's timestamp
plus the 1 s level). Tolerance: the service maps cluster time to epoch ms by one reading of the wall
clock at start, rounded to the ms, so "no earlier" is checked to within 2 ms.
"""

from __future__ import annotations

import time

from minibroker.scenario import parse_scenario
from minibroker.server.serve import for_serving
from tests.server.conftest import WAIT_S

SCENARIO = """
[cluster]
brokers = 3

[[topics]]
name = "orders"
replication_factor = 3

[delay_service]
"delay.levels" = ["1s", "2s"]
"delay.service.poll.ms" = 100
"""


def test_kafka_python_sends_by_the_header_contract_and_receives_no_earlier_than_due(serve):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = serve(for_serving(parse_scenario(SCENARIO, "delay.toml")))
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0)
    sent_ms = int(time.time() * 1000)
    try:
        future = producer.send(
            "__delay_1s",
            key=b"order-17",
            value=b"cancel-if-unpaid",
            headers=[("delay.real.topic", b"orders"), ("trace-id", b"abc")],
            timestamp_ms=sent_ms,
        )
        assert future.get(timeout=WAIT_S).topic == "__delay_1s"
    finally:
        producer.close(timeout=WAIT_S)

    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        assert "orders" in consumer.topics() and not any(t.startswith("__delay") for t in consumer.topics())
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek_to_beginning()
        got, received_ms = [], None
        deadline = time.monotonic() + WAIT_S
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got += records
                received_ms = int(time.time() * 1000)
    finally:
        consumer.close()
    (record,) = got
    headers = dict(record.headers)
    due = sent_ms + 1_000
    assert (record.key, record.value, headers["trace-id"]) == (b"order-17", b"cancel-if-unpaid", b"abc")
    assert int(headers["delay.due.ms"]) == due
    assert headers["delay.message.id"] == b"__delay_1s-0@0"
    assert received_ms >= due - 2
    assert record.timestamp >= due - 2  # stamped when forwarded
    assert record.timestamp - due < 1_000  # and not a poll round late (the poll is 100 ms)


WHEEL_SCENARIO = """
[cluster]
brokers = 3

[[topics]]
name = "orders"
replication_factor = 3

[delay_wheel]
"delay.wheel.tick.ms" = 100
"delay.wheel.slots" = 600
"""


def test_kafka_python_sends_into_the_file_wheel_through_its_topic(serve):
    """Any due time: 1.5 s after sending, delivered within a tick (100 ms) plus the ingest's fetch.

    Tolerance on "late": 1 s, for a loaded machine (the wheel itself adds under 100 ms).
    """
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = serve(for_serving(parse_scenario(WHEEL_SCENARIO, "wheel.toml")))
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0)
    due = int(time.time() * 1000) + 1_500
    try:
        headers = [("delay.real.topic", b"orders"), ("delay.due.ms", str(due).encode())]
        producer.send("__delay_wheel", value=b"remind", headers=headers).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek_to_beginning()
        got, received_ms = [], None
        deadline = time.monotonic() + WAIT_S
        while not got and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=50).values():
                got += records
                received_ms = int(time.time() * 1000)
    finally:
        consumer.close()
    (record,) = got
    assert record.value == b"remind"
    assert dict(record.headers)["delay.message.id"] == b"__delay_wheel-0@0"
    assert received_ms >= due - 2
    assert record.timestamp >= due - 2
    assert record.timestamp - due < 1_000
