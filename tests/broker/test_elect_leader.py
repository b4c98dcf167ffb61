"""ElectLeaders and its ElectLeader purgatory: the answer waits for the elected leaders in the metadata.

The ReplicaManager on a manual clock (conftest's Harness) with a stub controller election, and the
cluster on trio's MockClock (autojump) for the controller's LeaderAndIsr crossing a slow link.
"""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.common.messages import ElectLeadersRequest, LeaderAndIsr, TopicPartition
from minibroker.sim import TopicSpec, open_cluster
from tests.broker.conftest import TP, Harness

OTHER = TopicPartition("t", 1)
ELSEWHERE = TopicPartition("u", 0)  # a partition this broker does not host


def elect(h: Harness, partitions, timeout_ms: int = 100) -> list:
    box: list = []
    request = ElectLeadersRequest(tuple(partitions), 0, timeout_ms, f"e{len(h.responses)}")
    h.rm.elect_leaders(request, box.append)
    h.responses.append(box)
    return box


def with_controller(h: Harness, elected: dict) -> None:
    """A controller that elects ``elected[tp]`` (a leader, or an (error, message) refusal)."""
    h.rm.elect_leader = lambda tp, kind: elected[tp]


def follower_of(h: Harness, leader: int, epoch: int, tp=TP) -> None:
    h.rm.apply_leader_and_isr(LeaderAndIsr(tp, leader, epoch, (0, 1, 2), epoch, (1, 0, 2)))


def errors(response) -> dict:
    return {tp: part.error for tp, part in response.partitions.items()}


def test_waits_until_the_metadata_shows_the_elected_leader():
    h = Harness()
    follower_of(h, 2, 1)
    with_controller(h, {TP: 1})
    h.advance(10)
    box = elect(h, [TP])
    assert box == [] and h.rm.elect_leader_purgatory.num_delayed() == 1
    follower_of(h, 2, 2)  # a metadata change that does not show leader 1 yet
    assert box == []
    h.clock.now = 40
    follower_of(h, 1, 3)
    (response,) = box
    assert (errors(response), response.cause) == ({TP: Errors.NONE}, "condition")
    assert h.rm.elect_leader_purgatory.num_delayed() == 0
    assert h.rm.elect_leader_purgatory.completions == 1
    (event,) = h.events.of_kind("elect_leaders.response")
    assert (event["time_ms"], event["error"], event["cause"]) == (40, "NONE", "condition")


def test_times_out_request_timed_out_per_waiting_partition_and_keeps_the_refusals():
    h = Harness()
    follower_of(h, 2, 1)
    refusal = (Errors.PREFERRED_LEADER_NOT_AVAILABLE, "preferred replica is down")
    with_controller(h, {TP: 1, OTHER: refusal})
    box = elect(h, [TP, OTHER], timeout_ms=30)
    h.advance(29)
    assert box == []
    h.advance(30)
    (response,) = box
    assert errors(response) == {TP: Errors.REQUEST_TIMED_OUT, OTHER: Errors.PREFERRED_LEADER_NOT_AVAILABLE}
    assert response.partitions[OTHER].message == "preferred replica is down"
    assert response.cause == "expiry"
    assert h.rm.elect_leader_purgatory.expirations == 1
    assert h.rm.elect_leader_purgatory.expires_by_key == {TP: 1}


def test_completes_exactly_once():
    h = Harness()
    follower_of(h, 2, 1)
    with_controller(h, {TP: 1})
    box = elect(h, [TP], timeout_ms=30)
    follower_of(h, 1, 2)
    follower_of(h, 1, 3)  # checked again: already completed
    h.advance(30)  # its timer entry was cancelled: no expiry
    assert len(box) == 1 and box[0].cause == "condition"
    assert (h.rm.elect_leader_purgatory.completions, h.rm.elect_leader_purgatory.expirations) == (1, 0)


def test_only_refusals_are_answered_at_once_without_the_purgatory():
    h = Harness()
    with_controller(h, {TP: (Errors.ELECTION_NOT_NEEDED, "not needed")})
    (response,) = elect(h, [TP])
    assert (errors(response), response.cause) == ({TP: Errors.ELECTION_NOT_NEEDED}, "immediate")
    assert h.rm.elect_leader_purgatory.watched() == 0


def test_a_partition_not_hosted_here_is_read_from_the_metadata():
    h = Harness()
    with_controller(h, {ELSEWHERE: 2})
    h.rm.metadata_leader = lambda tp: 2
    (response,) = elect(h, [ELSEWHERE])
    assert (errors(response), response.cause) == ({ELSEWHERE: Errors.NONE}, "condition")


def test_one_partition_seen_the_other_timed_out():
    h = Harness()
    follower_of(h, 2, 1)
    follower_of(h, 2, 1, tp=OTHER)
    with_controller(h, {TP: 1, OTHER: 1})
    box = elect(h, [TP, OTHER], timeout_ms=50)
    follower_of(h, 1, 2)
    assert box == []
    h.advance(50)
    (response,) = box
    assert errors(response) == {TP: Errors.NONE, OTHER: Errors.REQUEST_TIMED_OUT}
    assert h.rm.elect_leader_purgatory.expires_by_key == {OTHER: 1}


async def test_the_answer_waits_for_the_leader_and_isr_on_a_slow_controller_link(autojump_clock):
    topic = TopicSpec("t", 2, 3, assignment=((1, 0, 2), (1, 2, 0)))
    async with open_cluster(3, [topic]) as cluster:
        cluster.shutdown(1)  # t-0 moves to broker 0, t-1 to broker 2
        await cluster.restart(1)
        await cluster.clock.sleep_until(1000)
        assert (cluster.leader_of(TP), cluster.leader_of(OTHER)) == (0, 2)
        cluster.set_latency(0, "controller", 250)
        request = cluster.admin("admin").elect_leaders([TP])
        await cluster.clock.sleep_until(1001)
        assert (request.broker, cluster.leader_of(TP), request.completed) == (0, 1, False)  # elected
        await request.wait()
        assert (request.completed_ms, request.error(), request.cause) == (1250, "NONE", "condition")
        cluster.drop_link("controller", 0, one_way=True)  # broker 0 never hears of t-1's election
        await cluster.clock.sleep_until(2000)
        late = cluster.admin("admin").elect_leaders([OTHER], timeout_ms=400)
        await late.wait()
        assert cluster.leader_of(OTHER) == 1
        assert (late.completed_ms, late.error(), late.cause) == (2400, "REQUEST_TIMED_OUT", "expiry")
