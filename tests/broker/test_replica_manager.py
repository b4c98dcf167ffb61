"""ReplicaManager on a manual clock: Kafka's DelayedFetchTest and ReplicaManagerTest, the trigger table, acks.

https://github.com/apache/kafka/blob/trunk/core/src/test/scala/integration/kafka/server/DelayedFetchTest.scala
https://github.com/apache/kafka/blob/trunk/core/src/test/scala/unit/kafka/server/ReplicaManagerTest.scala
"""

import attrs

from minibroker.broker.delayed_fetch import DelayedFetch
from minibroker.broker.log import LogOffsetMetadata
from minibroker.common.errors import Errors
from minibroker.common.messages import FetchPartition, FetchRequest, LeaderAndIsr, TopicPartition
from tests.broker.conftest import TP, Harness


def only(box):
    (response,) = box
    (part,) = response.partitions.values()
    return response, part


# --- DelayedFetchTest ---------------------------------------------------------------------------
def test_fenced_epoch_completes_a_waiting_follower_fetch():
    h = Harness()
    h.lead()
    box = h.fetch(0, replica=1, epoch=0)
    assert box == [] and h.rm.fetch_purgatory.num_delayed() == 1
    h.lead(epoch=1)  # a new epoch of the same leader: the parked fetch is now fenced
    h.rm.fetch_purgatory.check_and_complete(TP)
    response, part = only(box)
    assert part.error is Errors.FENCED_LEADER_EPOCH and response.cause == "condition"


def test_not_leader_completes_a_waiting_fetch():
    h = Harness()
    h.lead()
    box = h.fetch(0, replica=1, epoch=0)
    h.follow(leader=1, epoch=1)
    response, part = only(box)
    assert part.error is Errors.NOT_LEADER_OR_FOLLOWER and response.cause == "leadership"


def test_diverging_epoch_completes_with_none():
    h = Harness()
    h.lead()
    h.produce(5, acks=1)
    box = h.fetch(5, replica=1, epoch=0, last_fetched_epoch=0)
    assert box == []
    operation = h.rm.fetch_purgatory.watchers(TP)[0]
    log = h.rm.partitions[TP].log
    log.epochs = [(0, 0), (1, 3)]  # the leader's history now says epoch 0 ended at offset 3
    assert operation.try_complete() is True
    _response, part = only(box)
    assert part.error is Errors.NONE and part.diverging_epoch is not None
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 3)


class OffsetOnlyPartition:
    """A partition whose end offset is known only as a message offset (no segment); the leader."""

    broker_id = leader_id = 0
    leader_epoch = 0

    def __init__(self, end: int) -> None:
        self.end = end

    def require_leader(self) -> None:
        pass

    def check_leader_epoch(self, epoch: int) -> None:
        pass

    def max_offset(self, isolation: str) -> int:
        return self.end

    @property
    def log_end_offset(self) -> int:
        return self.end

    @property
    def log(self) -> "OffsetOnlyPartition":
        return self  # the log's position lookup answers the same offset-only metadata

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        return self.end_offset_metadata("")

    def end_offset_metadata(self, isolation: str) -> LogOffsetMetadata:
        return LogOffsetMetadata(self.end)


def test_offset_only_end_completes_on_truncation_only():
    request = FetchRequest(1, 500, 1, 1 << 20, {TP: FetchPartition(450, 1 << 20)}, "LOG_END")
    offsets = {TP: LogOffsetMetadata(450, 0, 4500)}
    done = []
    truncated = DelayedFetch(
        request, offsets, "LOG_END", lambda tp: OffsetOnlyPartition(0), lambda r: {}, done.append
    )
    assert truncated.try_complete() is True and len(done) == 1
    ahead = DelayedFetch(
        request, offsets, "LOG_END", lambda tp: OffsetOnlyPartition(500), lambda r: {}, done.append
    )
    assert ahead.try_complete() is False and len(done) == 1


def test_older_segment_completes_at_once():
    h = Harness(**{"log.segment.bytes": 100})
    h.lead()
    h.produce(10, acks=1)  # 100 bytes: the first segment is full
    partition = h.rm.partitions[TP]
    partition.log.maybe_increment_high_watermark(10)
    box = h.fetch(10, max_wait=500, min_bytes=10_000)  # a consumer waiting at the HW
    assert box == []
    h.produce(1, acks=1)  # rolls a segment
    partition.log.maybe_increment_high_watermark(11)  # the HW moves to the new segment: 10 bytes < min
    assert partition.log.segment_bases == [0, 10]
    h.rm.fetch_purgatory.check_and_complete(TP)
    response, part = only(box)
    assert response.cause == "condition" and part.error is Errors.NONE


# --- ReplicaManagerTest ------------------------------------------------------------------------
def test_stop_replica_answers_a_waiting_produce_not_leader():
    h = Harness()
    h.lead(replicas=(0, 1), isr=(0, 1))
    box = h.produce(1, acks=-1, timeout_ms=10)
    assert box == [] and h.rm.produce_purgatory.num_delayed() == 1
    h.rm.stop_replica(TP, delete=True)
    response, part = only(box)
    assert part.error is Errors.NOT_LEADER_OR_FOLLOWER and response.cause == "leadership"
    assert h.rm.produce_purgatory.num_delayed() == 0


