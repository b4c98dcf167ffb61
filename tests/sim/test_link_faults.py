"""Link faults on the emulated network: one-way drops, client links, and fencing at the session timeout.

Exact virtual times on the autojump clock. Heartbeats (broker.heartbeat.interval.ms 2000) are sent at
2000, 4000, ... after a broker registers; the controller fences a live broker at its last heartbeat's
arrival + broker.session.timeout.ms (9000) once its direction to the controller is dropped.
"""

from __future__ import annotations

from minibroker.common.messages import TopicPartition
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.sim import TopicSpec, open_cluster
from minibroker.sim.network import Network
from minibroker.trace import ListSink, RecordingTracer

TP = TopicPartition("t", 0)
RF3 = [TopicSpec("t", 1, 3)]


def test_a_one_way_drop_loses_one_direction_and_a_two_way_heal_clears_both():
    network = Network(scheduler=None)  # type: ignore[arg-type]  # the fault table needs no scheduler
    network.drop(0, 1, one_way=True)
    assert (network.is_dropped(0, 1), network.is_dropped(1, 0)) == (True, False)
    network.drop(1, 0, one_way=True)
    network.heal(0, 1, one_way=True)
    assert (network.is_dropped(0, 1), network.is_dropped(1, 0)) == (False, True)
    network.drop(0, 1)
    network.heal(1, 0, one_way=True)
    assert (network.is_dropped(0, 1), network.is_dropped(1, 0)) == (True, False)
    network.heal(0, 1)
    assert (network.is_dropped(0, 1), network.is_dropped(1, 0)) == (False, False)


async def test_a_request_lost_one_way_is_never_written(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        producer = cluster.producer("p", acks=-1, request_timeout_ms=1000)
        cluster.drop_link("p", 0, one_way=True)
        request = await producer.send_and_wait("t", 0)
        assert (request.completed_ms, request.errors) == (2000, {"t-0": "REQUEST_TIMED_OUT"})
        assert cluster.snapshot().partition("t-0").replica(0).log_end_offset == 0


async def test_an_answer_lost_one_way_leaves_the_record_written_but_unacknowledged(autojump_clock):
    async with open_cluster(3, RF3) as cluster:
        producer = cluster.producer("p", acks=-1, request_timeout_ms=1000)
        cluster.drop_link(0, "p", one_way=True)
        request = await producer.send_and_wait("t", 0)
        # the leader appended and replicated it; only its answer was lost
        assert (request.completed_ms, request.errors) == (2000, {"t-0": "REQUEST_TIMED_OUT"})
        view = cluster.snapshot().partition("t-0")
        assert [r.log_end_offset for r in view.replicas] == [1, 1, 1]
        cluster.heal_link(0, "p", one_way=True)
        again = await producer.send_and_wait("t", 0)
        assert (again.errors, again.base_offsets) == ({"t-0": "NONE"}, {"t-0": 1})


def traced():
    sink = ListSink()
    return RecordingTracer(lambda: 0, [sink]), sink


def fencing(sink: ListSink) -> list[tuple[int, int, str]]:
    return [
        (e["time_ms"], e["broker"], e["state"])
        for e in sink.of_kind("controller.broker")
        if e.get("reason") is not None
    ]


async def isolate_from_controller(drop_at: int, heal_at: int | None, end: int, **options):
    """Drop broker 0's link to the controller at ``drop_at`` (heal at ``heal_at``); the fencing events."""
    tracer, sink = traced()
    one_way = options.pop("one_way", None)
    latency = options.pop("latency", None)
    async with open_cluster(3, RF3, tracer=tracer, **options) as cluster:
        tracer.clock = cluster.now
        if latency is not None:
            cluster.set_latency(0, CONTROLLER, latency)
        await cluster.clock.sleep_until(drop_at)
        if one_way is None:
            cluster.drop_link(0, CONTROLLER)
        else:
            cluster.drop_link(*one_way, one_way=True)
        if heal_at is not None:
            await cluster.clock.sleep_until(heal_at)
            cluster.heal_link(0, CONTROLLER)
        await cluster.clock.sleep_until(end)
        return fencing(sink), cluster.controller.state[TP]


async def test_the_fence_comes_at_the_last_heartbeat_plus_the_session_timeout(autojump_clock):
    events, state = await isolate_from_controller(5000, None, 20_000)
    assert events == [(13_000, 0, "fenced")]  # last heartbeat at 4000, not the drop at 5000
    assert (state.leader, state.leader_epoch, state.isr) == (1, 1, (1, 2))


async def test_a_heartbeat_arriving_at_the_drop_instant_counts(autojump_clock):
    events, _ = await isolate_from_controller(4000, None, 20_000)
    assert events == [(13_000, 0, "fenced")]


async def test_the_link_latency_delays_the_last_contact(autojump_clock):
    events, _ = await isolate_from_controller(5000, None, 20_000, latency=1)
    assert events == [(13_001, 0, "fenced")]  # the heartbeat sent at 4000 arrived at 4001


async def test_a_heal_whose_next_heartbeat_is_in_time_prevents_the_fence(autojump_clock):
    events, state = await isolate_from_controller(5000, 12_000, 30_000)
    assert events == []  # the heartbeat sent at 12000 arrives before the 13000 deadline
    assert (state.leader, state.leader_epoch) == (0, 0)


async def test_a_heal_too_late_for_the_deadline_fences_then_unfences_at_the_next_heartbeat(autojump_clock):
    events, state = await isolate_from_controller(5000, 12_001, 30_000)
    assert events == [(13_000, 0, "fenced"), (14_000, 0, "unfenced")]
    assert (state.leader, state.leader_epoch) == (1, 1)


async def test_only_the_broker_to_controller_direction_fences(autojump_clock):
    lost_answers, _ = await isolate_from_controller(5000, None, 30_000, one_way=(CONTROLLER, 0))
    assert lost_answers == []  # its heartbeats still arrive
    lost_heartbeats, _ = await isolate_from_controller(5000, None, 30_000, one_way=(0, CONTROLLER))
    assert lost_heartbeats == [(13_000, 0, "fenced")]


async def test_the_session_timeout_and_heartbeat_interval_are_kafka_settings(autojump_clock):
    config = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
    events, _ = await isolate_from_controller(5200, None, 20_000, config=config)
    assert events == [(8000, 0, "fenced")]  # last heartbeat at 5000


async def test_a_broker_restarted_behind_a_dropped_link_is_fenced_a_session_after_its_restart(autojump_clock):
    tracer, sink = traced()
    async with open_cluster(3, RF3, tracer=tracer) as cluster:
        tracer.clock = cluster.now
        cluster.drop_link(0, CONTROLLER)
        await cluster.clock.sleep_until(1000)
        cluster.crash(0)  # its crash fences it (crash_detection_ms 0)
        await cluster.clock.sleep_until(3000)
        await cluster.restart(0)  # registered at 3000; no heartbeat of its new life arrives
        await cluster.clock.sleep_until(20_000)
        assert fencing(sink) == [(12_000, 0, "fenced")]
