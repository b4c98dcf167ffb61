"""Log compaction seen by real clients: confluent-kafka writes keyed records and a tombstone to a
compacted topic on a served cluster, and a consumer from the beginning reads back one record per key.

Real time on loopback: segment.ms = 100 rolls a segment between the producer's bursts and
log.cleaner.backoff.ms = 100 runs the cleaner ten times a second; every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import Producer as CkProducer
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.testing import MiniCluster
from tests.server.conftest import WAIT_S

CONFIGS = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
}


def produce(producer: CkProducer, records: list[tuple[bytes, bytes | None]]) -> None:
    for key, value in records:
        producer.produce("c", value, key=key, partition=0)
    assert producer.flush(WAIT_S) == 0
    time.sleep(0.15)  # past segment.ms: the next burst rolls the segment


def read_all(cluster: MiniCluster) -> list[tuple[int, bytes, bytes | None]]:
    consumer = CkConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["c"])
    seen: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and not any(key == b"end" for _, key, _ in seen):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return seen


def test_confluent_kafka_reads_one_record_per_key_from_a_compacted_topic():
    with MiniCluster(1, [], {"log.cleaner.backoff.ms": 100}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        (future,) = admin.create_topics([NewTopic("c", 1, 1, config=CONFIGS)]).values()
        future.result(WAIT_S)
        producer = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
        produce(producer, [(b"a", b"a1"), (b"b", b"b1"), (b"c", b"c1")])  # offsets 0-2
        produce(producer, [(b"a", b"a2"), (b"b", b"b2")])  # 3-4
        produce(producer, [(b"c", None)])  # 5: a tombstone
        produce(producer, [(b"x", b"x1")])  # 6: makes the tombstone's segment cleanable
        time.sleep(0.5)  # cleanings: c1 and the older a and b go; the tombstone gets its horizon
        produce(producer, [(b"y", b"y1")])  # 7: new dirty bytes for a cleaning past the horizon
        produce(producer, [(b"end", b"!")])  # 8
        time.sleep(0.5)  # a cleaning past the horizon removes the tombstone c@5
        seen = read_all(cluster)
        assert seen == [
            (3, b"a", b"a2"),
            (4, b"b", b"b2"),
            (6, b"x", b"x1"),
            (7, b"y", b"y1"),
            (8, b"end", b"!"),
        ]
