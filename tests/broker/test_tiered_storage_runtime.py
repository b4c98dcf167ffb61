"""Tiered storage on a running cluster in trio's virtual time (MockClock): the broker's timer and
reaper drive the copy task, local retention and the remote reads, and the answers come at exact ms.

One broker leads t-0 (segment.bytes 30: three 10-byte batches a segment, local.retention.bytes 0).
Ten one-record batches at 0 make segments [0-2] [3-5] [6-8] and the active [9]. The copy task runs at 0
(nothing closed yet: the batches come after it in that ms) and at 1000: [0-2] done 1010, [3-5] 1020,
[6-8] 1030 (copy latency 10). Local retention at 2000 deletes all three: local log start 9.
"""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.common.messages import ListOffsetsRequest, TopicPartition
from minibroker.sim import TopicSpec, open_cluster

TP = TopicPartition("t", 0)
SETTINGS = {
    "remote.log.storage.system.enable": True,
    "remote.log.manager.task.interval.ms": 1000,
    "log.retention.check.interval.ms": 2000,
    "minibroker.remote.storage.copy.latency.ms": 10,
    "minibroker.remote.storage.read.latency.ms": 250,
}
TOPIC = TopicSpec(
    "t", 1, 1, configs={"remote.storage.enable": "true", "segment.bytes": "30", "local.retention.bytes": "0"}
)


async def tiered_cluster(cluster) -> None:
    producer = cluster.producer("p", acks=1)
    for _ in range(10):
        producer.send("t", 0, 1, 10)
    await cluster.clock.sleep_until(2100)
    log = cluster.brokers[0].logs[TP]
    assert (log.log_start_offset, log.local_log_start_offset, log.highest_offset_in_remote_storage) == (
        0,
        9,
        8,
    )


async def test_a_consumer_fetch_below_the_local_log_start_is_answered_exactly_the_read_latency_later(
    autojump_clock,
):
    async with open_cluster(1, [TOPIC], SETTINGS) as cluster:
        await tiered_cluster(cluster)
        consumer = cluster.consumer("c")
        consumer.assign([TP], 0)
        (request,) = consumer.fetch()
        await request.wait()
        assert (request.created_ms, request.completed_ms, request.cause) == (2100, 2350, "condition")
        assert (request.errors, request.records) == ({"t-0": "NONE"}, {"t-0": 3})
        assert consumer.positions[TP] == 3


async def test_a_failing_tier_answers_the_fetch_unknown_server_error(autojump_clock):
    async with open_cluster(1, [TOPIC], SETTINGS) as cluster:
        await tiered_cluster(cluster)
        cluster.set_broker_config(0, {"minibroker.remote.storage.fault": "failing"})
        consumer = cluster.consumer("c")
        consumer.assign([TP], 3)
        (request,) = consumer.fetch()
        await request.wait()
        assert (request.completed_ms, request.cause, request.errors) == (
            2350,
            "condition",
            {"t-0": "UNKNOWN_SERVER_ERROR"},
        )
        assert consumer.positions[TP] == 3


async def test_a_list_offsets_by_time_waits_for_the_remote_metadata(autojump_clock):
    async with open_cluster(1, [TOPIC], SETTINGS) as cluster:
        await tiered_cluster(cluster)
        answers: list = []
        manager = cluster.brokers[0].replica_manager
        manager.list_offsets(
            ListOffsetsRequest({TP: 0}, request_id="by-time"),
            lambda response: answers.append((cluster.clock.now_ms(), response)),
        )
        assert manager.remote_list_offsets_purgatory.num_delayed() == 1
        await cluster.clock.sleep_until(2400)
        ((at, response),) = answers
        part = response.partitions[TP]
        assert (at, response.cause, part.error, part.timestamp, part.offset) == (
            2350,
            "condition",
            Errors.NONE,
            0,
            0,
        )
