"""``minibroker retry-service`` as a process against minibroker serve on loopback (real time: every wait is
bounded; tolerances are stated where a test measures time)."""

from __future__ import annotations

import pytest

from minibroker.retry import headers as h
from minibroker.testing import MiniCluster
from tests.retry.service_helpers import (
    GROUP_CONFIG,
    WAIT_S,
    Reader,
    Service,
    now_ms,
    produce_retries,
    redis_backend,
    topics,
    write_config,
)


@pytest.fixture
def cluster():
    with MiniCluster(1, topics(), GROUP_CONFIG) as served:
        yield served


@pytest.mark.parametrize("backend", ["wheel", "redis"])
def test_records_come_back_when_due_to_their_partition(cluster, backend, request, tmp_path):
    table = redis_backend(request.getfixturevalue("redis_client")) if backend == "redis" else ""
    config = write_config(tmp_path / "retry.toml", table)
    service = Service(cluster.bootstrap_servers, config)
    reader, dlt = Reader(cluster.bootstrap_servers), Reader(cluster.bootstrap_servers, "orders-dlt")
    try:
        service.wait_assigned()
        due = now_ms() + 1500
        produce_retries(cluster.bootstrap_servers, 200, due)  # failed once: back to orders
        produce_retries(cluster.bootstrap_servers, 20, due, attempt=2)  # failed twice of three: back
        reader.until(lambda r: len(r.arrivals) >= 220)
        assert dlt.arrivals == []
        code, lines = service.terminate()
    finally:
        service.stop()
        reader.close(), dlt.close()
    assert code == 0, lines
    assert lines[-1] == "retry-service: stopped: read 220, delivered 220, dead-lettered 0, still held 0"
    assert sorted(reader.keys()) == sorted(f"k{i}".encode() for i in [*range(200), *range(20)])
    for arrived, partition, key, record in reader.arrivals:
        # never early; the reader polls every 20 ms, so arrival is at most that after the produce
        assert arrived >= due, (key, arrived - due)
        assert partition == int(key[1:]) % 2  # back to retry.original.partition
        assert record.headers[h.DUE] == due and record.extra == (("app", b"x"),)
    late = max(arrived - due for arrived, *_ in reader.arrivals)
    assert late < 5_000  # the machine is shared; typical lateness is under 200 ms


def test_a_record_out_of_attempts_goes_to_the_dlt(cluster, tmp_path):
    config = write_config(tmp_path / "retry.toml", attempts=2)  # orders-retry-1 is the last retry
    produce_retries(cluster.bootstrap_servers, 3, now_ms(), attempt=1)
    service = Service(cluster.bootstrap_servers, config)
    reader, dlt = Reader(cluster.bootstrap_servers), Reader(cluster.bootstrap_servers, "orders-dlt")
    try:
        reader.until(lambda r: len(r.arrivals) == 3)  # attempt 1 of 2 failed: one more delivery
        code, lines = service.terminate()
    finally:
        service.stop()
    assert code == 0 and lines[-1].endswith("delivered 3, dead-lettered 0, still held 0")
    # a record whose header says it already failed 2 times of 2 (a producer bug, a changed policy)
    produce_retries(cluster.bootstrap_servers, 2, now_ms(), attempt=1)  # offsets 3, 4: read after the commit
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    producer.send("orders-retry-1", key=b"bad", value=b"v", headers=[(h.ATTEMPT, b"two")], partition=0)
    producer.send("orders-retry-1", key=b"old", value=b"v", headers=[(h.ATTEMPT, b"2")], partition=1)
    producer.flush(timeout=WAIT_S), producer.close()
    service = Service(cluster.bootstrap_servers, config)
    try:
        dlt.until(lambda r: len(r.arrivals) == 2)
        reader.until(lambda r: len(r.arrivals) == 5)
        code, lines = service.terminate()
    finally:
        service.stop()
        reader.close(), dlt.close()
    assert code == 0 and lines[-1].endswith("read 4, delivered 2, dead-lettered 2, still held 0")
    dead = {key: record for _, _, key, record in dlt.arrivals}
    assert dead[b"bad"].headers[h.ERROR].startswith("malformed retry headers: header retry.attempt")
    assert dead[b"old"].headers[h.ATTEMPT] == 2 and dead[b"old"].headers[h.ORIGINAL_TOPIC] == "orders"
