"""Partition reassignments over the wire: kafka-python's admin calls, and a move under a producer's load."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import Producer as CkProducer
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from minibroker.common.messages import TopicPartition as Tp
from tests.server.conftest import scenario

TOPIC = 'name = "t"\npartitions = 1\nreplication_factor = 2\nassignment = [[0, 1]]'
TP = TopicPartition("t", 0)


@pytest.fixture
def server(serve):
    return serve(scenario(brokers=4, topics=TOPIC))


@pytest.fixture
def admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def test_kafka_python_lists_a_move_under_way_cancels_it_and_gets_kafkas_errors(server, admin):
    server.call(server.cluster.pause_fetcher, 3)  # broker 3 cannot catch up: the move stays under way
    answer = admin.alter_partition_reassignments(
        {TP: [0, 3], TopicPartition("t", 5): [0], TopicPartition("t", 0): [0, 3]}
    )
    assert answer[TopicPartition("t", 5)] is UnknownTopicOrPartitionError and answer[TP] is None
    listed = admin.list_partition_reassignments()
    assert listed == {TP: {"replicas": [0, 3, 1], "adding_replicas": [3], "removing_replicas": [1]}}
    assert admin.list_partition_reassignments([TopicPartition("x", 0)]) == {}
    assert admin.alter_partition_reassignments({TP: [0, 0]}) == {TP: InvalidReplicationAssignmentError}
    assert admin.alter_partition_reassignments({TP: None}) == {TP: None}
    assert admin.list_partition_reassignments() == {}
    assert admin.alter_partition_reassignments({TP: None}) == {TP: NoReassignmentInProgressError}
    state = server.call(lambda: server.cluster.controller.state[Tp("t", 0)])
    assert (state.replicas, state.isr) == ((0, 1), (0, 1))


def test_a_move_under_an_acks_all_producer_loses_no_acknowledged_record(server, admin):
    acked: list[bytes] = []
    failed: list[str] = []
    stop = threading.Event()

    def on_delivery(error, message):
        if error is None:
            acked.append(message.value())
        else:
            failed.append(str(error))

    def produce():
        producer = CkProducer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5})
        n = 0
        while not stop.is_set():
            producer.produce("t", f"r{n}".encode(), partition=0, on_delivery=on_delivery)
            producer.poll(0.002)
            n += 1
        producer.flush(30)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        server.wait_for(lambda: server.cluster.brokers[0].logs[Tp("t", 0)].high_watermark >= 200, "load")
        assert admin.alter_partition_reassignments({TP: [2, 3]}) == {TP: None}
        server.wait_for(lambda: not server.cluster.controller.reassignments, "the move to complete")
        moved = server.call(lambda: server.cluster.brokers[2].logs[Tp("t", 0)].high_watermark)
        server.wait_for(
            lambda: server.cluster.brokers[2].logs[Tp("t", 0)].high_watermark >= moved + 200,
            "load after the move",
        )
    finally:
        stop.set()
        thread.join(60)
    state = server.call(lambda: server.cluster.controller.state[Tp("t", 0)])
    assert (state.replicas, sorted(state.isr), state.leader) == ((2, 3), [2, 3], 2)
    assert failed == [] and len(acked) > 400
    consumer = CkConsumer(
        {"bootstrap.servers": server.bootstrap, "group.id": "check", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["t"])
    seen: set[bytes] = set()
    for _ in range(200):
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                seen.add(message.value())
        if seen >= set(acked):
            break
    consumer.close()
    assert set(acked) - seen == set()
