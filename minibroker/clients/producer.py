"""The emulated Producer: produce requests to each partition's leader."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minibroker.broker.config import ProducerConfig
from minibroker.clients.request import Client, ClientContext, ClientRequest
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    NetworkError,
    ProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)


class Producer(Client):
    """Sends produce requests; ``acks`` -1 waits in the leader's produce purgatory."""

    def __init__(self, cluster: ClientContext, client_id: str, config: ProducerConfig) -> None:
        super().__init__(cluster, client_id)
        self.config = config
        #: one TopicPartition and one 1-tuple of it per partition sent to (looked up by a plain
        #: (topic, partition) tuple, which a TopicPartition equals): requests share them
        self._partitions: dict[tuple[str, int], TopicPartition] = {}
        self._singletons: dict[TopicPartition, tuple[TopicPartition]] = {}

    def _topic_partition(self, topic: str, partition: int) -> TopicPartition:
        """The one TopicPartition of (``topic``, ``partition``) this producer's requests share."""
        tp = self._partitions.get((topic, partition))
        if tp is None:
            tp = self._partitions[tp] = TopicPartition(topic, partition)
        return tp

    def _singleton(self, tp: TopicPartition) -> tuple[TopicPartition]:
        """The one 1-tuple of ``tp`` this producer's requests share."""
        tps = self._singletons.get(tp)
        if tps is None:
            tps = self._singletons[tp] = (tp,)
        return tps

    def produce(
        self, data: Mapping[TopicPartition, ProduceData], name: str | None = None
    ) -> list[ClientRequest]:
        """Send now, one request per leader; return the requests (complete later).

        A ``name`` becomes the request id (suffixed ``@b<leader>`` when the data spans leaders).
        """
        requests = []
        config = self.config

        def traced(tps: list[TopicPartition]) -> dict[str, Any]:
            return {"acks": config.acks, "records": sum(data[tp].count for tp in tps)}

        if len(data) == 1:  # one partition, one leader: what _open_per_leader yields, without its grouping
            (tp,) = data
            leaders = [(self.cluster.leader_of(tp), self._singleton(tp))]
        else:
            leaders = sorted(self._group_by_leader(data).items())
        several = len(leaders) > 1
        network = self.cluster.network
        for leader, tps in leaders:
            request = self._open("produce", leader, tps, name, several, lambda tps=tps: traced(tps))
            requests.append(request)
            if request.completed_ms is not None:
                continue
            message = ProduceRequest(
                config.acks, config.request_timeout_ms, {tp: data[tp] for tp in tps}, request.id
            )
            if config.acks == 0:
                network.send(self.client_id, request.broker, message)
                for tp in tps:
                    request.errors[str(tp)] = Errors.NONE.name
                    request.base_offsets[str(tp)] = -1
                self._finish(request, "immediate")
                continue
            network.request(
                self.client_id,
                request.broker,
                message,
                config.request_timeout_ms + config.response_grace_ms,
                lambda response, request=request: self._on_response(request, response),
            )
        return requests

    def send(
        self,
        topic: str,
        partition: int = 0,
        count: int = 1,
        size: int = 100,
        delay_ms: int | None = None,
        name: str | None = None,
        delay_via: str | None = None,
    ) -> ClientRequest:
        """Produce ``count`` records of ``size`` bytes in all to one partition; return the request.

        With ``delay_ms`` the records are delayed by the cluster's delayed-message design
        (``minibroker.delayed_messages``; ``delay_via`` names one when several are installed).
        """
        tp = self._topic_partition(topic, partition)
        if delay_ms is not None:
            routers = self.cluster.delay_routers
            if not routers:
                raise ValueError(
                    "delay_ms needs delayed messages on the cluster (minibroker.delayed_messages)"
                )
            if delay_via is None and len(routers) == 1:
                (router,) = routers.values()
            elif delay_via in routers:
                router = routers[delay_via]
            else:
                designs = ", ".join(sorted(routers))
                raise ValueError(f"delay_via: expected one of {designs}, got {delay_via!r}")
            return router.send(self, tp, count, size, delay_ms, name)
        (request,) = self.produce({tp: ProduceData(count, size)}, name)
        return request

    def complete_locally(
        self, broker: int, tp: TopicPartition, error: Errors, name: str | None = None
    ) -> ClientRequest:
        """Record a produce answered without the network (the file wheel's in-process write)."""
        request = self._open("produce", broker, [tp], name, False, lambda: {"acks": self.config.acks})
        if not request.completed:
            request.errors[str(tp)] = error.name
            self._finish(request, "immediate")
        return request

    async def send_and_wait(
        self, topic: str, partition: int = 0, count: int = 1, size: int = 100, **delay: Any
    ) -> ClientRequest:
        """``send`` (``delay``: a delayed message's ``delay_ms``, ``delay_via``) and wait for the answer."""
        return await self.send(topic, partition, count, size, **delay).wait()

    def _on_response(self, request: ClientRequest, response: ProduceResponse | NetworkError) -> None:
        if isinstance(response, NetworkError):
            self._fail_all(request, response.error, "network")
            return
        errors, base_offsets = request.errors, request.base_offsets
        for tp, part in response.partitions.items():
            label = f"{tp[0]}-{tp[1]}"  # str(tp)
            errors[label] = part.error._name_
            base_offsets[label] = part.base_offset
        self._finish(request, response.cause)
