"""The redis backend against a real redis-server on loopback."""

from __future__ import annotations

import threading

from minibroker.retry import headers as h
from minibroker.retry.redis_scheduler import RedisScheduler

from .test_retry import run_with


def record(i: int, attempt: int = 1) -> h.RetryRecord:
    return h.RetryRecord(str(i).encode(), b"v", 0, {h.ORIGINAL_OFFSET: i, h.ATTEMPT: attempt})


def test_claims_only_due_members_once(redis_client):
    scheduler = RedisScheduler(redis_client, "t1")
    for i, due in enumerate([30, 10, 1234]):
        scheduler.schedule(record(i), due)
    assert scheduler.next_due() == 10
    assert scheduler.claim_due(9) == []
    assert [r.key for r in scheduler.claim_due(30)] == [b"1", b"0"]
    assert scheduler.claim_due(30) == [] and scheduler.pending() == 3  # two in flight, one waiting
    scheduler.done([record(1), record(0)])
    assert scheduler.pending() == 1


def test_recover_puts_back_claims_of_a_dead_scheduler(redis_client):
    dead = RedisScheduler(redis_client, "t2")
    dead.schedule(record(7), 5)
    assert [r.key for r in dead.claim_due(5)] == [b"7"]  # claimed, then the scheduler died before done
    survivor = RedisScheduler(redis_client, "t2")
    assert survivor.recover(claimed_before_ms=5) == 1
    assert [r.key for r in survivor.claim_due(6)] == [b"7"]


def test_two_concurrent_schedulers_never_deliver_one_record_twice(redis_client):
    """Two schedulers (threads, own connections) claim from one sorted set while it fills."""
    import redis

    port = redis_client.connection_pool.connection_kwargs["port"]
    total = 3000
    feeder = RedisScheduler(redis_client, "shared")
    claimed: list[list[bytes]] = [[], []]
    finished = threading.Event()

    def claimer(n: int) -> None:
        scheduler = RedisScheduler(redis.Redis(host="127.0.0.1", port=port), "shared", batch=7)
        while True:
            batch = scheduler.claim_due(10**12)
            claimed[n].extend(r.key for r in batch)
            scheduler.done(batch)
            if not batch and finished.is_set() and scheduler.pending() == 0:
                return

    threads = [threading.Thread(target=claimer, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for i in range(total):
        feeder.schedule(record(i), i)
    finished.set()
    for thread in threads:
        thread.join(timeout=60)
    both = claimed[0] + claimed[1]
    assert len(both) == total and len(set(both)) == total
    assert not set(claimed[0]) & set(claimed[1])
    assert claimed[0] and claimed[1]  # both took part


def test_retrying_consumer_on_the_redis_backend(redis_client):
    consumer, dlt = run_with(lambda cluster: RedisScheduler(redis_client, "orders"), {0: 0, 1: 1, 2: 5})
    assert sorted(consumer.processed) == [(b"0", 1), (b"1", 2)]
    assert consumer.dead == [(b"2", 3)] and [r.key for r in dlt] == [b"2"]
    times = [t for key, t, _ in consumer.deliveries if key == b"2"]
    assert times[1] - times[0] >= 100 and times[2] - times[1] >= 200
    assert redis_client.zcard("orders") == 0 and redis_client.zcard("orders:inflight") == 0


def handed_off(offset: int, attempt: int, due: int, error: str = "TimeoutError: a") -> h.RetryRecord:
    """What an application hands off after delivery ``attempt`` of the record first consumed at
    orders[0]@``offset`` failed: its due time and error are its own, so two hand-offs differ in bytes."""
    fields = {
        h.ORIGINAL_TOPIC: "orders",
        h.ORIGINAL_PARTITION: 0,
        h.ORIGINAL_OFFSET: offset,
        h.ATTEMPT: attempt,
        h.DUE: due,
        h.ERROR: error,
    }
    return h.RetryRecord(b"k%d" % offset, b"v", due - 100, fields)


def test_a_duplicate_delivery_handed_off_again_is_the_same_entry(redis_client):
    """A delivery made twice (a crash's redelivery) fails twice and is handed off twice, with other due
    times: one entry while the first is held, none after it was delivered; the next attempt is new."""
    scheduler = RedisScheduler(redis_client, "t9", batch=10)
    assert (
        scheduler.schedule_many([(handed_off(5, 2, 1000), 1000), (handed_off(5, 2, 1040, "E: b"), 1040)]) == 1
    )
    assert scheduler.schedule_many([(handed_off(5, 2, 1070), 1070)]) == 0  # still held: a twin
    (claimed,) = scheduler.claim_due(2000)
    assert claimed.headers[h.DUE] == 1000
    assert scheduler.schedule_many([(handed_off(5, 2, 1090), 1090)]) == 0  # in flight: a twin
    scheduler.done([claimed])
    assert scheduler.schedule_many([(handed_off(5, 2, 1200), 1200)]) == 0  # delivered: tombstoned
    assert scheduler.schedule_many([(handed_off(5, 3, 1300), 1300), (handed_off(6, 2, 1300), 1300)]) == 2
    assert scheduler.pending() == 2 and redis_client.hlen("t9:ids") == 2


def test_a_redis_that_comes_back_empty_is_noticed_at_the_next_claim(volatile_redis):
    lost = []
    scheduler = RedisScheduler(volatile_redis.client, "t10", batch=10)
    scheduler.on_lost = lost.append
    scheduler.schedule_many([(handed_off(i, 1, 5000), 5000) for i in range(7)])
    assert scheduler.claim_due(100) == [] and lost == []  # the marker is written, nothing is due
    assert scheduler.claim_due(100) == [] and lost == []
    volatile_redis.restart()  # no persistence: everything is gone
    assert scheduler.claim_due(100) == [] and lost == [7]  # once, with what it held at the last claim
    assert scheduler.claim_due(100) == [] and lost == [7]
    other = RedisScheduler(volatile_redis.client, "t10")  # an instance that started after the loss
    other.on_lost = lost.append
    assert other.claim_due(100) == [] and lost == [7]
