"""Leader bookkeeping on Partition alone: the cases of Kafka's IsrExpirationTest and PartitionTest.

https://github.com/apache/kafka/blob/trunk/core/src/test/scala/unit/kafka/server/IsrExpirationTest.scala
https://github.com/apache/kafka/blob/trunk/core/src/test/scala/unit/kafka/cluster/PartitionTest.scala
"""

import pytest

from minibroker.broker.log import Log
from minibroker.broker.partition import Partition, PartitionError
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition

TP = TopicPartition("t", 0)


def leader(replicas=(0, 1, 2), isr=None, records=0, lag=30_000, min_isr=1, now=0) -> Partition:
    log = Log()
    if records:
        log.append_as_leader(records, records * 10, 0, now)
    partition = Partition(TP, 0, replicas, log, min_isr, lag)
    partition.make_leader(0, tuple(isr if isr is not None else replicas), 0, now)
    return partition


# --- IsrExpirationTest: lag 100 ms, leader LEO 20, followers first fetched 0 at t0 when the LEO was 0 ---
T0 = 1000


@pytest.fixture
def expiring():
    partition = leader(lag=100, now=T0)
    for follower in (1, 2):
        partition.update_follower_fetch_state(follower, 0, T0)
    partition.log.append_as_leader(20, 200, 0, T0)
    return partition


def test_stuck_follower_falls_out_after_the_lag(expiring):
    expiring.update_follower_fetch_state(1, 19, T0)
    assert 1 not in expiring.out_of_sync_replicas(T0)
    assert 1 in expiring.out_of_sync_replicas(T0 + 150)


def test_follower_that_never_fetches_again_falls_out(expiring):
    assert expiring.out_of_sync_replicas(T0 + 150) == [1, 2]


def test_slow_follower(expiring):
    expiring.update_follower_fetch_state(1, 18, T0)
    assert 1 not in expiring.out_of_sync_replicas(T0)
    expiring.update_follower_fetch_state(1, 19, T0 + 75)
    assert 1 not in expiring.out_of_sync_replicas(T0 + 75)
    assert 1 in expiring.out_of_sync_replicas(T0 + 150)
    expiring.update_follower_fetch_state(1, 20, T0 + 150)
    assert 1 not in expiring.out_of_sync_replicas(T0 + 150)


def test_caught_up_follower_is_never_lagging(expiring):
    expiring.update_follower_fetch_state(1, 20, T0)
    assert 1 not in expiring.out_of_sync_replicas(T0 + 150)
    assert expiring.out_of_sync_replicas(T0 + 100) == []  # strictly greater: 100 is not > 100
    assert expiring.out_of_sync_replicas(T0 + 101) == [2]


# --- PartitionTest (default lag 30000, leader log seeded with 10 records) ---
def test_maybe_shrink_isr():
    partition = leader(records=10)
    partition.update_follower_fetch_state(1, 10, 0)
    assert partition.isr_shrink_candidate(0) is None
    proposed = partition.isr_shrink_candidate(30_001)
    assert proposed == (0, 1)
    partition.propose("shrink", proposed)
    assert partition.isr == (0, 1, 2) and partition.maximal_isr == (0, 1, 2)
    assert partition.high_watermark == 0
    assert partition.isr_shrink_candidate(30_001) is None  # nothing new while a change is pending
    assert partition.commit_isr((0, 1), 1, 30_001) is True
    assert partition.isr == (0, 1) and partition.high_watermark == 10


def test_should_not_shrink_isr_if_previous_fetch_is_caught_up():
    partition = leader(replicas=(0, 1), records=10)
    partition.update_follower_fetch_state(1, 5, 5000)
    assert partition.high_watermark == 5
    assert partition.remote[1].last_caught_up_time_ms == 0  # still the init time
    partition.log.append_as_leader(5, 50, 0, 10_001)
    partition.update_follower_fetch_state(1, 10, 10_001)
    assert partition.remote[1].last_caught_up_time_ms == 5000  # the first fetch's time
    assert partition.high_watermark == 10
    assert partition.isr_shrink_candidate(10_001) is None


