"""The log cleaner: Kafka's triggers (dirty ratio, compaction lags, segment rolls), what a cleaning keeps,
tombstones' delete horizon, and the cleaner's runs on the broker's timer at exact virtual times.

Pure parts on hand-built logs; the cadence on the cluster under trio's MockClock (autojump).
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from minibroker.broker.log import Log
from minibroker.broker.log_cleaner import Cleaner
from minibroker.broker.log_cleaner_manager import cleanable, grab_filthiest
from minibroker.broker.log_config import LogConfig
from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.common.record_batch import build_batch, records
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.group import records as group_records
from minibroker.coordinator.group.messages import (
    CommitOffset,
    OffsetCommitRequest,
    OffsetFetchGroup,
    OffsetFetchRequest,
)
from minibroker.sim import TopicSpec, open_cluster
from tests.coordinator.group.helpers import Raw, open_group_cluster

TP = TopicPartition("t", 0)
COMPACT = LogConfig(compact=True, segment_ms=100, delete_retention_ms=1000, min_cleanable_ratio=0.1)


def append(log: Log, now: int, keys: str, tombstone: bool = False) -> None:
    """One batch of one record per key (a space-free string of one-letter keys)."""
    raw = build_batch((now, k.encode(), None if tombstone else f"{k}{now}".encode(), []) for k in keys)
    log.append_as_leader(len(keys), len(raw), 0, now, raw=raw)
    log.maybe_increment_high_watermark(log.log_end_offset)


def contents(log: Log) -> list[tuple[int, str, str | None]]:
    """(offset, key, value) of every record the log holds, in order."""
    out = []
    for batch in log.batches():
        for record in records(batch.raw):
            offset = batch.base_offset + record.offset
            out.append((offset, record.key.decode(), None if record.value is None else record.value.decode()))
    return out


def clean(log: Log, now: int, config: LogConfig = COMPACT):
    ltc = grab_filthiest([(TP, log, config)], now)
    return None if ltc is None else (ltc, Cleaner().clean(ltc, log, config, now))


def a_log(config: LogConfig = COMPACT) -> Log:
    return Log(config.segment_bytes, config.segment_ms)


def test_the_active_segment_is_never_cleaned():
    log = a_log()
    append(log, 0, "aa")
    append(log, 50, "a")  # same segment: 50 - 0 <= 100
    assert len(log.segments) == 1 and clean(log, 10_000) is None
    assert [key for _, key, _ in contents(log)] == ["a", "a", "a"]


def test_a_cleaning_keeps_the_latest_value_per_key_at_its_offset():
    log = a_log()
    append(log, 0, "abc")
    append(log, 200, "ab")  # rolls: 200 - 0 > 100
    append(log, 400, "x")  # rolls: the segment of offsets 3-4 is now cleanable too
    ltc, stats = clean(log, 500)
    assert (ltc.first_dirty_offset, ltc.first_uncleanable_offset) == (0, 5)
    assert (stats.removed, stats.tombstones_removed, log.cleaner_checkpoint) == (2, 0, 5)
    assert contents(log) == [(2, "c", "c0"), (3, "a", "a200"), (4, "b", "b200"), (5, "x", "x400")]
    assert (log.log_start_offset, log.log_end_offset) == (0, 6)
    assert log.read(0, 1 << 20).batches[0].base_offset == 2  # a read in a hole starts at the next record


def test_min_cleanable_dirty_ratio_decides():
    log = a_log()
    append(log, 0, "abcdefgh")
    append(log, 200, "z")  # segment 0 (one batch of 8) becomes cleanable
    append(log, 400, "y")
    strict = LogConfig(compact=True, segment_ms=100, min_cleanable_ratio=0.99)
    assert clean(log, 500, strict) is not None  # the first cleaning: everything is dirty, ratio 1.0
    append(log, 600, "y")  # segment [z] is dirty: a small part of the log
    ltc = cleanable(TP, log, strict, 700)
    assert 0 < ltc.cleanable_ratio < 0.99 and clean(log, 700, strict) is None
    assert clean(log, 700, COMPACT) is not None  # ratio above 0.1


def test_min_compaction_lag_holds_back_recent_segments():
    lagged = LogConfig(compact=True, segment_ms=100, min_compaction_lag_ms=1000, min_cleanable_ratio=0.1)
    log = a_log(lagged)
    append(log, 0, "aa")
    append(log, 200, "b")
    ltc = cleanable(TP, log, lagged, 999)  # the segment's newest record, at 0, is 999 ms old: too young
    assert ltc.first_uncleanable_offset == 0 and clean(log, 999, lagged) is None
    ltc, stats = clean(log, 1000, lagged)  # 1000 ms old: not > now - lag any more
    assert (ltc.first_uncleanable_offset, stats.removed) == (2, 1)


def test_max_compaction_lag_forces_a_cleaning_below_the_ratio():
    lazy = LogConfig(compact=True, segment_ms=100, min_cleanable_ratio=1.0, max_compaction_lag_ms=5000)
    log = a_log(lazy)
    append(log, 10, "aa")  # Kafka skips first-batch timestamps of 0: this one is at 10
    append(log, 200, "b")
    assert clean(log, 5010, lazy) is None  # 10 is not before 5010 - 5000
    ltc, stats = clean(log, 5011, lazy)
    assert ltc.need_compaction_now and stats.removed == 1


def test_a_tombstone_goes_at_the_first_cleaning_after_its_delete_horizon():
    log = a_log()
    append(log, 0, "ab")
    append(log, 200, "a", tombstone=True)
    append(log, 400, "c")
    _, stats = clean(log, 500)  # a@0 goes, the tombstone a@2 stays until 500 + 1000
    assert (stats.removed, log.delete_horizons) == (1, {2: 1500})
    append(log, 600, "d")  # segment [c] is dirty
    append(log, 800, "e")
    _, stats = clean(log, 1499)
    assert stats.tombstones_removed == 0 and (2, "a", None) in contents(log)
    append(log, 1600, "f")
    _, stats = clean(log, 1700)  # first cleaning at or after 1500
    assert (stats.tombstones_removed, log.delete_horizons) == (1, {})
    assert [key for _, key, _ in contents(log)] == ["b", "c", "d", "e", "f"]


def test_coordinator_records_are_compacted_by_their_own_keys():
    offsets = group_records.offset_record
    value = group_records.OffsetAndMetadata(5, 0, None, 0)
    log = a_log()
    for now, committed in ((0, value), (200, value), (400, None)):
        data = (offsets("g", "t", 0, committed), group_records.group_record("g", {"generation": now}))
        log.append_as_leader(2, sum(map(len, data)), 0, now, values=data)
    log.append_as_leader(1, 1, 0, 600, values=(b"not json",))
    log.maybe_increment_high_watermark(log.log_end_offset)
    cleaner = Cleaner(lambda topic: group_records.compaction_key)
    ltc = grab_filthiest([(TP, log, COMPACT)], 700)
    stats = cleaner.clean(ltc, log, COMPACT, 700)
    assert stats.removed == 4  # both older offsets and group records; the tombstone stays (horizon 1700)
    kept = [(b.base_offset, group_records.decode(b.values[0])["type"]) for b in log.batches()[:-1]]
    assert kept == [(4, "offset"), (5, "group")]


async def test_the_cleaner_runs_on_the_broker_timer_every_backoff(autojump_clock):
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.1"}
    async with open_cluster(1, [TopicSpec("t", configs=configs)], {"log.cleaner.backoff.ms": 700}) as cluster:
        producer = cluster.producer("p")

        async def produce(at: int, keys: str) -> None:
            await cluster.clock.sleep_until(at)
            raw = build_batch((at, k.encode(), b"v", []) for k in keys)
            (request,) = producer.produce({TP: ProduceData(len(keys), len(raw), raw=raw)})
            await request.wait()

        await produce(100, "ab")
        log = cluster.brokers[0].replica_manager.partitions[TP].log
        cleaner = cluster.brokers[0].replica_manager.log_cleaner
        await produce(300, "a")  # rolls at 300: the cleaner is armed for the next run, 700
        await cluster.clock.sleep_until(699)
        assert (cleaner.cleanings, log.cleaner_checkpoint) == (0, None)
        await cluster.clock.sleep_until(700)
        await cluster.clock.sleep_until(701)
        assert (cleaner.cleanings, log.cleaner_checkpoint) == (1, 2)
        await produce(900, "c")  # rolls: [a] becomes cleanable; next run at 1400
        await cluster.clock.sleep_until(1399)
        assert cleaner.cleanings == 1
        await cluster.clock.sleep_until(1401)
        assert (cleaner.cleanings, log.cleaner_checkpoint) == (2, 3)
        assert [batch.base_offset for batch in log.batches()] == [1, 2, 3]  # a@0 went


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 400), st.sampled_from("abcd"), st.booleans(), st.booleans()), max_size=40
    )
)
def test_property_latest_value_per_key_survives_and_tombstones_wait_for_their_horizon(steps):
    """Appends (gap, key, tombstone?) with a cleaning after some of them: after every cleaning the latest
    record of each key is still there at its offset unless it is a tombstone that a cleaning removed at
    or after its append time + delete.retention.ms; no offset moves, no record of the active segment goes."""
    log = a_log()
    now = 0
    appended: dict[int, tuple[str, bool, int]] = {}  # offset -> key, tombstone, append time
    for gap, key, tombstone, run in steps:
        now += gap
        appended[log.log_end_offset] = (key, tombstone, now)
        append(log, now, key, tombstone)
        if not run:
            continue
        active_start = log.segments[-1].base_offset
        before = {offset for offset, _, _ in contents(log)}
        clean(log, now)
        after = {offset for offset, _, _ in contents(log)}
        assert after <= before and {o for o in before if o >= active_start} <= after
        latest = {}
        for offset, (k, _, _) in sorted(appended.items()):
            latest[k] = offset
        for k, offset in latest.items():
            _, dead, at = appended[offset]
            if offset not in after:
                assert dead and now >= at + COMPACT.delete_retention_ms, (k, offset, now)
        for offset in before - after:
            k, dead, at = appended[offset]
            assert offset != latest[k] or (dead and now >= at + COMPACT.delete_retention_ms)


async def test_consumer_offsets_stop_growing_and_the_latest_commit_survives_a_reload(autojump_clock):
    config = {"offsets.topic.segment.bytes": 600, "log.cleaner.backoff.ms": 1000}
    cm, cluster, _ = await open_group_cluster(1, config)
    try:
        cluster.create_topic(TopicSpec("t", 1, 1))
        raw = Raw(cluster, "app")
        for k in range(100):  # one commit every 100 ms for 10 s: about 4 records per 600-byte segment
            await cluster.clock.sleep_until(100 * (k + 1))
            request = OffsetCommitRequest("g", (CommitOffset("t", 0, k),), -1, "")
            assert [e.name for *_, e in (await raw.call(0, request)).partitions] == ["NONE"]
        log = cluster.brokers[0].replica_manager.partitions[TopicPartition(OFFSETS_TOPIC, 0)].log
        assert log.log_end_offset == 100
        # cleaned every second from 1000 to 10000: of the commits of (g, t, 0) only the newest one below
        # the active segment (95) and those in it (96..99) are left; emptied segments stay, merged
        assert [batch.base_offset for batch in log.batches()] == [95, 96, 97, 98, 99]
        assert cluster.brokers[0].replica_manager.log_cleaner.cleanings == 10
        assert [segment.base_offset for segment in log.segments] == [0, 88, 92, 96]
        cluster.crash(0)
        await cluster.restart(0)
        await cluster.clock.sleep_until(cluster.now() + 100)  # the coordinator reads the compacted log
        fetched = await raw.call(0, OffsetFetchRequest((OffsetFetchGroup("g"),)))
        assert [(o.partition, o.offset) for o in fetched.groups[0].offsets] == [(0, 99)]
    finally:
        await cm.__aexit__(None, None, None)


async def test_a_follower_behind_copies_the_compacted_leader_across_its_holes(autojump_clock):
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.1"}
    topic = TopicSpec("t", 1, 2, configs=configs)
    settings = {"log.cleaner.backoff.ms": 1000, "replica.lag.time.max.ms": 200}
    async with open_cluster(2, [topic], settings) as cluster:
        producer = cluster.producer("p", {"acks": 1})
        cluster.pause_fetcher(1)  # it leaves the ISR, so the leader's HW (and what it may clean) moves on
        for at, keys in ((100, "abc"), (300, "ab"), (500, "c"), (700, "d")):
            await cluster.clock.sleep_until(at)
            raw = build_batch((at, k.encode(), b"v", []) for k in keys)
            producer.produce({TP: ProduceData(len(keys), len(raw), raw=raw)})
        await cluster.clock.sleep_until(1001)  # broker 0 cleaned at 1000: a@0, b@1, c@2 went
        leader = cluster.brokers[0].replica_manager.partitions[TP].log
        assert [b.base_offset for b in leader.batches()] == [3, 5, 6]
        cluster.resume_fetcher(1)
        await cluster.clock.sleep_until(2500)
        follower = cluster.brokers[1].replica_manager.partitions[TP].log
        assert [(b.base_offset, b.count) for b in follower.batches()] == [(3, 2), (5, 1), (6, 1)]
        assert (follower.log_end_offset, follower.high_watermark) == (7, 7)


def test_consumer_group_members_keep_a_record_each_under_compaction():
    """Two members of one KIP-848 group are two keys: compaction keeps both members' latest records."""
    first = group_records.compaction_key(group_records.consumer_member_record("g", "m1", {"epoch": 1}))
    second = group_records.compaction_key(group_records.consumer_member_record("g", "m2", {"epoch": 1}))
    again = group_records.compaction_key(group_records.consumer_member_record("g", "m1", {"epoch": 2}))
    assert first is not None and second is not None
    assert first != second and first == again
