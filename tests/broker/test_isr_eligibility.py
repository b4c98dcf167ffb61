"""KIP-841 on the leader and the controller: only ISR-eligible replicas hold the HW or join the ISR.

A crashed (fenced) or shutting-down follower out of the ISR does not hold the HW back, even while it still
counts as "caught up": acks=all produces do not wait for the broker to come back.
"""

from __future__ import annotations

from minibroker.broker.log import Log
from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import AlterPartitionRequest, LeaderAndIsr, TopicPartition
from minibroker.controller.broker_registrations import (
    CONTROLLED_SHUTDOWN,
    FENCED,
    UNFENCED,
    BrokerRegistrations,
)
from minibroker.sim import TopicSpec, open_cluster
from minibroker.trace import ListSink, RecordingTracer

from .conftest import TP

REPLICAS = (0, 1, 2)


def leader(ineligible: set[int], isr=REPLICAS) -> Partition:
    """Broker 0 leads t-0 on [0, 1, 2]; brokers in ``ineligible`` are fenced or shutting down."""
    partition = Partition(TP, 0, REPLICAS, Log(), 1, 30_000, isr_eligible=lambda b: b not in ineligible)
    partition.make_leader(0, isr, 0, 0)
    return partition


def test_registrations_states_and_eligibility():
    view = BrokerRegistrations().with_state(1, FENCED).with_state(2, CONTROLLED_SHUTDOWN)
    assert [view.state_of(b) for b in range(3)] == [UNFENCED, FENCED, CONTROLLED_SHUTDOWN]
    assert [view.is_isr_eligible(b) for b in range(3)] == [True, False, False]
    back = view.with_state(1, UNFENCED).with_state(2, UNFENCED)
    assert back == BrokerRegistrations()


def hw_after_shrink(ineligible: set[int]) -> int:
    """Follower 2 caught up at 0 then stopped; the ISR shrinks to [0, 1]; follower 1 has both records."""
    partition = leader(ineligible)
    partition.update_follower_fetch_state(2, 0, 0)  # caught up at 0 (LEO 0 = leader LEO)
    partition.update_follower_fetch_state(1, 0, 0)
    partition.log.append_as_leader(2, 20, 0, 5)
    partition.update_follower_fetch_state(1, 2, 7)
    partition.commit_isr((0, 1), 1, 10)
    return partition.high_watermark


def test_caught_up_but_fenced_follower_out_of_the_isr_does_not_hold_the_hw():
    assert hw_after_shrink(ineligible={2}) == 2


def test_caught_up_eligible_follower_out_of_the_isr_still_holds_the_hw():
    # Kafka waits for a caught-up replica that may rejoin (so it can reach the HW and rejoin)
    assert hw_after_shrink(ineligible=set()) == 0


def test_an_ineligible_member_of_the_maximal_isr_still_holds_the_hw():
    partition = leader(ineligible={2})
    partition.log.append_as_leader(2, 20, 0, 5)
    partition.update_follower_fetch_state(1, 2, 7)
    partition.update_follower_fetch_state(2, 1, 7)
    assert partition.high_watermark == 1  # the ISR is the controller's to shrink, not the leader's guess


def test_isr_expansion_refuses_an_ineligible_follower():
    partition = leader(ineligible={2}, isr=(0, 1))
    partition.log.append_as_leader(2, 20, 0, 5)
    partition.update_follower_fetch_state(1, 2, 7)
    partition.update_follower_fetch_state(2, 2, 7)
    assert partition.high_watermark == 2
    assert partition.isr_expansion_candidate(2) is None
    eligible = leader(ineligible=set(), isr=(0, 1))
    eligible.update_follower_fetch_state(2, 0, 7)
    assert eligible.isr_expansion_candidate(2) == (0, 1, 2)


def test_registrations_arriving_after_the_shrink_release_the_waiting_produce(harness):
    """The shrink alone leaves the produce waiting (2 may rejoin); the fencing then completes it at once."""
    harness.lead(isr=(0, 1, 2))
    harness.fetch(0, replica=2, max_wait=0)  # follower 2 caught up at 0
    harness.fetch(0, replica=1, max_wait=0)
    harness.advance(10)
    box = harness.produce(timeout_ms=1000)
    harness.fetch(1, replica=1, max_wait=0)
    harness.rm.apply_leader_and_isr(LeaderAndIsr(TP, 0, 0, (0, 1), 1, REPLICAS))
    assert box == [] and harness.rm.partitions[TP].high_watermark == 0
    harness.advance(12)
    harness.rm.apply_registrations(BrokerRegistrations(fenced=frozenset({2})))
    assert [p.error for p in box[0].partitions.values()] == [Errors.NONE]
    assert box[0].cause == "condition"
    hw = [e for e in harness.events if e["kind"] == "hw"]
    assert [(e["time_ms"], e["hw"]) for e in hw] == [(12, 1)]


async def test_controller_answers_ineligible_replica_for_a_fenced_or_shutting_down_new_member(
    autojump_clock,
):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], crash_detection_ms=50) as cluster:
        controller = cluster.controller
        tp = TopicPartition("t", 0)
        answers: list = []

        def propose(new_isr):
            state = controller.state[tp]
            request = AlterPartitionRequest(0, tp, state.leader_epoch, state.partition_epoch, new_isr)
            controller.deliver(0, request, answers.append)
            return answers[-1].error

        cluster.crash(2)
        await cluster.clock.sleep_until(51)  # fenced at 50: ISR [0, 1]
        assert controller.state[tp].isr == (0, 1)
        assert controller.registrations.state_of(2) == FENCED
        assert propose((0, 1, 2)) is Errors.INELIGIBLE_REPLICA
        cluster.shutdown(1)  # in controlled shutdown: ISR [0]
        assert controller.state[tp].isr == (0,)
        assert propose((0, 1)) is Errors.INELIGIBLE_REPLICA
        await cluster.restart(2)  # unfenced on restart
        assert controller.registrations.state_of(2) == UNFENCED
        assert propose((0, 2)) is Errors.NONE
        assert controller.state[tp].isr == (0, 2)


async def test_a_fetch_arriving_after_its_broker_was_fenced_does_not_propose_it_for_the_isr(autojump_clock):
    """Broker 2's fetch is on a 100 ms link when it crashes; it lands after the fencing, caught up."""
    sink = ListSink()
    tracer = RecordingTracer(lambda: 0, [sink])
    async with open_cluster(3, [TopicSpec("t", 1, 3)], tracer=tracer) as cluster:
        tracer.clock = cluster.now
        cluster.set_latency(2, 0, 100)
        # broker 2's first fetch lands at 100 and parks 500 ms; its answer is back at 700, the next
        # fetch leaves at once and lands at 800: crash in between, with the fencing at once (no delay)
        await cluster.clock.sleep_until(750)
        cluster.crash(2)
        await cluster.clock.sleep_until(1000)
        late = [e for e in sink if e["kind"] == "follower.fetch" and e["replica"] == 2 and e["time_ms"] > 750]
        assert [e["time_ms"] for e in late] == [800]
        assert cluster.controller.state[TP].isr == (0, 1)
        proposals = [e for e in sink if e["kind"] == "isr.propose"]
        assert proposals == []  # no expansion to [0, 1, 2], which the controller would reject
