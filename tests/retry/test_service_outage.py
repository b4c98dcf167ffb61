"""``minibroker retry-service`` through outages of its dependencies, with real parts: a redis-server killed
with SIGKILL and started again on its port (its append-only file fsynced on every write), a broker of
``minibroker serve`` crashed and restarted, while the service delivers. Nothing accepted is lost, the
duplicates stay within the stated window, each outage is one line, and SIGTERM afterwards exits 0.

Real time; every wait is on a condition, bounded by service_helpers.WAIT_S (the machine is shared)."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from minibroker.testing import MiniCluster
from tests.retry import service_helpers as sh

BATCH = 100
CONNECTION_LINE = "(lines like this: one per 30 s)"
#: the first line of a Kafka outage: a produce batch (or a poll) failed, or a commit
KAFKA_OUTAGE = re.compile(
    r"retry-service: (kafka at 127\.0\.0\.1:\d+ unreachable: |offset commits of group retry-test failing: )"
    r".*; retrying in 100 ms"
)
#: the first wave is due at once, the second later: the outage always falls mid-delivery
FIRST, SECOND = 2000, 1000
TOTAL = FIRST + SECOND
#: quick retries (the defaults are 100 .. 5000 ms): the test waits less after the restart
BACKOFF = "retry_backoff_ms = 100\nretry_backoff_max_ms = 800"


def _two_waves(cluster, bootstrap: str) -> None:
    sh.produce_retries(bootstrap, FIRST, sh.now_ms())
    sh.produce_retries(bootstrap, SECOND, sh.now_ms() + 3000, first=FIRST)


def _deliver_through(
    outage, backend_table: str, tmp_path, extra: str = "", start=_two_waves, total: int = TOTAL
) -> tuple[Counter, list[str]]:
    """Run a service; ``start(cluster, bootstrap)`` writes ``total`` retry records, ``outage(cluster,
    service, reader)`` runs once the reader has 300 of them. The per-key counts and the service's lines
    (it exited 0 on SIGTERM)."""
    config = sh.write_config(tmp_path / "retry.toml", backend_table, extra=f"{BACKOFF}\n{extra}")
    with MiniCluster(1, sh.topics(), sh.GROUP_CONFIG) as cluster:
        bootstrap = cluster.bootstrap_servers
        service = sh.Service(bootstrap, config)
        reader = sh.Reader(bootstrap)
        try:
            service.wait_assigned()
            start(cluster, bootstrap)
            reader.until(lambda r: len(r.arrivals) >= 300, service=service)
            outage(cluster, service, reader)
            reader.until(lambda r: len(set(r.keys())) == total, service=service)
            reader.poll(1000)  # a duplicate in flight would arrive within this
            code, lines = service.terminate()
        finally:
            service.stop()
            reader.close()
    assert code == 0, lines
    return Counter(reader.keys()), lines


def _assert_nothing_lost(counts: Counter, lines: list[str]) -> int:
    assert set(counts) == {f"k{i}".encode() for i in range(TOTAL)}  # nothing lost
    duplicates = sum(counts.values()) - TOTAL
    assert 0 <= duplicates <= BATCH and max(counts.values()) <= 2, (duplicates, counts.most_common(3))
    assert not any("Traceback" in line for line in lines), lines
    # read: TOTAL, or more when a rebalance made it read a partition again from its commit point
    summary = re.fullmatch(
        r"retry-service: stopped: read (\d+), delivered (\d+), dead-lettered 0, still held 0", lines[-1]
    )
    # delivered counts the produces the service saw acknowledged: a produce written whose answer was lost
    # to the outage (KafkaTimeoutError after the broker appended it) is a duplicate it cannot count
    assert summary and int(summary[1]) >= TOTAL and TOTAL <= int(summary[2]) <= TOTAL + duplicates, lines[-1]
    return duplicates


def test_redis_killed_and_restarted_mid_delivery_loses_nothing(durable_redis, tmp_path):
    at_kill: list[int] = []

    def outage(cluster, service, reader):
        for _ in range(3):  # connections reset mid-call: redis-py reconnects at once, no outage
            durable_redis.client.client_kill_filter(_type="normal", skipme=True)
            seen = len(reader.arrivals)
            reader.until(lambda r, seen=seen: len(r.arrivals) >= seen + 50)
        durable_redis.kill()
        at_kill.append(len(reader.arrivals))
        service.wait_line(lambda line: " unreachable: " in line, "reported the outage")
        time.sleep(1.5)  # the outage's length (not a wait for a condition): several backoffs
        durable_redis.restart()

    backend = sh.redis_backend(durable_redis.client, claim_batch=BATCH)
    counts, lines = _deliver_through(outage, backend, tmp_path)
    # everything read is in Redis or delivered: nothing held after the last delivery
    assert durable_redis.client.zcard("svc") + durable_redis.client.zcard("svc:inflight") == 0
    duplicates = _assert_nothing_lost(counts, lines)
    url = re.escape(durable_redis.url)
    down = [line for line in lines if " unreachable: " in line]
    up = [line for line in lines if " reachable again " in line]
    assert len(down) == 1 and len(up) == 1, lines  # one line each way per outage, not per attempt
    assert re.fullmatch(
        rf"retry-service: redis at {url} unreachable: ConnectionError: .+; retrying in 100 ms", down[0]
    ), down
    back = rf"retry-service: redis at {url} reachable again after (\d+) ms \((\d+) failed attempts\)"
    lasted, attempts = map(int, re.fullmatch(back, up[0]).groups())
    assert lasted >= 1500 and attempts >= 4, up  # 100 + 200 + 400 + 800 ms of backoff fit in 1.5 s
    print(f"redis killed when the reader had {at_kill[0]} of {TOTAL}; {duplicates} duplicates; {up[0]}")


@pytest.mark.parametrize("backend", ["wheel", "redis"])
def test_broker_crashed_and_restarted_mid_delivery_loses_nothing(backend, request, tmp_path):
    """The only broker crashes for longer than produce_timeout_ms (2 s here): the batch in flight fails
    and goes back to its holder, commits fail, the group's session (2 s) runs out; once the broker is
    back the service rejoins and delivers the rest."""

    def outage(cluster, service, reader):
        cluster.crash(0)
        # the service's own line if it was producing or committing; kafka-python's if it only polled
        service.wait_line(lambda line: KAFKA_OUTAGE.match(line) or CONNECTION_LINE in line, "saw the outage")
        time.sleep(3.0)  # the outage's length (not a wait for a condition): past the 2 s session timeout
        cluster.restart(0)

    if backend == "redis":
        table = sh.redis_backend(request.getfixturevalue("redis_client"), claim_batch=BATCH)
    else:
        table = f"[backend]\nclaim_batch = {BATCH}\n"
    counts, lines = _deliver_through(outage, table, tmp_path, extra="produce_timeout_ms = 2000")
    duplicates = _assert_nothing_lost(counts, lines)
    outages = [line for line in lines if KAFKA_OUTAGE.match(line)]
    # one line per outage and dependency (produces, commits), not per attempt; each one ended;
    # kafka-python's connection lines thinned out to one per 30 s
    assert len(outages) <= 4 and len([line for line in lines if CONNECTION_LINE in line]) <= 2, lines
    ended = re.compile(r"retry-service: (kafka at|offset commits).* again after \d+ ms")
    ends = [line for line in lines if ended.match(line)]
    assert len(ends) == len(outages), lines
    print(f"{backend}: {duplicates} duplicates; outage lines: {outages}")


def test_an_outage_past_the_limit_exits_1_and_sigterm_during_one_exits_0(durable_redis, tmp_path):
    """Two services (two groups, two keys) on one Redis, which is killed: the one with
    outage_limit_ms = 1500 gives up with one line and exit 1; the other (no limit) waits until SIGTERM,
    then exits 0. Everything they read is still in Redis when it is back."""
    count = 500
    configs = [
        sh.write_config(
            tmp_path / f"{name}.toml",
            sh.redis_backend(durable_redis.client, key=name),
            extra=f"{BACKOFF}\n{limit}",
            group_id=name,
        )
        for name, limit in (("limited", "outage_limit_ms = 1500"), ("patient", ""))
    ]
    with MiniCluster(1, sh.topics(), sh.GROUP_CONFIG) as cluster:
        bootstrap = cluster.bootstrap_servers
        services = [sh.Service(bootstrap, config) for config in configs]
        try:
            for service in services:
                service.wait_assigned()
            sh.produce_retries(bootstrap, count, sh.now_ms() + 600_000)  # held, not due within the test
            for name in ("limited", "patient"):
                sh.wait_until(lambda name=name: durable_redis.client.zcard(name) == count, f"{name} held all")
            durable_redis.kill()
            limited, patient = services
            assert limited.process.wait(timeout=sh.WAIT_S) == 1
            patient.wait_line(lambda line: " unreachable: " in line, "reported the outage")
            code, lines = patient.terminate()
        finally:
            for service in services:
                service.stop()
    url = re.escape(durable_redis.url)
    last = limited.log[-1]
    assert re.fullmatch(
        rf"minibroker: retry-service: redis at {url} unreachable for (\d+) ms \(outage_limit_ms = 1500\): "
        r"giving up; last error: ConnectionError: .+",
        last,
    ), limited.log
    assert 1500 <= int(re.search(r"for (\d+) ms", last).group(1)) < 1500 + 800 + 1000  # backoff + slack
    assert code == 0 and lines[-1] == (
        f"retry-service: stopped: read {count}, delivered 0, dead-lettered 0, "
        "still held unknown (redis unreachable)"
    ), lines
    durable_redis.restart()
    assert [durable_redis.client.zcard(name) for name in ("limited", "patient")] == [count, count]


def test_failed_produces_and_commits_mid_batch_are_retried_without_loss_or_duplicates(tmp_path):
    """The broker answers two produce requests to orders[0] with INVALID_RECORD (written: nothing) and
    two offset commits with GROUP_AUTHORIZATION_FAILED: the records go back to the wheel and are
    produced again after the backoff, the commits are made again; every record arrives exactly once."""
    count = 1000

    def start(cluster, bootstrap):
        sh.produce_retries(bootstrap, count, sh.now_ms() + 1500)
        # the next requests of these kinds are the service's (the reader neither produces nor commits;
        # the test's producer wrote to orders-retry-1)
        cluster.push_errors("Produce", ["INVALID_RECORD"] * 2, broker=0, topic="orders", partition=0)
        cluster.push_errors("OffsetCommit", ["GROUP_AUTHORIZATION_FAILED"] * 2, broker=0)

    table = f"[backend]\nclaim_batch = {BATCH}\n"
    counts, lines = _deliver_through(lambda *_: None, table, tmp_path, start=start, total=count)
    assert len(counts) == count and max(counts.values()) == 1, counts.most_common(3)
    produce = [line for line in lines if re.match(r"retry-service: kafka at \S+ unreachable: ", line)]
    commit = [line for line in lines if line.startswith("retry-service: offset commits of group")]
    assert len(produce) == 1 and re.search(r"\d+ of \d+ produces failed \(InvalidRecordError", produce[0]), (
        lines
    )
    assert produce[0].endswith("; retrying in 100 ms"), produce
    assert commit[0].startswith(
        "retry-service: offset commits of group retry-test failing: GroupAuthorizationFailedError"
    ), lines
    assert any(" reachable again after " in line for line in lines), lines
    assert any("offset commits of group retry-test succeeding again after " in line for line in lines)
    assert (
        lines[-1] == f"retry-service: stopped: read {count}, delivered {count}, dead-lettered 0, still held 0"
    )