def test_become_follower_answers_a_waiting_consumer_fetch_not_leader():
    h = Harness()
    h.lead()
    box = h.fetch(0, max_wait=10)
    h.follow(leader=1, epoch=1)
    _response, part = only(box)
    assert part.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_consumer_fetch_expires_at_max_wait_with_nothing():
    h = Harness()
    h.lead()
    box = h.fetch(0, max_wait=10)
    h.advance(9)
    assert box == []
    h.advance(10)  # due when now >= expiration (Kafka's MockTimer would need 11)
    response, part = only(box)
    assert part.error is Errors.NONE and part.batches == () and response.cause == "expiry"
    committed = h.fetch(0, max_wait=1000, min_bytes=1000, isolation="TXN_COMMITTED")
    h.advance(1010)
    response, part = only(committed)
    assert part.error is Errors.NONE and part.batches == () and response.cause == "expiry"
    assert h.rm.fetch_purgatory.expires_by_key == {"consumer": 2}


def test_follower_reads_above_the_hw_a_consumer_does_not():
    h = Harness()
    h.lead()
    h.produce(3, acks=1)
    follower = h.fetch(0, replica=1, max_wait=0)
    consumer = h.fetch(0, max_wait=0)
    assert only(follower)[1].batches[0].count == 3
    _, part = only(consumer)
    assert part.error is Errors.NONE and part.batches == () and part.high_watermark == 0


# --- produce ------------------------------------------------------------------------------------
def test_invalid_acks():
    h = Harness()
    h.lead()
    _, part = only(h.produce(1, acks=2))
    assert part.error is Errors.INVALID_REQUIRED_ACKS
    assert h.rm.partitions[TP].log.log_end_offset == 0


def test_acks_1_answers_at_once_and_acks_0_not_at_all():
    h = Harness()
    h.lead()
    response, part = only(h.produce(2, acks=1))
    assert (part.error, part.base_offset, response.cause) == (Errors.NONE, 0, "immediate")
    assert h.produce(1, acks=0) == []
    assert h.rm.partitions[TP].log.log_end_offset == 3


def test_not_enough_replicas_before_the_append():
    h = Harness(**{"min.insync.replicas": 2})
    h.lead(isr=(0,))
    _, part = only(h.produce(1, acks=-1))
    assert part.error is Errors.NOT_ENOUGH_REPLICAS
    assert h.rm.partitions[TP].log.log_end_offset == 0


def test_unknown_and_unhosted_partitions():
    h = Harness()
    h.lead()
    _, part = only(h.produce(1, acks=-1, tp=TopicPartition("nope", 0)))
    assert part.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    _, part = only(h.produce(1, acks=-1, tp=TopicPartition("t", 7)))
    assert part.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_delayed_produce_times_out_with_request_timed_out_and_counts_the_partition():
    h = Harness()
    h.lead()
    box = h.produce(2, acks=-1, timeout_ms=100)
    assert h.rm.produce_purgatory.watched() == 1
    h.advance(100)
    response, part = only(box)
    assert (part.error, part.base_offset, response.cause) == (Errors.REQUEST_TIMED_OUT, 0, "expiry")
    assert h.rm.produce_purgatory.expires_by_key == {TP: 1}


def test_trigger_table_append_with_hw_unchanged_checks_fetch_only():
    h = Harness()
    h.lead()
    waiting = h.fetch(0, replica=1, max_wait=500)
    h.produce(1, acks=-1, timeout_ms=1000)
    assert only(waiting)[1].batches[0].count == 1  # the follower's parked fetch got the data
    events = [e["kind"] for e in h.events if e["kind"].startswith("op.")]
    assert events.count("op.complete") == 1  # only the fetch completed


def test_acks_all_produce_completes_when_the_slower_follower_raises_the_hw():
    h = Harness()
    h.lead()
    h.produce(3, acks=1)
    for follower in (1, 2):
        h.fetch(3, replica=follower, max_wait=0)  # both followers have messages 0..2
    partition = h.rm.partitions[TP]
    assert partition.high_watermark == 3
    box = h.produce(2, acks=-1, timeout_ms=1000)  # messages 3 and 4
    assert box == [] and partition.log_end_offset == 5
    h.clock.now = 7
    h.fetch(5, replica=1, max_wait=0)
    assert box == [] and partition.high_watermark == 3
    h.clock.now = 9
    h.fetch(5, replica=2, max_wait=0)
    response, part = only(box)
    assert (part.error, part.base_offset, response.cause) == (Errors.NONE, 3, "condition")
    assert partition.high_watermark == 5
    hw = [e for e in h.events if e["kind"] == "hw"]
    assert (hw[-1]["time_ms"], hw[-1]["hw"]) == (9, 5)


def test_isr_expansion_is_proposed_to_the_controller_and_commit_rechecks():
    h = Harness(**{"min.insync.replicas": 2})
    h.lead(isr=(0,))
    h.produce(2, acks=1)
    h.fetch(2, replica=1, max_wait=0)
    ((dst, request, on_response),) = h.network.requests
    assert dst == "controller" and request.new_isr == (0, 1)
    assert h.rm.partitions[TP].maximal_isr == (0, 1)
    from minibroker.common.messages import AlterPartitionResponse

    state = LeaderAndIsr(TP, 0, 0, (0, 1), 1, (0, 1, 2))
    on_response(AlterPartitionResponse(Errors.NONE, state))
    assert h.rm.partitions[TP].isr == (0, 1) and h.rm.partitions[TP].high_watermark == 2
    assert attrs.asdict(state)["isr"] == (0, 1)
