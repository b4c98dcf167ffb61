"""A cluster with delay levels installed, traced, for the DelayService tests."""

from __future__ import annotations

import contextlib

import trio

from minibroker.common.messages import TopicPartition
from minibroker.delayed_messages import DelayConfig, DelayServices
from minibroker.delayed_messages.headers import records
from minibroker.sim import open_cluster
from minibroker.trace import ListSink, RecordingTracer


@contextlib.asynccontextmanager
async def delayed_cluster(brokers, topics, settings=None, **options):
    sink = ListSink()
    tracer = RecordingTracer(lambda: 0, [sink])
    async with open_cluster(brokers, topics, tracer=tracer, **options) as cluster:
        tracer.clock = cluster.now
        async with trio.open_nursery() as nursery:
            services = DelayServices(cluster, DelayConfig.from_kafka(settings or {}))
            await services.start(nursery)
            services.sink = sink
            yield cluster, services
            nursery.cancel_scope.cancel()


def delivered_ids(cluster, topic, partition=0):
    """Message ids in the real partition's leader log, in offset order (duplicates kept)."""
    tp = TopicPartition(topic, partition)
    log = cluster.brokers[cluster.leader_of(tp)].logs[tp]
    out = []
    for batch in log.batches():
        for record in records(batch.raw):
            out.append(dict(record.headers)["delay.message.id"].decode())
    return out


def events(services, kind):
    return [e for e in services.sink if e["kind"] == kind]


@contextlib.asynccontextmanager
async def wheel_cluster(brokers, topics, data_dir, settings=None, levels=None, **options):
    """A cluster with the file wheel (and, with ``levels`` settings, delay levels too)."""
    from minibroker.delayed_messages.wheel_service import WheelConfig, WheelGroup

    sink = ListSink()
    tracer = RecordingTracer(lambda: 0, [sink])
    async with open_cluster(brokers, topics, tracer=tracer, **options) as cluster:
        tracer.clock = cluster.now
        async with trio.open_nursery() as nursery:
            group = WheelGroup(cluster, data_dir, WheelConfig.from_kafka(settings or {}))
            await group.start(nursery)
            group.sink = sink
            services = None
            if levels is not None:
                services = DelayServices(cluster, DelayConfig.from_kafka(levels))
                await services.start(nursery)
            yield cluster, group, services
            nursery.cancel_scope.cancel()


async def play(cluster, sends, fault, restart_after_ms, end_ms):
    """Send ``(at, delay, partition, count)`` delayed sends of client "app" to "orders", crash broker 0
    at ``fault = (at, restart)`` (and restart it ``restart_after_ms`` later), run to ``end_ms``.

    Returns the accepted messages: id -> (the time it was sent, delay). The routers number a client's records
    app-0, app-1, ... whether accepted or not.
    """
    producer = cluster.producer("app", acks=-1)
    accepted = {}
    number = 0

    async def faults():
        if fault is None:
            return
        await cluster.clock.sleep_until(fault[0])
        cluster.crash(0)
        if fault[1]:
            await cluster.clock.sleep_until(fault[0] + restart_after_ms)
            await cluster.restart(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(faults)
        for at, delay, partition, count in sorted(sends):
            await cluster.clock.sleep_until(at)
            sent_at = cluster.now()  # later than ``at`` when the previous send waited past it
            request = await producer.send_and_wait("orders", partition, count=count, delay_ms=delay)
            if request.error() == "NONE":  # (refused while the design's leader is down: not accepted)
                for n in range(number, number + count):
                    accepted[f"app-{n}"] = (sent_at, delay)
            number += count
        await cluster.clock.sleep_until(end_ms)
    return accepted
