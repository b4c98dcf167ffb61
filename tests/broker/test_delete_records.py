"""DeleteRecords and its purgatory: the leader's log start offset, the low watermark, exact outcomes.

The ReplicaManager on a manual clock (conftest's Harness) for the leader's side, and the cluster on
the autojump clock for followers that learn the log start offset from fetch answers.
"""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.common.messages import (
    LOG_END,
    DeleteRecordsRequest,
    FetchPartition,
    FetchRequest,
    TopicPartition,
)
from minibroker.sim import TopicSpec, open_cluster
from tests.broker.conftest import TP, Harness

OTHER = TopicPartition("t", 1)


def delete(h: Harness, offsets: dict, timeout_ms: int = 100) -> list:
    box: list = []
    h.rm.delete_records(DeleteRecordsRequest(offsets, timeout_ms, f"d{len(h.responses)}"), box.append)
    h.responses.append(box)
    return box


def follower_fetch(h: Harness, replica: int, offset: int, log_start: int) -> list:
    request = FetchRequest(
        replica, 0, 1, 1 << 20, {TP: FetchPartition(offset, 1 << 20, -1, -1, log_start)}, LOG_END, "rf"
    )
    box: list = []
    h.rm.fetch_messages(request, box.append)
    return box


def led_with_ten(h: Harness) -> None:
    h.lead()
    h.produce(10, acks=1)
    follower_fetch(h, 1, 10, 0)
    follower_fetch(h, 2, 10, 0)
    assert h.rm.partitions[TP].high_watermark == 10


def test_waits_for_every_live_follower_to_report_the_new_log_start():
    h = Harness()
    led_with_ten(h)
    box = delete(h, {TP: 4})
    partition = h.rm.partitions[TP]
    assert box == [] and partition.log.log_start_offset == 4 and partition.low_watermark() == 0
    assert h.rm.delete_records_purgatory.num_delayed() == 1
    follower_fetch(h, 1, 10, 4)
    assert box == [] and partition.low_watermark() == 0  # broker 2 still reports 0
    follower_fetch(h, 2, 10, 4)
    (response,) = box
    part = response.partitions[TP]
    assert (part.error, part.low_watermark, response.cause) == (Errors.NONE, 4, "condition")
    assert h.rm.delete_records_purgatory.num_delayed() == 0


def test_times_out_with_request_timed_out_and_the_low_watermark_it_was_accepted_with():
    h = Harness()
    led_with_ten(h)
    box = delete(h, {TP: 4}, timeout_ms=30)
    follower_fetch(h, 1, 10, 4)
    h.advance(29)
    assert box == []
    h.advance(30)
    (response,) = box
    part = response.partitions[TP]
    assert (part.error, part.low_watermark, response.cause) == (Errors.REQUEST_TIMED_OUT, 0, "expiry")
    assert h.rm.delete_records_purgatory.expirations == 1
    assert h.rm.delete_records_purgatory.expires_by_key == {TP: 1}


def test_minus_one_means_the_high_watermark_and_beyond_it_is_out_of_range():
    h = Harness()
    h.lead(replicas=(0,), isr=(0,))
    h.produce(10, acks=1)
    h.produce(5, acks=0)  # a single replica: HW 15
    (beyond,) = delete(h, {TP: 16})
    assert beyond.partitions[TP].error is Errors.OFFSET_OUT_OF_RANGE
    assert (beyond.partitions[TP].low_watermark, beyond.cause) == (-1, "immediate")
    (below,) = delete(h, {TP: -2})
    assert below.partitions[TP].error is Errors.OFFSET_OUT_OF_RANGE
    (to_hw,) = delete(h, {TP: -1})  # a single replica: the low watermark is the leader's own
    assert (to_hw.partitions[TP].error, to_hw.partitions[TP].low_watermark) == (Errors.NONE, 15)
    assert to_hw.cause == "condition"
    (lower,) = delete(h, {TP: 3})  # below the log start: nothing moves, done at once
    assert (lower.partitions[TP].error, lower.partitions[TP].low_watermark) == (Errors.NONE, 15)
    assert h.rm.partitions[TP].log.log_start_offset == 15


