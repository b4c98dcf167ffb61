"""A raw group client on the emulated network: sends coordinator requests, records answers with times."""

from __future__ import annotations

from typing import Any

import attrs

from minibroker.coordinator.group.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    SyncGroupRequest,
)
from minibroker.sim import open_cluster
from minibroker.trace import ListSink, RecordingTracer

PROTOCOLS = (("range", b"r-meta"), ("roundrobin", b"rr-meta"))


@attrs.define
class Parked:
    """An answer still to come: ``response`` and ``at`` are set when it arrives."""

    response: Any = None
    at: int | None = None


class Raw:
    """A network node that talks to brokers directly."""

    def __init__(self, cluster: Any, name: str) -> None:
        self.cluster = cluster
        self.name = name
        cluster.network.register(name, self)

    def deliver(self, src: Any, message: Any, respond: Any) -> None:
        raise TypeError("a raw client serves nothing")

    def send(self, broker: int, message: Any, timeout_ms: int = 3_600_000) -> Parked:
        parked = Parked()

        def on_response(response: Any) -> None:
            parked.response = response
            parked.at = self.cluster.now()

        self.cluster.network.request(self.name, broker, message, timeout_ms, on_response)
        return parked

    async def call(self, broker: int, message: Any, timeout_ms: int = 3_600_000) -> Any:
        return await self.cluster.network.call(self.name, broker, message, timeout_ms)


def join(group: str, member: str = "", session: int = 10_000, rebalance: int = 300_000, **kw: Any):
    kw.setdefault("protocols", PROTOCOLS)
    return JoinGroupRequest(
        group,
        member,
        session,
        rebalance,
        kw.pop("protocol_type", "consumer"),
        client_id=kw.pop("client_id", "c"),
        **kw,
    )


def sync(group: str, generation: int, member: str, assignments=()):
    return SyncGroupRequest(group, generation, member, tuple(assignments))


def heartbeat(group: str, generation: int, member: str, instance: str | None = None):
    return HeartbeatRequest(group, generation, member, instance)


def traced():
    sink = ListSink()
    return RecordingTracer(lambda: 0, [sink]), sink


async def open_group_cluster(brokers: int = 1, config: dict | None = None, **options: Any):
    """A cluster with ``__consumer_offsets`` of 1 partition (so broker 0 coordinates) unless configured."""
    settings = {"offsets.topic.num.partitions": 1}
    settings.update(config or {})
    tracer, sink = traced()
    cm = open_cluster(brokers, config=settings, tracer=tracer, **options)
    cluster = await cm.__aenter__()
    tracer.clock = cluster.now
    cluster.ensure_offsets_topic()
    return cm, cluster, sink


async def member_join(raw: Raw, broker: int, group: str, **kw: Any) -> str:
    """Join with an empty id, get MEMBER_ID_REQUIRED, return the id (the second join is the caller's)."""
    first = await raw.call(broker, join(group, **kw))
    assert first.error.name == "MEMBER_ID_REQUIRED"
    return first.member_id
