"""The file wheel on the emulated cluster: precision, rolls, replicas, fail-over to a hot standby."""

from __future__ import annotations

import os

import pytest

from minibroker.broker.config import ConfigError
from minibroker.delayed_messages.wheel_service import WheelConfig
from minibroker.sim import TopicSpec
from tests.delayed_messages.helpers import delivered_ids, wheel_cluster

ORDERS = [TopicSpec("orders", 1, 2, assignment=((2, 1),))]  # the real topic is off broker 0
SMALL = {"delay.wheel.slots": 20, "delay.wheel.tick.ms": 100}


def events(group, kind):
    return [e for e in group.sink if e["kind"] == kind]


async def test_a_message_is_delivered_at_the_end_of_its_tick(autojump_clock, tmp_path):
    async with wheel_cluster(3, ORDERS, tmp_path, {"delay.wheel.tick.ms": 1_000}) as (cluster, group, _):
        producer = cluster.producer("app", acks=-1)
        await cluster.clock.sleep_until(250)
        first = producer.send("orders", 0, delay_ms=1_750)  # due 2000: tick 2 exactly
        second = producer.send("orders", 0, delay_ms=1_751)  # due 2001: tick 3
        assert (first.errors, first.broker, second.completed_ms) == ({"__delay_wheel-0": "NONE"}, 0, 250)
        await cluster.clock.sleep_until(3_001)
        got = [(d.message_id, d.due_ms, d.delivered_ms) for d in group.stats.deliveries]
        assert got == [("app-0", 2_000, 2_000), ("app-1", 2_001, 3_000)]
        assert delivered_ids(cluster, "orders") == ["app-0", "app-1"]


async def test_every_copy_holds_the_write_and_fired_slots_are_deleted(autojump_clock, tmp_path):
    async with wheel_cluster(3, ORDERS, tmp_path, SMALL) as (cluster, group, _):
        producer = cluster.producer("app", acks=-1)
        producer.send("orders", 0, count=2, delay_ms=450)  # due 450: tick 5
        for b in range(3):
            assert sorted(os.listdir(tmp_path / f"broker-{b}" / "wheel")) == ["pointer", "slot-00005.log"]
        assert {b: v.slots_with_messages for b, v in group.view().items()} == {0: 1, 1: 1, 2: 1}
        await cluster.clock.sleep_until(501)
        for b in range(3):
            assert sorted(os.listdir(tmp_path / f"broker-{b}" / "wheel")) == ["pointer"]
        assert [d.delivered_ms for d in group.stats.deliveries] == [500, 500]


async def test_delays_longer_than_the_wheel_roll(autojump_clock, tmp_path):
    async with wheel_cluster(3, ORDERS, tmp_path, SMALL) as (cluster, group, _):  # the wheel spans 2 s
        cluster.producer("app", acks=-1).send("orders", 0, delay_ms=5_050)
        await cluster.clock.sleep_until(6_000)
        (delivery,) = group.stats.deliveries
        assert (delivery.due_ms, delivery.delivered_ms) == (5_050, 5_100)
        rolls = [(e["time_ms"], e["roll"]) for e in events(group, "delay.wheel.fire") if e["roll"]]
        assert rolls == [(1_100, 1), (3_100, 1)]


async def test_the_active_dies_with_a_batch_in_flight_and_a_standby_takes_over(autojump_clock, tmp_path):
    settings = {**SMALL, "delay.wheel.forward.batch": 3, "delay.wheel.forward.in.flight": 1}
    async with wheel_cluster(3, ORDERS, tmp_path, settings) as (cluster, group, _):
        producer = cluster.producer("app", acks=-1)
        producer.send("orders", 0, count=10, delay_ms=1_000)  # tick 10, fired at 1000
        cluster.set_latency("delay-wheel-0", 2, 30)  # a forward from broker 0 takes 60 ms there and back
        await cluster.clock.sleep_until(1_130)  # two batches acknowledged (1060, 1120), the third in flight
        assert len(group.stats.deliveries) == 6
        cluster.crash(0)
        await cluster.clock.sleep_until(2_000)
        actives = [(e["time_ms"], e["broker"]) for e in events(group, "delay.wheel.active")]
        assert actives == [(0, 0), (1_130, 1)]
        ids = delivered_ids(cluster, "orders")
        assert sorted(set(ids)) == sorted(f"app-{i}" for i in range(10))
        assert len(ids) - len(set(ids)) == 3  # the batch in flight, and nothing else
        await cluster.restart(0)
        assert group.in_sync == {0, 1, 2}
        assert [e["copied_from"] for e in events(group, "delay.wheel.in_sync")] == [1]
        producer.send("orders", 0, delay_ms=500)
        await cluster.clock.sleep_until(3_000)
        assert group.stats.deliveries[-1].message_id == "app-10"
        assert sorted(os.listdir(tmp_path / "broker-0" / "wheel")) == ["pointer"]