def test_errors_per_partition_unknown_and_not_leader():
    h = Harness()
    h.follow(leader=1, epoch=1)
    (response,) = delete(h, {TP: 0, TopicPartition("nope", 0): 0})
    assert response.partitions[TP].error is Errors.NOT_LEADER_OR_FOLLOWER
    assert response.partitions[TopicPartition("nope", 0)].error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert h.rm.delete_records_purgatory.num_delayed() == 0  # nothing accepted: answered at once


def test_a_consumer_below_the_log_start_gets_offset_out_of_range():
    h = Harness()
    led_with_ten(h)
    delete(h, {TP: 5})
    (response,) = h.fetch(4, max_wait=0)
    assert response.partitions[TP].error is Errors.OFFSET_OUT_OF_RANGE
    (response,) = h.fetch(5, max_wait=0)
    assert response.partitions[TP].error is Errors.NONE
    assert response.partitions[TP].log_start_offset == 5


def test_a_fenced_follower_does_not_hold_the_low_watermark():
    h = Harness()
    led_with_ten(h)
    box = delete(h, {TP: 6})
    follower_fetch(h, 1, 10, 6)
    assert box == []
    from minibroker.controller.broker_registrations import FENCED, BrokerRegistrations

    h.rm.apply_registrations(BrokerRegistrations().with_state(2, FENCED))
    h.rm.delete_records_purgatory.check_and_complete(TP)
    (response,) = box
    assert (response.partitions[TP].error, response.partitions[TP].low_watermark) == (Errors.NONE, 6)


async def test_a_follower_behind_the_log_start_starts_again_there(autojump_clock):
    async with open_cluster(2, [TopicSpec("t", 1, 2)], {"replica.lag.time.max.ms": 100}) as cluster:
        cluster.pause_fetcher(1)
        producer = cluster.producer("p", acks=1)
        await producer.send_and_wait("t", 0, count=10)
        await cluster.clock.sleep_until(1000)  # broker 1 leaves the ISR: the HW moves on without it
        view = cluster.snapshot().partition("t-0")
        assert view.isr == (0,) and view.replica(0).high_watermark == 10
        assert view.replica(1).log_end_offset == 0
        admin = cluster.admin("admin")
        (request,) = admin.delete_records({TP: 8}, timeout_ms=5000)
        cluster.resume_fetcher(1)
        await request.wait()
        # broker 1 asks for offset 0, is told the log starts at 8, starts there and reports it
        assert (request.errors, request.low_watermarks, request.cause) == (
            {"t-0": "NONE"},
            {"t-0": 8},
            "condition",
        )
        # the answer at 1000 brought no records in no time: the fetcher's 1 ms rule, next fetch at 1001
        assert request.completed_ms == 1001
        await cluster.clock.sleep_until(1002)
        # its log starts inside the batch 0..9: it holds the whole batch, its log start stays 8
        follower = cluster.snapshot().partition("t-0").replica(1)
        assert (follower.log_start_offset, follower.log_end_offset) == (8, 10)


def test_losing_leadership_does_not_check_it_a_later_check_answers_not_leader():
    h = Harness()
    led_with_ten(h)
    box = delete(h, {TP: 4}, timeout_ms=30)
    h.follow(leader=1, epoch=1)  # Kafka's become-follower checks produce and fetch only
    assert box == [] and h.rm.delete_records_purgatory.num_delayed() == 1
    h.rm.delete_records_purgatory.check_and_complete(TP)
    (response,) = box
    part = response.partitions[TP]
    assert (part.error, part.low_watermark) == (Errors.NOT_LEADER_OR_FOLLOWER, -1)


def test_without_a_check_it_expires_after_losing_leadership():
    h = Harness()
    led_with_ten(h)
    box = delete(h, {TP: 4}, timeout_ms=30)
    h.follow(leader=1, epoch=1)
    h.advance(30)
    (response,) = box
    assert (response.partitions[TP].error, response.cause) == (Errors.REQUEST_TIMED_OUT, "expiry")


def test_a_compacted_topic_refuses_delete_records_with_policy_violation():
    h = Harness()
    led_with_ten(h)
    h.rm.topic_overrides = lambda topic: {"cleanup.policy": "compact"}
    (response,) = delete(h, {TP: 4})
    assert response.partitions[TP].error is Errors.POLICY_VIOLATION
    assert h.rm.partitions[TP].log.log_start_offset == 0