def test_should_not_shrink_isr_if_follower_caught_up_to_log_end():
    partition = leader(replicas=(0, 1), records=10)
    partition.update_follower_fetch_state(1, 10, 0)
    assert partition.high_watermark == 10
    assert partition.isr_shrink_candidate(30_001) is None


def test_high_watermark_does_not_advance_under_min_isr():
    partition = leader(isr=(0, 1), records=10, min_isr=3)
    assert partition.is_under_min_isr
    partition.update_follower_fetch_state(1, 10, 0)
    assert partition.high_watermark == 0
    partition.update_follower_fetch_state(2, 10, 0)
    proposed = partition.isr_expansion_candidate(2)
    assert proposed == (0, 1, 2)
    partition.propose("expand", proposed)
    assert partition.high_watermark == 0
    assert len(partition.maximal_isr) == 3 and partition.pending is not None
    partition.commit_isr(proposed, 1, 0)
    assert not partition.is_under_min_isr and partition.high_watermark == 10


def test_without_the_freeze_the_hw_advances_under_min_isr():
    partition = leader(isr=(0, 1), records=10, min_isr=3)
    partition.freeze_hw_under_min_isr = False
    partition.update_follower_fetch_state(1, 10, 0)
    assert partition.high_watermark == 10
    assert partition.check_enough_replicas_reach_offset(10) == (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_hw_waits_for_a_caught_up_follower_outside_the_isr():
    partition = leader(isr=(0, 1), records=10)
    partition.update_follower_fetch_state(2, 10, 0)  # outside the ISR, caught up at t=0
    partition.log.append_as_leader(5, 50, 0, 100)
    partition.update_follower_fetch_state(2, 12, 100)  # behind, but caught up within the lag
    partition.update_follower_fetch_state(1, 15, 100)
    assert partition.high_watermark == 12
    partition.log.append_as_leader(1, 10, 0, 40_000)
    partition.update_follower_fetch_state(1, 16, 40_000)  # 40 s on, broker 2 no longer counts
    assert partition.high_watermark == 16


def test_a_follower_outside_the_isr_is_never_caught_up_before_it_reaches_the_leo():
    partition = leader(isr=(0, 1), records=10)
    partition.update_follower_fetch_state(2, 4, 0)
    partition.update_follower_fetch_state(1, 10, 0)
    assert partition.high_watermark == 10


def test_append_checks_leadership_and_min_isr():
    partition = leader(isr=(0,), min_isr=2)
    with pytest.raises(PartitionError) as raised:
        partition.append_records_to_leader(1, 10, -1, 0)
    assert raised.value.error is Errors.NOT_ENOUGH_REPLICAS
    batch, raised_hw, duplicate = partition.append_records_to_leader(1, 10, 1, 0)  # acks=1 is not checked
    assert batch.base_offset == 0 and raised_hw is False and duplicate is False  # under min ISR: the HW holds
    partition.make_follower(1, 1, (1,), 1)
    with pytest.raises(PartitionError) as raised:
        partition.append_records_to_leader(1, 10, 1, 0)
    assert raised.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert partition.check_enough_replicas_reach_offset(1) == (False, Errors.NOT_LEADER_OR_FOLLOWER)


def test_effective_min_isr_is_capped_by_the_replication_factor():
    partition = leader(replicas=(0, 1), min_isr=3)
    assert partition.effective_min_isr == 2 and not partition.is_under_min_isr


def test_leader_epoch_fencing():
    partition = leader()
    partition.make_leader(3, (0, 1, 2), 1, 0)
    partition.check_leader_epoch(3)
    partition.check_leader_epoch(-1)
    with pytest.raises(PartitionError) as raised:
        partition.check_leader_epoch(2)
    assert raised.value.error is Errors.FENCED_LEADER_EPOCH
    with pytest.raises(PartitionError) as raised:
        partition.check_leader_epoch(4)
    assert raised.value.error is Errors.UNKNOWN_LEADER_EPOCH