async def test_batches_in_flight_are_acknowledged_together_and_in_order(autojump_clock, tmp_path):
    settings = {**SMALL, "delay.wheel.forward.batch": 3, "delay.wheel.forward.in.flight": 2}
    async with wheel_cluster(3, ORDERS, tmp_path, settings) as (cluster, group, _):
        cluster.producer("app", acks=-1).send("orders", 0, count=10, delay_ms=1_000)  # tick 10
        cluster.set_latency("delay-wheel-0", 2, 30)  # a forward takes 60 ms there and back
        await cluster.clock.sleep_until(1_121)
        got = [(d.message_id, d.delivered_ms) for d in group.stats.deliveries]
        # two batches of 3 sent at 1000, the next two (3 and 1) once they are acknowledged
        assert got == [(f"app-{i}", 1_060 if i < 6 else 1_120) for i in range(10)]
        assert delivered_ids(cluster, "orders") == [f"app-{i}" for i in range(10)]
        fired = [(e["time_ms"], e["forward"]) for e in events(group, "delay.wheel.fire") if e["forward"]]
        assert fired == [(1_120, 10)]


async def test_the_active_dies_with_two_batches_in_flight(autojump_clock, tmp_path):
    settings = {**SMALL, "delay.wheel.forward.batch": 3, "delay.wheel.forward.in.flight": 2}
    async with wheel_cluster(3, ORDERS, tmp_path, settings) as (cluster, group, _):
        cluster.producer("app", acks=-1).send("orders", 0, count=10, delay_ms=1_000)
        cluster.set_latency("delay-wheel-0", 2, 30)
        await cluster.clock.sleep_until(1_090)  # 0-5 acknowledged, 6-9 in flight
        assert len(group.stats.deliveries) == 6
        cluster.crash(0)
        await cluster.clock.sleep_until(2_000)
        ids = delivered_ids(cluster, "orders")
        assert sorted(set(ids)) == sorted(f"app-{i}" for i in range(10))
        assert sorted(i for i in ids if ids.count(i) > 1) == [
            "app-6",
            "app-6",
            "app-7",
            "app-7",
            "app-8",
            "app-8",
            "app-9",
            "app-9",
        ]


async def test_settings_and_their_errors():
    assert WheelConfig().slots * WheelConfig().tick_ms == 7_200_000
    with pytest.raises(ConfigError, match=r"delay_wheel\.delay\.wheel\.tick\.ms: expected a number >= 1"):
        WheelConfig.from_kafka({"delay.wheel.tick.ms": 0})
    with pytest.raises(ConfigError, match=r"delay\.wheel\.replicas: 4 is more than the cluster's 3 brokers"):
        WheelConfig.from_kafka({"delay.wheel.replicas": 4}).copies(3)


async def test_on_a_running_clock_the_ticks_are_on_the_epoch_scale(autojump_clock, tmp_path):
    """Served, due times are epoch ms (real clients write them): ticks and pointer follow that scale."""
    from minibroker.delayed_messages.wheel_service import WheelGroup
    from minibroker.sim import open_cluster

    origin = 1_700_000_000_000
    async with open_cluster(3, ORDERS) as cluster:
        group = WheelGroup(cluster, tmp_path, WheelConfig.from_kafka(SMALL), epoch_origin_ms=origin)
        await group.start(cluster.nursery)
        await cluster.clock.sleep_until(250)
        cluster.producer("p").send("orders", 0, delay_ms=1_000)
        await cluster.clock.sleep_until(1_301)
        (delivery,) = group.stats.deliveries
        assert (delivery.due_ms, delivery.delivered_ms) == (1_250, 1_300)
        assert group.view()[0].pointer == (origin + 1_300) // 100


def _to(topic, i, due, partition=0):
    from minibroker.delayed_messages.headers import DelayedMessage

    return DelayedMessage(f"m{i}", topic, partition, due, 0, None, b"v")


UNDELIVERABLE = {
    **SMALL,
    "delay.wheel.undeliverable.attempts": 3,
    "delay.wheel.undeliverable.backoff.ms": 250,
}


