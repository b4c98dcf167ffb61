"""The fetch session cache's rules (Kafka's FetchSessionCache): epochs, room, and who may evict whom."""

from __future__ import annotations

from minibroker.broker.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSessionCache,
    next_epoch,
)
from minibroker.common.messages import TopicPartition


def parts(n: int) -> dict[TopicPartition, CachedPartition]:
    return {TopicPartition("t", i): CachedPartition(0, 1024) for i in range(n)}


def test_next_epoch_counts_up_wraps_to_one_and_keeps_final():
    assert (next_epoch(0), next_epoch(1), next_epoch(2**31 - 1)) == (1, 2, 1)
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_new_session_starts_at_epoch_one_with_a_nonzero_unique_id():
    cache = FetchSessionCache(10, seed=3)
    ids = [cache.maybe_create(0, False, parts(1)) for _ in range(10)]
    assert INVALID_SESSION_ID not in ids and len(set(ids)) == 10
    assert {cache.get(i).epoch for i in ids} == {1}
    assert cache.num_partitions == 10


def test_same_seed_same_session_ids():
    a, b = FetchSessionCache(5, seed=7), FetchSessionCache(5, seed=7)
    assert [a.maybe_create(0, False, parts(1)) for _ in range(5)] == [
        b.maybe_create(0, False, parts(1)) for _ in range(5)
    ]


def test_zero_slots_never_creates_a_session():
    assert FetchSessionCache(0).maybe_create(0, True, parts(3)) == INVALID_SESSION_ID


def test_a_full_cache_of_young_consumer_sessions_refuses_a_consumer():
    cache = FetchSessionCache(2)
    cache.maybe_create(0, False, parts(1))
    cache.maybe_create(0, False, parts(1))
    # young (created <= 120 s ago) and recently used: nobody unprivileged may evict them
    assert cache.maybe_create(EVICTION_MS, False, parts(100)) == INVALID_SESSION_ID
    assert (len(cache), cache.evictions) == (2, 0)


def test_a_session_unused_for_more_than_the_eviction_time_gives_way_to_anyone():
    cache = FetchSessionCache(2)
    stale = cache.maybe_create(0, False, parts(5))
    fresh = cache.maybe_create(10, False, parts(5))
    assert cache.maybe_create(EVICTION_MS, False, parts(1)) == INVALID_SESSION_ID  # 120 s is not more
    new = cache.maybe_create(EVICTION_MS + 1, False, parts(1))
    assert new != INVALID_SESSION_ID and cache.get(stale) is None and cache.get(fresh) is not None
    assert cache.evictions == 1


def test_touching_a_session_keeps_it_from_going_stale():
    cache = FetchSessionCache(2)
    used = cache.maybe_create(0, False, parts(1))
    idle = cache.maybe_create(1, False, parts(1))
    cache.touch(cache.get(used), 100_000)
    assert cache.maybe_create(EVICTION_MS + 2, False, parts(1)) != INVALID_SESSION_ID
    assert cache.get(idle) is None and cache.get(used) is not None


def test_a_follower_evicts_consumer_sessions_smallest_first_but_never_a_young_follower_session():
    cache = FetchSessionCache(3)
    small = cache.maybe_create(0, False, parts(1))
    big = cache.maybe_create(0, False, parts(9))
    follower = cache.maybe_create(0, True, parts(9))
    assert cache.maybe_create(1000, True, parts(1)) != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None
    # privileged beats unprivileged whatever the sizes: the 9-partition consumer session goes next
    assert cache.maybe_create(1000, True, parts(1)) != INVALID_SESSION_ID
    assert cache.get(big) is None and cache.get(follower) is not None
    # only young follower sessions are left: nobody may evict them
    assert cache.maybe_create(1000, True, parts(50)) == INVALID_SESSION_ID
    assert cache.evictions == 2


def test_a_consumer_evicts_only_sessions_created_more_than_the_eviction_time_ago_and_worth_less():
    cache = FetchSessionCache(2)
    first = cache.maybe_create(0, False, parts(3))
    second = cache.maybe_create(0, False, parts(2))
    later = EVICTION_MS + 1
    cache.touch(cache.get(first), later)  # old enough now: evictable by all
    cache.touch(cache.get(second), later)
    assert cache.maybe_create(later, False, parts(1)) == INVALID_SESSION_ID  # 1 partition < 2: worth less
    # an equal size loses too: the newcomer's key has id 0, below every session id (Kafka's EvictableKey)
    assert cache.maybe_create(later, False, parts(2)) == INVALID_SESSION_ID
    assert cache.maybe_create(later, False, parts(3)) != INVALID_SESSION_ID
    assert cache.get(second) is None and cache.get(first) is not None


def test_must_respond_on_records_errors_and_changed_offsets_only():
    cached = CachedPartition(0, 1024, high_watermark=5, log_start_offset=0)
    assert not cached.must_respond(False, 0, 5, 0)
    assert cached.must_respond(True, 0, 5, 0)
    assert cached.must_respond(False, 0, 6, 0) and cached.high_watermark == 6
    assert not cached.must_respond(False, 0, 6, 0)
    assert cached.must_respond(False, 0, 6, 2) and cached.log_start_offset == 2
    assert cached.must_respond(False, 6, -1, 2) and cached.high_watermark == -1
    assert cached.must_respond(False, 0, 6, 2)  # the error cleared: the partition is sent again
