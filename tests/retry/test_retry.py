"""Retry topics and the DLT in virtual time, with the wheel scheduler."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.retry import RetryPolicy, WheelScheduler, dlt_topic, retry_topic
from minibroker.retry import headers as h
from minibroker.retry.consumer import RetryingConsumer
from minibroker.sim import TopicSpec, open_cluster


def test_policy_backoff_and_naming():
    policy = RetryPolicy(attempts=5, backoff="exponential", delay_ms=100, multiplier=3, max_delay_ms=1000)
    assert [policy.delay_after(n) for n in range(1, 5)] == [100, 300, 900, 1000]
    assert RetryPolicy(delay_ms=250).delay_after(7) == 250
    assert retry_topic("orders", 2) == "orders-retry-2" and dlt_topic("orders") == "orders-dlt"
    assert policy.next_topic("orders", 4, ValueError()) == "orders-retry-4"
    assert policy.next_topic("orders", 5, ValueError()) == "orders-dlt"
    narrow = RetryPolicy(retryable=(TimeoutError,))
    assert narrow.next_topic("orders", 1, ValueError()) == "orders-dlt"
    with pytest.raises(ValueError, match=r"retry\.attempts: expected an integer >= 1, got 0"):
        RetryPolicy(attempts=0)


def test_wheel_scheduler_never_early():
    wheel = WheelScheduler()
    for key, due in [("a", 30), ("b", 10), ("c", 1234)]:
        wheel.schedule(key, due)
    assert wheel.claim_due(9) == [] and wheel.claim_due(10) == ["b"]
    assert wheel.claim_due(1233) == ["a"] and wheel.pending() == 1
    assert wheel.claim_due(1234) == ["c"] and wheel.pending() == 0


def run(failures: dict[int, int], policy: RetryPolicy, end_ms: int, make_scheduler=None):
    """Produce records 0..n-1 to "orders"; record i fails its first failures[i] deliveries."""
    make_scheduler = make_scheduler or (lambda cluster: WheelScheduler(cluster.now()))
    topics = [TopicSpec("orders"), TopicSpec("orders-dlt")]
    topics += [TopicSpec(retry_topic("orders", n)) for n in range(1, policy.attempts)]
    calls: dict[bytes, int] = {}

    def handler(record):
        calls[record.key] = calls.get(record.key, 0) + 1
        if calls[record.key] <= failures[int(record.key)]:
            raise TimeoutError(f"record {int(record.key)} failed")

    async def main():
        async with open_cluster(1, topics) as cluster:
            consumer = RetryingConsumer(cluster, "orders", handler, policy, make_scheduler(cluster))
            raw = h.encode(
                [
                    h.RetryRecord(str(i).encode(), b"v", 0, extra=(("trace", b"t%d" % i),))
                    for i in sorted(failures)
                ]
            )
            producer = cluster.producer("app", acks=-1)
            (request,) = producer.produce(
                {TopicPartition("orders", 0): ProduceData(len(failures), len(raw), raw=raw)}
            )
            await request.wait()
            async with trio.open_nursery() as nursery:
                await nursery.start(consumer.run)
                await trio.sleep(end_ms / 1000)
                nursery.cancel_scope.cancel()
            dlt_log = cluster.brokers[cluster.leader_of(TopicPartition("orders-dlt", 0))].logs[
                TopicPartition("orders-dlt", 0)
            ]
            dlt = [r for b in dlt_log.batches() for r in h.decode(b.raw)]
            return consumer, dlt

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def run_with(make_scheduler, failures):
    """``run`` with 3 attempts, 100 ms doubling backoff, for 2 s."""
    policy = RetryPolicy(attempts=3, backoff="exponential", delay_ms=100, multiplier=2)
    return run(failures, policy, 2000, make_scheduler)


def test_transient_failure_recovers_and_poison_dead_letters():
    consumer, dlt = run_with(None, {0: 0, 1: 1, 2: 5})
    assert sorted(consumer.processed) == [(b"0", 1), (b"1", 2)]
    assert consumer.dead == [(b"2", 3)]
    assert consumer.committed == {0: 6}  # 3 records + 3 redeliveries appended to "orders", all handled
    (dead,) = dlt
    assert dead.key == b"2" and dead.headers[h.ATTEMPT] == 3
    assert dead.headers[h.ORIGINAL_TOPIC] == "orders" and dead.headers[h.ORIGINAL_OFFSET] == 2
    assert dead.headers[h.ERROR] == "TimeoutError: record 2 failed"
    assert dead.extra == (("trace", b"t2"),) and dead.value == b"v"  # the record's own headers travel
    times = [t for key, t, _ in consumer.deliveries if key == b"2"]
    # redelivered exactly 100 ms, then 200 ms after each failure (hand-offs answered in the same ms)
    assert times == [0, 100, 300]


@settings(max_examples=15, deadline=None)
@given(
    failures=st.dictionaries(st.integers(0, 9), st.integers(0, 5), min_size=1, max_size=6),
    attempts=st.integers(1, 4),
    delay=st.integers(0, 300),
    exponential=st.booleans(),
)
def test_every_record_ends_exactly_once(failures, attempts, delay, exponential):
    policy = RetryPolicy(attempts=attempts, backoff="exponential" if exponential else "fixed", delay_ms=delay)
    consumer, dlt = run(failures, policy, 5000)
    ends = [k for k, _ in consumer.processed] + [k for k, _ in consumer.dead]
    assert sorted(ends) == sorted(str(i).encode() for i in failures)
    assert sorted(r.key for r in dlt) == sorted(k for k, _ in consumer.dead)
    for key, deliveries in consumer.processed + consumer.dead:
        assert deliveries <= attempts
        times = [t for k, t, _ in consumer.deliveries if k == key]
        assert len(times) == deliveries
        for n in range(1, len(times)):
            assert times[n] - times[n - 1] >= policy.delay_after(n)
    assert consumer.committed[0] == len(consumer.deliveries)  # every redelivery is appended to "orders"