async def test_a_message_for_a_missing_topic_is_parked_and_the_others_flow_within_their_tick(
    autojump_clock, tmp_path
):
    """A typo'd topic and a partition out of range, due first in the tick: the messages behind them are
    delivered at their tick's end, as if they were not there; each is tried 3 times, 250 ms apart, then
    dropped (no dead-letter topic): counted and traced."""
    async with wheel_cluster(3, ORDERS, tmp_path, UNDELIVERABLE) as (cluster, group, _):
        await cluster.clock.sleep_until(10)
        group.write([_to("ordres", 0, 150), _to("orders", 1, 150, partition=7)])
        group.write([_to("orders", i, 150 + i) for i in range(2, 5)] + [_to("orders", 5, 250)])
        await cluster.clock.sleep_until(1_000)
        got = [(d.message_id, d.delivered_ms) for d in group.stats.deliveries]
        assert got == [("m2", 200), ("m3", 200), ("m4", 200), ("m5", 300)]  # each at its tick's end
        parked = [(e["time_ms"], e["id"], e["attempts"], e["due_ms"]) for e in events(group, "delay.parked")]
        assert parked == [(200, "m0", 1, 450), (200, "m1", 1, 450), (500, "m0", 2, 750), (500, "m1", 2, 750)]
        dropped = [(e["time_ms"], e["id"], e["topic"], e["attempts"]) for e in events(group, "delay.dropped")]
        assert dropped == [(800, "m0", "ordres", 3), (800, "m1", "orders", 3)]
        assert (group.stats.parked, group.stats.dropped, group.stats.dead_lettered) == (4, 2, 0)


async def test_past_its_attempts_a_message_goes_to_the_dead_letter_topic(autojump_clock, tmp_path):
    from minibroker.common.messages import TopicPartition
    from minibroker.delayed_messages.headers import records

    topics = [*ORDERS, TopicSpec("delay-dlt", 1, 2, assignment=((1, 2),))]
    settings = {**UNDELIVERABLE, "delay.wheel.dead.letter.topic": "delay-dlt"}
    async with wheel_cluster(3, topics, tmp_path, settings) as (cluster, group, _):
        await cluster.clock.sleep_until(10)
        group.write([_to("ordres", 0, 150)])
        await cluster.clock.sleep_until(1_000)
        (dead,) = events(group, "delay.dead")
        assert (dead["time_ms"], dead["id"], dead["partition"]) == (800, "m0", "delay-dlt-0")
        tp = TopicPartition("delay-dlt", 0)
        (batch,) = cluster.brokers[cluster.leader_of(tp)].logs[tp].batches()
        (record,) = records(batch.raw)
        headers = dict(record.headers)
        assert headers["delay.real.topic"] == b"ordres" and headers["delay.forward.attempts"] == b"3"
        assert headers["delay.error"] == b"UNKNOWN_TOPIC_OR_PARTITION"
        assert headers["delay.message.id"] == b"m0"


async def test_a_parked_message_is_delivered_once_its_topic_exists(autojump_clock, tmp_path):
    async with wheel_cluster(3, ORDERS, tmp_path, UNDELIVERABLE) as (cluster, group, _):
        await cluster.clock.sleep_until(10)
        group.write([_to("late", 0, 150)])
        await cluster.clock.sleep_until(300)
        cluster.create_topic(TopicSpec("late", 1, 2))
        await cluster.clock.sleep_until(1_000)
        assert [(d.message_id, d.delivered_ms) for d in group.stats.deliveries] == [("m0", 500)]
        assert delivered_ids(cluster, "late") == ["m0"]


async def test_kept_copies_with_different_pointers_start_from_the_first_copys_files(autojump_clock, tmp_path):
    """A kill between two copies' pointer writes leaves them apart; every tick fires on all copies, so
    on start a copy whose pointer differs from the first copy's is replaced by the first copy's files."""
    from minibroker.delayed_messages.file_wheel import FileWheel

    for b in range(3):
        copy = FileWheel(tmp_path / f"broker-{b}" / "wheel", 20, 100)
        copy.start(0)
        copy.append([_to("orders", 0, 450)])  # tick 5
        copy.close()
    (tmp_path / "broker-0" / "wheel" / "pointer").write_text("2")  # copy 0 handled ticks 1 and 2
    async with wheel_cluster(3, ORDERS, tmp_path, SMALL) as (cluster, group, _):
        assert [(e["broker"], e["copied_from"]) for e in events(group, "delay.wheel.in_sync")] == [
            (1, 0),
            (2, 0),
        ]
        await cluster.clock.sleep_until(501)
        assert [(d.message_id, d.due_ms, d.delivered_ms) for d in group.stats.deliveries] == [
            ("m0", 450, 500)
        ]
        assert [v.pointer for v in group.view().values()] == [5, 5, 5]
