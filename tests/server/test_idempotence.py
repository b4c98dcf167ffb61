"""Idempotent producers over the wire: retries deduplicated by the leader, also after a failover."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from minibroker.common.messages import TopicPartition
from tests.server.conftest import WAIT_S, RawClient, scenario


def idempotent_batch(seq: int, values: list[bytes], pid: int = 1000, epoch: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(client: RawClient, raw: bytes, version: int = 9) -> tuple[int, int]:
    """(error code, base offset) of an acks=all Produce of ``raw`` to t-0."""
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=raw)
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[part])],
    )
    answer = client.request(request, ProduceResponse, version).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def _leo(broker) -> int:
    log = broker.logs.get(TopicPartition("t", 0))
    return log.log_end_offset if log is not None else -1


@pytest.mark.parametrize("version", [3, 9])
def test_a_retried_batch_gets_its_first_offset_and_a_gap_or_an_old_epoch_is_refused(serve, version):
    server = serve(scenario())
    client = RawClient(server.port(0))
    first = idempotent_batch(0, [b"a", b"b"])
    assert produce(client, first, version) == (0, 0)
    assert produce(client, idempotent_batch(2, [b"c"]), version) == (0, 2)
    # the retry of the first batch: its original offset, nothing appended
    assert produce(client, first, version) == (0, 0)
    assert produce(client, idempotent_batch(2, [b"c"]), version) == (0, 2)
    # sequence 4 after 2: OUT_OF_ORDER_SEQUENCE_NUMBER (45)
    assert produce(client, idempotent_batch(4, [b"d"]), version) == (45, -1)
    # epoch 1 starts at sequence 0; epoch 0 is then stale: INVALID_PRODUCER_EPOCH (47) on every version
    assert produce(client, idempotent_batch(0, [b"e"], epoch=1), version) == (0, 3)
    assert produce(client, idempotent_batch(3, [b"f"], epoch=0), version) == (47, -1)
    # batches without a producer id are never deduplicated
    plain = idempotent_batch(-1, [b"g"], pid=-1, epoch=-1)
    assert [produce(client, plain, version) for _ in range(2)] == [(0, 4), (0, 5)]
    server.wait_for(lambda: [_leo(b) for b in server.cluster.brokers] == [6, 6, 6], "replication")
    client.close()


def test_a_follower_that_becomes_leader_answers_the_retry_with_the_original_offset(serve):
    server = serve(scenario())
    first, second = idempotent_batch(0, [b"a"]), idempotent_batch(1, [b"b", b"c"])
    client = RawClient(server.port(0))
    assert [produce(client, first), produce(client, second)] == [(0, 0), (0, 1)]
    server.wait_for(lambda: [_leo(b) for b in server.cluster.brokers] == [3, 3, 3], "replication")
    client.close()
    server.call(server.cluster.crash, 0)
    server.wait_for(lambda: server.cluster.leader_of(TopicPartition("t", 0)) == 1, "failover")
    client = RawClient(server.port(1))
    # both batches were replicated with their producer fields: the new leader recognises the retries
    assert [produce(client, second), produce(client, first)] == [(0, 1), (0, 0)]
    assert produce(client, idempotent_batch(3, [b"d"])) == (0, 3)
    assert produce(client, idempotent_batch(5, [b"e"])) == (45, -1)
    server.wait_for(lambda: [_leo(b) for b in server.cluster.brokers][1:] == [4, 4], "replication")
    client.close()


# --- real clients: the leader crashes after appending (and replicating) but before its answer lands ---------
#: each way on every client link to broker 0: the answer is still in flight when the test crashes the broker
CLIENT_LATENCY_MS = 1500


def _crash_leader_once_replicated(server, expected_leo: int) -> None:
    """Wait until all three replicas hold ``expected_leo`` records, then crash broker 0 (the leader)."""
    server.wait_for(lambda: [_leo(b) for b in server.cluster.brokers] == [expected_leo] * 3, "replication")
    server.call(server.cluster.crash, 0)


def _records(server, broker: int) -> int:
    return server.call(lambda: _leo(server.cluster.brokers[broker]))


def test_kafka_python_retries_through_a_leader_crash_and_its_record_is_written_once(serve):
    from kafka import KafkaProducer

    server = serve(scenario())
    producer = KafkaProducer(
        bootstrap_servers=server.bootstrap, acks="all", enable_idempotence=True, retries=5, linger_ms=0
    )
    try:
        assert producer.send("t", b"first", partition=0).get(timeout=WAIT_S).offset == 0
        _slow_clients(server, 0)
        future = producer.send("t", b"second", partition=0)
        _crash_leader_once_replicated(server, 2)
        # the retry reached broker 1, which found the batch in its producer state: offset 1, not 2
        assert future.get(timeout=WAIT_S).offset == 1
        assert producer.send("t", b"third", partition=0).get(timeout=WAIT_S).offset == 2
    finally:
        producer.close(timeout=WAIT_S)
    assert [_records(server, b) for b in (1, 2)] == [3, 3]


def test_confluent_kafka_retries_through_a_leader_crash_and_its_record_is_written_once(serve):
    confluent_kafka = pytest.importorskip("confluent_kafka")

    server = serve(scenario())
    delivered: list[tuple[object, int]] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )

    def on_delivery(error, message) -> None:
        delivered.append((error, message.offset()))

    def flush() -> None:
        deadline = time.monotonic() + WAIT_S
        while producer.flush(0.1) and time.monotonic() < deadline:
            pass

    producer.produce("t", b"first", partition=0, on_delivery=on_delivery)
    flush()
    _slow_clients(server, 0)
    producer.produce("t", b"second", partition=0, on_delivery=on_delivery)
    producer.poll(0)
    _crash_leader_once_replicated(server, 2)
    flush()
    producer.produce("t", b"third", partition=0, on_delivery=on_delivery)
    flush()
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    assert [_records(server, b) for b in (1, 2)] == [3, 3]


def _slow_clients(server, broker: int) -> None:
    server.call(server.served.server.state.set_client_latency, broker, CLIENT_LATENCY_MS)
