"""Cluster faults reach real clients: a crashed leader resets their connections; they follow the new one."""

from __future__ import annotations

import time

from tests.server.conftest import WAIT_S, scenario


def test_a_leader_crash_moves_a_kafka_python_producer_and_consumer_to_the_new_leader(serve):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = serve(scenario(config='"min.insync.replicas" = 2'))
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None, enable_auto_commit=False)
    try:

        def send(value: bytes) -> int:
            return producer.send("t", value, partition=0).get(timeout=WAIT_S).offset

        before = [send(b"before-%d" % i) for i in range(5)]
        server.call(server.cluster.crash, 0)
        after = [send(b"after-%d" % i) for i in range(5)]
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 10 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.offset, r.value) for r in records]
    finally:
        producer.close(timeout=WAIT_S)
        consumer.close()
    assert (before, after) == ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    assert got == [(i, b"before-%d" % i) for i in range(5)] + [(5 + i, b"after-%d" % i) for i in range(5)]
    view = server.snapshot().partition("t-0")
    assert (view.leader, view.leader_epoch, view.isr) == (1, 1, (1, 2))
    # the crash closed broker 0's listener and connections: one line, and the clients were refused after
    port = server.port(0)
    assert server.logs == [
        f"broker 0: down; its listener 127.0.0.1:{port} and connections are closed until it restarts "
        "(clients are refused meanwhile)"
    ]
