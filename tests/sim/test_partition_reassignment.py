"""Partition reassignments (KIP-455) in virtual time: the adding and removing replica sets, completion
through the ISR, cancellation, and Kafka's error codes."""

from __future__ import annotations

import pytest

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec, open_cluster
from minibroker.sim.topic_admin import AdminError, alter_reassignment, list_reassignments
from minibroker.trace import ListSink, RecordingTracer

TP = TopicPartition("t", 0)
ON_0_1 = [TopicSpec("t", 1, 2, ((0, 1),))]


def refused(*args, **kwargs) -> Errors:
    with pytest.raises(AdminError) as raised:
        alter_reassignment(*args, **kwargs)
    return raised.value.error


async def test_a_move_completes_when_the_last_adding_replica_joins_the_isr(autojump_clock):
    sink = ListSink()
    tracer = RecordingTracer(lambda: 0, [sink])
    async with open_cluster(4, ON_0_1, tracer=tracer, latency_ms=1) as cluster:
        tracer.clock = cluster.now
        producer = cluster.producer("p", acks=-1)
        await producer.send_and_wait("t", 0, count=5)
        await cluster.clock.sleep_until(100)
        alter_reassignment(cluster, TP, [2, 3])
        # during the move the replicas are the union, target first
        assert list_reassignments(cluster) == [(TP, (2, 3, 0, 1), (2, 3), (0, 1))]
        view = cluster.snapshot().partition("t-0")
        assert [r.broker for r in view.replicas] == [2, 3, 0, 1]
        await cluster.clock.sleep_until(1000)
        steps = [
            (e["time_ms"], e["step"], e["replicas"], e["leader"], e["epoch"])
            for e in sink.of_kind("controller.reassign")
        ]
        # broker 2 joins the ISR at 105 (fetch at 101-103, expand proposed at 104); broker 3, caught up
        # while that change was pending, proposes at its next fetch, parked replica.fetch.wait.max.ms
        # (500) from 104: 606, committed at the controller 1 ms later, completing the move
        assert steps == [(100, "start", [2, 3, 0, 1], 0, 0), (607, "complete", [2, 3], 2, 1)]
        assert [(e["time_ms"], e["broker"]) for e in sink.of_kind("replica.stopped")] == [(608, 0), (608, 1)]
        assert list_reassignments(cluster) == []
        assert [b.broker_id for b in cluster.brokers if TP in b.logs] == [2, 3]
        again = await producer.send_and_wait("t", 0, count=5)
        assert again.errors == {"t-0": "NONE"}
        assert [cluster.brokers[b].logs[TP].log_end_offset for b in (2, 3)] == [10, 10]


async def test_cancel_reverts_to_the_original_replicas(autojump_clock):
    async with open_cluster(4, ON_0_1, latency_ms=1) as cluster:
        cluster.pause_fetcher(3)  # broker 3 never catches up: the move cannot complete
        alter_reassignment(cluster, TP, [0, 3])
        await cluster.clock.sleep_until(50)
        assert list_reassignments(cluster) == [(TP, (0, 3, 1), (3,), (1,))]
        alter_reassignment(cluster, TP, None)
        state = cluster.controller.state[TP]
        assert (state.replicas, state.isr, state.leader) == ((0, 1), (0, 1), 0)
        assert refused(cluster, TP, None) is Errors.NO_REASSIGNMENT_IN_PROGRESS
        await cluster.clock.sleep_until(60)
        assert TP not in cluster.brokers[3].logs


async def test_removing_only_completes_at_once_and_moves_a_removed_leader(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], latency_ms=1) as cluster:
        alter_reassignment(cluster, TP, [2, 1])
        state = cluster.controller.state[TP]
        assert (state.replicas, state.isr, state.leader, state.leader_epoch) == ((2, 1), (1, 2), 2, 1)
        assert list_reassignments(cluster) == []


async def test_kafkas_errors(autojump_clock):
    async with open_cluster(3, ON_0_1) as cluster:
        assert refused(cluster, TopicPartition("t", 1), [0]) is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert refused(cluster, TopicPartition("x", 0), [0]) is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert refused(cluster, TP, []) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert refused(cluster, TP, [0, 0]) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert refused(cluster, TP, [0, 7]) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert refused(cluster, TP, [2], allow_rf_change=False) is Errors.INVALID_REPLICATION_FACTOR
        assert refused(cluster, TP, None) is Errors.NO_REASSIGNMENT_IN_PROGRESS
        assert cluster.controller.state[TP].partition_epoch == 0


async def test_an_adding_replica_down_holds_the_move_until_it_restarts_and_catches_up(autojump_clock):
    async with open_cluster(4, ON_0_1, latency_ms=1) as cluster:
        producer = cluster.producer("p", acks=-1)
        await producer.send_and_wait("t", 0, count=3)
        cluster.crash(3)
        alter_reassignment(cluster, TP, [0, 3])
        await cluster.clock.sleep_until(5000)
        assert list_reassignments(cluster) == [(TP, (0, 3, 1), (3,), (1,))]
        await cluster.restart(3)
        await cluster.clock.sleep_until(7000)
        state = cluster.controller.state[TP]
        assert (state.replicas, state.isr, state.leader) == ((0, 3), (0, 3), 0)
        assert cluster.brokers[3].logs[TP].log_end_offset == 3 and TP not in cluster.brokers[1].logs
