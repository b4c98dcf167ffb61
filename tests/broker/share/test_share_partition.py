"""Share partitions and DelayedShareFetch on a manual clock: locks expire at exactly their duration,
delivery counts rise, records are archived at the limit, a parked ShareFetch is woken by a produce, by a
lock expiry, or times out. Kafka's SharePartitionTest and DelayedShareFetchTest cover the same ground:
https://github.com/apache/kafka/blob/trunk/core/src/test/java/kafka/server/share/SharePartitionTest.java
"""

from __future__ import annotations

from minibroker.broker.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    RecordState,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    SharePartitionManager,
)
from minibroker.common.errors import Errors
from tests.broker.conftest import TP, Harness

ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def harness(**settings) -> Harness:
    """A sole-replica leader of ``t-0`` with a share partition manager (``h.rm_share``), locks of 1 s."""
    h = Harness(**{"group.share.record.lock.duration.ms": 1000, **settings})
    h.lead(replicas=(0,), isr=(0,))
    h.rm_share = SharePartitionManager(h.rm)
    return h


def started(count: int, **settings) -> Harness:
    """``harness`` with member m1's share session open (the window starts at the HW, 0), then ``count``
    records produced."""
    h = harness(**settings)
    share_fetch(h, wait=0)
    h.produce(count, acks=1)
    return h


def share_fetch(h: Harness, member="m1", epoch=None, wait=500, acks=None, max_records=500) -> list:
    manager = h.rm_share
    session = manager.sessions.get("g", member)
    if epoch is None:
        epoch = 0 if session is None else session.epoch
    box: list = []
    request = ShareFetchRequest("g", member, epoch, wait, (TP,), acks or {}, max_records=max_records)
    manager.share_fetch(request, box.append)
    return box


def acquired(box) -> list[tuple[int, int, int]]:
    (response,) = box
    part = response.partitions[TP]
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in part.acquired]


def ack(first, last, kind):
    return {TP: (AcknowledgementBatch(first, last, (int(kind),)),)}


def acknowledge(h: Harness, acks, member="m1") -> list:
    session = h.rm_share.sessions.get("g", member)
    box: list = []
    h.rm_share.share_acknowledge(ShareAcknowledgeRequest("g", member, session.epoch, acks), box.append)
    return box


def test_a_lock_expires_at_exactly_its_duration_and_the_record_comes_back_with_delivery_count_2():
    h = harness()
    assert acquired(share_fetch(h, wait=0)) == []  # latest: the window starts at the HW, 0
    h.produce(3, acks=1)
    h.advance(100)
    assert acquired(share_fetch(h, wait=0)) == [(0, 2, 1)]
    sp = h.rm_share.share_partitions[("g", TP)]
    assert [r.state for r in sp.records.values()] == [RecordState.ACQUIRED] * 3
    h.advance(1099)
    assert sp.count(RecordState.ACQUIRED) == 3
    h.advance(1100)
    assert sp.count(RecordState.AVAILABLE) == 3 and sp.lock_expiries == 1
    assert acquired(share_fetch(h, member="m2", wait=0)) == [(0, 2, 2)]
    expiries = [e for e in h.events.of_kind("share.lock.expire")]
    assert [(e["time_ms"], e["offset"], e["last_offset"], e["member"]) for e in expiries] == [
        (1100, 0, 2, "m1")
    ]


def test_accept_moves_the_start_offset_and_cancels_the_lock():
    h = started(2)
    share_fetch(h, wait=0)
    sp = h.rm_share.share_partitions[("g", TP)]
    timer_size = h.rm.timer.size
    box = share_fetch(h, wait=0, acks=ack(0, 1, ACCEPT))
    assert box[0].partitions[TP].acknowledge_error is Errors.NONE
    assert (sp.start_offset, sp.end_offset, sp.records) == (2, 1, {})
    assert h.rm.timer.size == timer_size - 1 and not sp.locks


