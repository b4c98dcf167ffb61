"""Kafka clients see the purgatories: a paused follower, an ISR below min ISR, max wait and min bytes.

Real time on loopback. Tolerances: a wait of W ms is accepted within [W - 50, W + 400] ms (the
lower bound allows for clock granularity, the upper for a loaded 2-core CI machine).
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from tests.server.conftest import WAIT_S, RawClient, scenario

EARLY_MS, LATE_MS = 50, 400


def records(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=None, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def produce_request(acks: int, timeout_ms: int, *values: bytes, topic: str = "t") -> ProduceRequest:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records(*values))
    data = [ProduceRequest.TopicProduceData(name=topic, partition_data=[part])]
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=data)


def fetch_request(offset: int, max_wait_ms: int, min_bytes: int, topic: str = "t") -> FetchRequest:
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    topics = [FetchRequest.FetchTopic(topic=topic, partitions=[part])]
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, topics=topics
    )


def produce_purgatory(server, broker: int = 0):
    return server.snapshot().broker(broker).purgatories[0]


def fetch_purgatory(server, broker: int = 0):
    return server.snapshot().broker(broker).purgatories[1]


def test_acks_all_waits_for_a_paused_follower_and_completes_when_it_resumes(serve):
    from kafka import KafkaProducer

    server = serve(scenario(config='"min.insync.replicas" = 2'))
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    try:
        assert producer.send("t", b"first", partition=0).get(timeout=WAIT_S).offset == 0
        server.call(server.cluster.pause_fetcher, 2)
        future = producer.send("t", b"second", partition=0)
        server.wait_for(
            lambda: server.cluster.snapshot().broker(0).purgatories[0].num_delayed == 1, "a parked produce"
        )
        time.sleep(0.3)
        assert not future.is_done
        view = server.snapshot()
        assert (view.partition("t-0").isr, view.partition("t-0").replica(0).log_end_offset) == ((0, 1, 2), 2)
        assert view.partition("t-0").replica(0).high_watermark == 1  # broker 2 holds the HW at 1
        assert produce_purgatory(server).num_delayed == 1
        resumed = time.monotonic()
        server.call(server.cluster.resume_fetcher, 2)
        assert future.get(timeout=WAIT_S).offset == 1
        assert time.monotonic() - resumed < 2.0
        assert produce_purgatory(server).num_delayed == 0
        assert server.snapshot().partition("t-0").replica(0).high_watermark == 2
    finally:
        producer.close(timeout=WAIT_S)


def _shrink_below_min_isr(server) -> None:
    """Pause both followers, make them lag with an acks=1 write, and wait for the ISR to shrink to [0]."""
    server.call(server.cluster.pause_fetcher, 1)
    server.call(server.cluster.pause_fetcher, 2)
    client = RawClient(server.port(0))
    try:
        response = client.request(produce_request(1, 5000, b"lagging"), ProduceResponse, 9)
        assert response.responses[0].partition_responses[0].error_code == 0
    finally:
        client.close()
    server.wait_for(
        lambda: server.cluster.snapshot().partition("t-0").isr == (0,), "the ISR to shrink to [0]"
    )


def test_below_min_isr_kafka_python_gets_not_enough_replicas(serve):
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    server = serve(scenario(config='"min.insync.replicas" = 2, "replica.lag.time.max.ms" = 300'))
    _shrink_below_min_isr(server)
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap, acks="all", retries=0, enable_idempotence=False
    )
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send("t", b"refused", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)
    view = server.snapshot()
    assert view.partition("t-0").replica(0).log_end_offset == 1  # rejected before the append
    assert produce_purgatory(server).num_delayed == 0


def test_below_min_isr_confluent_kafka_gets_not_enough_replicas(serve):
    from confluent_kafka import KafkaError, Producer

    server = serve(scenario(config='"min.insync.replicas" = 2, "replica.lag.time.max.ms" = 300'))
    _shrink_below_min_isr(server)
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "retries": 0})
    outcome = []
    producer.produce("t", b"refused", partition=0, on_delivery=lambda error, message: outcome.append(error))
    assert producer.flush(WAIT_S) == 0
    (error,) = outcome
    assert error.code() == KafkaError.NOT_ENOUGH_REPLICAS


def test_raw_not_enough_replicas_is_error_19_for_that_partition(serve):
    server = serve(scenario(config='"min.insync.replicas" = 2, "replica.lag.time.max.ms" = 300'))
    _shrink_below_min_isr(server)
    client = RawClient(server.port(0))
    try:
        response = client.request(produce_request(-1, 5000, b"refused"), ProduceResponse, 9)
    finally:
        client.close()
    (part,) = response.responses[0].partition_responses
    assert (part.index, part.error_code, part.base_offset) == (0, 19, -1)


def test_produce_timeout_is_the_delayed_produce_delay(serve):
    server = serve(scenario(config='"min.insync.replicas" = 2'))
    server.call(server.cluster.pause_fetcher, 2)
    client = RawClient(server.port(0))
    try:
        start = time.monotonic()
        response = client.request(produce_request(-1, 300, b"late"), ProduceResponse, 9)
        elapsed_ms = (time.monotonic() - start) * 1000
    finally:
        client.close()
    (part,) = response.responses[0].partition_responses
    assert (part.error_code, part.base_offset) == (7, 0)  # REQUEST_TIMED_OUT, but appended at 0
    assert 300 - EARLY_MS <= elapsed_ms <= 300 + LATE_MS
    assert produce_purgatory(server).expirations == 1


def test_fetch_on_an_idle_partition_returns_empty_after_max_wait(serve):
    server = serve(scenario(topics='name = "t"'))  # no followers: the only fetch is ours
    client = RawClient(server.port(0))
    try:
        start = time.monotonic()
        response = client.request(fetch_request(0, 500, 1), FetchResponse, 12)
        elapsed_ms = (time.monotonic() - start) * 1000
    finally:
        client.close()
    (part,) = response.responses[0].partitions
    assert (part.error_code, part.high_watermark, part.records) == (0, 0, b"")
    assert 450 <= elapsed_ms <= 900, elapsed_ms
    purgatory = fetch_purgatory(server)
    assert (purgatory.expirations, purgatory.num_delayed) == (1, 0)


def test_a_parked_fetch_completes_when_min_bytes_arrive(serve):
    server = serve(scenario(topics='name = "t"'))
    consumer, producer = RawClient(server.port(0)), RawClient(server.port(0))
    try:
        start = time.monotonic()
        correlation = consumer.send(fetch_request(0, 5000, 1), 12)
        server.wait_for(
            lambda: server.cluster.snapshot().broker(0).purgatories[1].num_delayed == 1, "a parked fetch"
        )
        produced = producer.request(produce_request(1, 5000, b"wake", b"up"), ProduceResponse, 9)
        assert produced.responses[0].partition_responses[0].base_offset == 0
        response = consumer.receive(FetchResponse, 12)
        elapsed_ms = (time.monotonic() - start) * 1000
    finally:
        consumer.close()
        producer.close()
    assert response.header.correlation_id == correlation
    (part,) = response.responses[0].partitions
    batch = MemoryRecords(part.records).next_batch()
    assert [(r.offset, r.value) for r in batch] == [(0, b"wake"), (1, b"up")]
    assert elapsed_ms < 2000  # far from the 5 s max wait
    assert fetch_purgatory(server).expirations == 0


def test_acks_all_with_a_timeout_of_zero_or_less_always_times_out_while_followers_lag(serve):
    server = serve(scenario())
    client = RawClient(server.port(0))
    try:
        codes = [
            client.request(produce_request(-1, timeout, b"v"), ProduceResponse, 9).responses[0]
            for timeout in (0, -1) * 10
        ]
        assert [r.partition_responses[0].error_code for r in codes] == [7] * 20  # REQUEST_TIMED_OUT
    finally:
        client.close()
