"""A partition between Kafka clients and one broker's listener, and its heal, seen by real clients.

Real time on loopback: waits are bounded by ``WAIT_S``; the one "no answer" check waits a stated 0.5 s.
"""

from __future__ import annotations

import socket

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minibroker.testing import MiniCluster
from tests.server.conftest import RawClient
from tests.testing.test_examples import WAIT_S, wait_until


def port_of(cluster: MiniCluster, broker: int) -> int:
    return int(cluster.bootstrap_servers.split(",")[broker].rsplit(":", 1)[1])


def test_a_partitioned_listener_stops_answering_and_answers_held_requests_after_the_heal(minibroker_factory):
    cluster = minibroker_factory(1, topics=["orders:1:1"])
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=0, request_timeout_ms=1500
    )
    try:
        assert producer.send("orders", b"before", partition=0).get(timeout=WAIT_S).offset == 0
        produces = cluster.requests(0)["Produce"]
        cluster.drop_client_links(0)
        # kafka-python's connection stops answering: its request times out (request_timeout_ms)
        with pytest.raises(KafkaError):
            producer.send("orders", b"during", partition=0).get(timeout=WAIT_S)
        # a new connection is accepted by the operating system, and then nothing is answered on it
        held = RawClient(port_of(cluster, 0), timeout=0.5)
        held.send(ApiVersionsRequest(), 0)
        with pytest.raises(socket.timeout):
            held.receive_frame()
        assert cluster.requests(0)["Produce"] == produces  # held, not processed
        assert cluster.partition("orders", 0)["high_watermark"] == 1
        cluster.heal_client_links(0)
        held.sock.settimeout(WAIT_S)
        assert held.receive(ApiVersionsResponse, 0).error_code == 0  # answered once healed
        held.close()
        producer.send("orders", b"after", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
    # the request kafka-python gave up on was still delivered after the heal (TCP retransmits it): it is
    # written although the application saw it fail, as after a real partition
    wait_until(lambda: cluster.partition("orders", 0)["high_watermark"] == 3, "three records")
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, consumer_timeout_ms=int(WAIT_S * 1000)
    )
    try:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek_to_beginning()
        values = sorted(message.value for _, message in zip(range(3), consumer, strict=False))
    finally:
        consumer.close()
    assert values == [b"after", b"before", b"during"]
    assert any("client connections partitioned" in line for line in cluster.logs)


def test_client_links_take_a_broker_id(minibroker_factory):
    cluster = minibroker_factory(1)
    with pytest.raises(ValueError, match=r"broker 3: expected a broker id 0\.\.0"):
        cluster.drop_client_links(3)
    cluster.heal_client_links(0)  # nothing to heal: nothing happens
    assert not any("healed" in line for line in cluster.logs)
