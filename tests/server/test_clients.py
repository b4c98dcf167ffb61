"""kafka-python, confluent-kafka (librdkafka) and aiokafka against ``minibroker serve``, on loopback.

Topic ``t``: 2 partitions, replication factor 3 (leaders: broker 0 and broker 1), min.insync.replicas 2.
Each producer uses acks=all and gets every offset back; each assign()-based consumer asks for
fetch.min.bytes = 4096, more than any batch here (and more than all of them), so every fetch parks in
the leader's fetch purgatory until fetch.max.wait.ms, and still reads every record back, in order.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from minibroker.server.fetch_sessions import session_figures
from tests.server.conftest import WAIT_S, scenario

TOPIC = 't"\npartitions = 2\nreplication_factor = 3'
MIN_BYTES = 4096
MAX_WAIT_MS = 200
PER_BATCH = 5
BATCHES = 3


def _served(serve):
    return serve(scenario(config='"min.insync.replicas" = 2', topics=f'name = "{TOPIC}'))


def _values(partition: int) -> list[bytes]:
    return [f"p{partition}-{i}".encode() for i in range(PER_BATCH * BATCHES)]


def _expected() -> dict[int, list[tuple[int, bytes]]]:
    return {p: list(enumerate(_values(p))) for p in (0, 1)}


def _check_server(server) -> None:
    view = server.snapshot()
    for p in (0, 1):
        partition = view.partition(f"t-{p}")
        assert (partition.leader, partition.isr) == ((0, (0, 1, 2)), (1, (1, 2, 0)))[p]
        assert [(r.log_end_offset, r.high_watermark) for r in partition.replicas if r.broker == p] == [
            (15, 15)
        ]
    assert server.logs == []


def test_kafka_python(serve):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    server = _served(serve)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0)
    offsets: dict[int, list[int]] = {0: [], 1: []}
    try:
        for _ in range(BATCHES):
            futures = [
                (p, producer.send("t", value=v, partition=p))
                for p in (0, 1)
                for v in _values(p)[len(offsets[p]) : len(offsets[p]) + PER_BATCH]
            ]
            producer.flush(timeout=WAIT_S)
            for p, future in futures:
                offsets[p].append(future.get(timeout=WAIT_S).offset)
    finally:
        producer.close(timeout=WAIT_S)
    assert offsets == {p: list(range(15)) for p in (0, 1)}

    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_min_bytes=MIN_BYTES,
        fetch_max_wait_ms=MAX_WAIT_MS,
    )
    got: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    try:
        partitions = [TopicPartition("t", p) for p in (0, 1)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
    finally:
        consumer.close()
    assert got == _expected()
    _check_server(server)
    # kafka-python opens a fetch session on each leader (KIP-227; test_fetch_sessions.py has the rest)
    for leader in (0, 1):
        kinds = _fetch_kinds(server, leader)
        assert (kinds["sessions"], kinds["full_fetches"]) == (1, 1), kinds
        assert kinds["error_fetches"] == kinds["sessionless_fetches"] == 0, kinds


def _fetch_kinds(server, broker: int) -> dict[str, int]:
    return server.call(session_figures, server.served.server.state, broker)


def test_confluent_kafka(serve):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    server = _served(serve)
    errors: list[str] = []
    producer = Producer(
        {"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5, "error_cb": errors.append}
    )
    delivered: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}

    def on_delivery(error, message):
        assert error is None, error
        delivered[message.partition()].append((message.offset(), message.value()))

    for b in range(BATCHES):
        for p in (0, 1):
            for value in _values(p)[b * PER_BATCH : (b + 1) * PER_BATCH]:
                producer.produce("t", value=value, partition=p, on_delivery=on_delivery)
        assert producer.flush(WAIT_S) == 0
    assert delivered == _expected()

    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "wire-test",  # librdkafka requires one; assign() never joins the group
            "enable.auto.commit": False,
            "fetch.min.bytes": MIN_BYTES,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            "error_cb": errors.append,
        }
    )
    got: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    try:
        consumer.assign([TopicPartition("t", p, OFFSET_BEGINNING) for p in (0, 1)])
        deadline = time.monotonic() + WAIT_S
        while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got[message.partition()].append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert got == _expected()
    assert errors == []
    _check_server(server)
    # librdkafka never opens a fetch session (it sends session id 0, epoch -1): every fetch is full
    for leader in (0, 1):
        kinds = _fetch_kinds(server, leader)
        assert kinds["sessionless_fetches"] >= 1 and kinds["sessions"] == 0, kinds
        assert kinds["full_fetches"] == kinds["incremental_fetches"] == kinds["error_fetches"] == 0, kinds


def test_aiokafka(serve):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    server = _served(serve)

    async def produce() -> dict[int, list[int]]:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
        await producer.start()
        offsets: dict[int, list[int]] = {0: [], 1: []}
        try:
            for b in range(BATCHES):
                sent = []
                for p in (0, 1):
                    for value in _values(p)[b * PER_BATCH : (b + 1) * PER_BATCH]:
                        sent.append((p, await producer.send("t", value=value, partition=p)))
                for p, future in sent:
                    offsets[p].append((await asyncio.wait_for(future, WAIT_S)).offset)
        finally:
            await producer.stop()
        return offsets

    async def consume() -> dict[int, list[tuple[int, bytes]]]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=server.bootstrap,
            enable_auto_commit=False,
            fetch_min_bytes=MIN_BYTES,
            fetch_max_wait_ms=MAX_WAIT_MS,
        )
        await consumer.start()
        got: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
        try:
            partitions = [TopicPartition("t", p) for p in (0, 1)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            deadline = time.monotonic() + WAIT_S
            while sum(map(len, got.values())) < 30 and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    got[tp.partition] += [(r.offset, r.value) for r in records]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(asyncio.wait_for(produce(), WAIT_S * 2)) == {p: list(range(15)) for p in (0, 1)}
    assert asyncio.run(asyncio.wait_for(consume(), WAIT_S * 2)) == _expected()
    _check_server(server)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "aiokafka"])
def test_auto_created_topic_takes_num_partitions_and_default_replication_factor(serve, client):
    server = serve(scenario(config='"num.partitions" = 2, "default.replication.factor" = 3'))
    if client == "kafka-python":
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
        offset = producer.send("fresh", b"v", partition=1).get(timeout=WAIT_S).offset
        producer.close(timeout=WAIT_S)
    elif client == "confluent-kafka":
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        box = []
        producer.produce("fresh", b"v", partition=1, on_delivery=lambda e, m: box.append((e, m.offset())))
        assert producer.flush(WAIT_S) == 0
        ((error, offset),) = box
        assert error is None
    else:
        from aiokafka import AIOKafkaProducer

        async def send() -> int:
            producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
            await producer.start()
            try:
                return (await producer.send_and_wait("fresh", b"v", partition=1)).offset
            finally:
                await producer.stop()

        offset = asyncio.run(asyncio.wait_for(send(), WAIT_S))
    assert offset == 0
    assert server.snapshot().partition("fresh-1").isr == (1, 2, 0)
    (line,) = server.logs
    assert re.fullmatch(
        r"broker \d: 127\.0\.0\.1:\d+: auto-created topic 'fresh': 2 partition\(s\), replication factor 3",
        line,
    )