def test_reject_and_the_delivery_limit_archive_records():
    h = started(2, **{"group.share.delivery.count.limit": 2})
    assert acquired(share_fetch(h, wait=0)) == [(0, 1, 1)]
    acknowledge(h, {TP: (AcknowledgementBatch(0, 1, (int(REJECT), int(RELEASE))),)})
    sp = h.rm_share.share_partitions[("g", TP)]
    assert sp.records[1].state is RecordState.AVAILABLE and sp.start_offset == 1
    assert acquired(share_fetch(h, wait=0)) == [(1, 1, 2)]
    h.advance(1000)  # the second delivery's lock expires: the limit (2) is reached, so archived
    assert sp.records == {} and sp.start_offset == 2 and sp.archived_total == 2
    archives = [(e["offset"], e["cause"]) for e in h.events.of_kind("share.archive")]
    assert archives == [(0, "reject"), (1, "limit")]


def test_only_the_holder_may_acknowledge():
    h = started(1)
    share_fetch(h, wait=0)
    box: list = []
    h.rm_share.share_acknowledge(ShareAcknowledgeRequest("g", "m2", 0, ack(0, 0, ACCEPT)), box.append)
    assert box[0].error is Errors.INVALID_SHARE_SESSION_EPOCH
    share_fetch(h, member="m2", wait=0)
    box = []
    h.rm_share.share_acknowledge(ShareAcknowledgeRequest("g", "m2", 1, ack(0, 0, ACCEPT)), box.append)
    assert box[0].partitions[TP] is Errors.INVALID_RECORD_STATE


def test_the_window_is_capped_by_max_record_locks():
    h = started(6, **{"group.share.partition.max.record.locks": 4})
    assert acquired(share_fetch(h, wait=0)) == [(0, 3, 1)]
    assert acquired(share_fetch(h, member="m2", wait=0)) == []
    acknowledge(h, ack(0, 1, ACCEPT))
    assert acquired(share_fetch(h, member="m2", wait=0)) == [(4, 5, 1)]


def test_the_window_follows_the_log_start_offset():
    h = started(5)
    assert acquired(share_fetch(h, wait=0, max_records=2)) == [(0, 1, 1)]
    sp = h.rm_share.share_partitions[("g", TP)]
    h.rm.partitions[TP].log.maybe_increment_log_start_offset(3)  # as DeleteRecords does
    assert acquired(share_fetch(h, member="m2", wait=0)) == [(3, 4, 1)]
    assert (sp.start_offset, sp.end_offset, sorted(sp.records)) == (3, 4, [3, 4])
    assert [lock.offsets for lock in sp.locks] == [[3, 4]]  # the lock of 0..1 left the timer with them


def test_a_session_epoch_out_of_order_is_refused():
    h = harness()
    share_fetch(h, wait=0)
    assert share_fetch(h, epoch=5, wait=0)[0].error is Errors.INVALID_SHARE_SESSION_EPOCH
    assert share_fetch(h, member="x", epoch=3, wait=0)[0].error is Errors.SHARE_SESSION_NOT_FOUND


# --- DelayedShareFetch ------------------------------------------------------------------------------------
def test_a_parked_share_fetch_is_woken_by_a_produce():
    h = harness()
    box = share_fetch(h, wait=500)
    assert box == [] and h.rm_share.purgatory.num_delayed() == 1
    h.advance(120)
    h.produce(2, acks=1)
    assert acquired(box) == [(0, 1, 1)] and box[0].cause == "condition"
    assert h.rm_share.purgatory.num_delayed() == 0 and h.rm_share.purgatory.completions == 1
    h.advance(500)
    assert len(box) == 1  # completed exactly once


def test_a_parked_share_fetch_is_woken_by_a_lock_expiry():
    h = started(1)
    assert acquired(share_fetch(h, wait=0)) == [(0, 0, 1)]
    box = share_fetch(h, member="m2", wait=5000)
    assert box == []
    h.advance(999)
    assert box == []
    h.advance(1000)
    assert acquired(box) == [(0, 0, 2)] and box[0].cause == "condition"
    completes = [e for e in h.events.of_kind("op.complete") if e["purgatory"] == "ShareFetch"]
    assert [(e["time_ms"], e["cause"]) for e in completes] == [(1000, "condition")]


def test_a_parked_share_fetch_times_out_at_max_wait():
    h = harness()
    box = share_fetch(h, wait=500)
    h.advance(499)
    assert box == []
    h.advance(500)
    (response,) = box
    assert response.cause == "expiry" and response.partitions[TP].acquired == ()
    assert h.rm_share.purgatory.expirations == 1
