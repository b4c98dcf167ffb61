"""Delay levels on a cluster: the internal topics, the router, one DelayService per live broker.

``DelayServices(cluster, config).start(nursery)`` creates ``__delay_<level>`` for
every level and ``__delay_offsets`` (internal topics, ``delay.topic.partitions``
partitions, replication ``delay.topic.replication.factor``), installs the router
behind ``Producer.send(..., delay_ms=...)``, and runs a DelayService beside each
broker: it stops when its broker crashes or shuts down and a new one starts
when the broker restarts (the cluster's broker hooks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from minibroker.delayed_messages.config import DelayConfig
from minibroker.delayed_messages.offsets import COMPACTED, DELAY_OFFSETS_TOPIC, PURGED
from minibroker.delayed_messages.router import DelayRouter
from minibroker.delayed_messages.service import DelayService
from minibroker.delayed_messages.stats import DelayStats
from minibroker.sim.cluster import TopicSpec

if TYPE_CHECKING:
    from minibroker.sim.cluster import Cluster


class DelayServices:
    """Every broker's DelayService, and the figures they share."""

    def __init__(
        self, cluster: Cluster, config: DelayConfig | None = None, *, epoch_origin_ms: int = 0
    ) -> None:
        self.cluster = cluster
        self.config = config or DelayConfig()
        self.epoch_origin_ms = epoch_origin_ms
        self.stats = DelayStats()
        self.services: dict[int, DelayService] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        """Create the topics, install the router and start a service beside every live broker."""
        cluster = self.cluster
        rf = self.config.replication_factor(len(cluster.brokers))
        for topic in [*self.config.levels.topics(), DELAY_OFFSETS_TOPIC]:
            if topic == DELAY_OFFSETS_TOPIC and topic in cluster.topics:
                continue  # the file wheel made it (it keeps its ingest offset there too)
            partitions = 1 if topic == DELAY_OFFSETS_TOPIC else self.config.topic_partitions
            configs = dict(COMPACTED) if topic == DELAY_OFFSETS_TOPIC else dict(PURGED)
            cluster.create_topic(TopicSpec(topic, partitions, rf, internal=True, configs=configs))
        cluster.delay_routers["levels"] = DelayRouter(cluster, self.config, self.epoch_origin_ms)
        cluster.broker_hooks.append(self)
        self._nursery = nursery
        for broker in cluster.brokers:
            if broker.alive:
                await self.broker_started(broker.broker_id)

    async def broker_started(self, broker_id: int) -> None:
        assert self._nursery is not None
        service = DelayService(self.cluster, broker_id, self.config, self.stats, self.epoch_origin_ms)
        scope = trio.CancelScope()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await service.run(task_status=task_status)

        self.services[broker_id] = service
        self._scopes[broker_id] = scope
        await self._nursery.start(run)

    def broker_stopped(self, broker_id: int) -> None:
        """The service dies with its broker: held messages are gone, its clients leave the network."""
        scope = self._scopes.pop(broker_id, None)
        service = self.services.pop(broker_id, None)
        if scope is not None:
            scope.cancel()
        if service is not None:
            for client_id in service.client_ids:
                self.cluster.network.unregister(client_id)

    def held(self) -> dict[str, int]:
        """Held messages per level partition, over the live services."""
        return {
            str(tp): held.held
            for service in self.services.values()
            for tp, held in service.partitions.items()
        }

    def paused(self) -> list[str]:
        return sorted(
            str(tp)
            for service in self.services.values()
            for tp, held in service.partitions.items()
            if held.paused
        )
