"""The emulator's own client API: Producer and Consumer.

Scenarios, tests, the TUI and the wire front end all go through it.

Every request a client makes is a ``ClientRequest`` record kept by the cluster:
when it was created and completed, the per-partition outcome (Kafka error
names), and *why* it completed: ``immediate``, ``condition`` (its delayed
operation's condition held), ``expiry`` (the purgatory timed it out),
``leadership`` (the leader lost leadership), or ``network`` (connection reset
or no answer). Clients learn leaders from the controller's current state (no
stale metadata) and do not retry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from minibroker.cluster.config import ConfigError, ConsumerConfig, ProducerConfig
from minibroker.cluster.errors import Errors
from minibroker.cluster.membership import GroupMembership
from minibroker.cluster.messages import (
    CONSUMER_REPLICA_ID,
    HIGH_WATERMARK,
    TXN_COMMITTED,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    NetworkError,
    ProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)

if TYPE_CHECKING:
    from minibroker.cluster.cluster import Cluster
    from minibroker.cluster.log import RecordBatch


@attrs.define(eq=False)
class ClientRequest:
    """One request and its outcome. ``errors`` maps partition label -> Kafka error name."""

    id: str
    client: str
    kind: str  # "produce" or "fetch"
    broker: int
    created_ms: int
    partitions: tuple[TopicPartition, ...]
    completed_ms: int | None = None
    cause: str | None = None
    errors: dict[str, str] = attrs.Factory(dict)
    base_offsets: dict[str, int] = attrs.Factory(dict)
    records: dict[str, int] = attrs.Factory(dict)
    bytes: dict[str, int] = attrs.Factory(dict)
    high_watermarks: dict[str, int] = attrs.Factory(dict)
    #: the scenario step's name for the request (or its load generator's), if any
    label: str | None = None
    _done: trio.Event | None = attrs.field(default=None, repr=False, alias="_done")

    @property
    def completed(self) -> bool:
        return self.completed_ms is not None

    @property
    def latency_ms(self) -> int | None:
        return None if self.completed_ms is None else self.completed_ms - self.created_ms

    def error(self, tp: TopicPartition | None = None) -> str:
        """The error of ``tp`` (or of the only partition)."""
        if tp is not None:
            return self.errors[str(tp)]
        values = set(self.errors.values())
        if len(values) != 1:
            raise ValueError(f"{self.id} has partitions with different errors; name one")
        return values.pop()

    async def wait(self) -> ClientRequest:
        """Until the request completes (an event is made only for requests someone waits on)."""
        if self.completed_ms is None:
            if self._done is None:
                self._done = trio.Event()
            await self._done.wait()
        return self


class _Client:
    def __init__(self, cluster: Cluster, client_id: str) -> None:
        self.cluster = cluster
        self.client_id = client_id
        self._sequence = 0
        cluster.network.register(client_id, self)

    def deliver(self, src: Any, message: Any, respond: Any) -> None:
        raise TypeError(f"client {self.client_id} does not serve requests")

    def _new_request(
        self, kind: str, broker: int, partitions: Iterable[TopicPartition], name: str | None, several: bool
    ) -> ClientRequest:
        """A new request record; ``name`` (unique, chosen by the caller) replaces ``<client>#<n>``."""
        self._sequence += 1
        if name is None:
            request_id = f"{self.client_id}#{self._sequence}"
        else:
            request_id = f"{name}@b{broker}" if several else name
        request = ClientRequest(
            request_id,
            self.client_id,
            kind,
            broker,
            self.cluster.now(),
            tuple(partitions),
        )
        self.cluster.requests.append(request)
        return request

    def _finish(self, request: ClientRequest, cause: str) -> None:
        request.completed_ms = self.cluster.now()
        request.cause = cause
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(
                f"client.{request.kind}.done",
                client=self.client_id,
                op=request.id,
                broker=request.broker,
                keys=list(request.errors),
                error=",".join(sorted(set(request.errors.values()))),
                cause=cause,
                latency_ms=request.latency_ms,
            )
        if request._done is not None:
            request._done.set()

    def _fail_all(self, request: ClientRequest, error: Errors, cause: str) -> None:
        for tp in request.partitions:
            request.errors[str(tp)] = error.name
        self._finish(request, cause)

    def _open(
        self,
        kind: str,
        leader: int,
        tps: list[TopicPartition],
        name: str | None,
        several: bool,
        trace_fields: Callable[[], dict[str, Any]],
    ) -> ClientRequest:
        """Record a new request to ``leader`` and trace it; with no leader it fails at once."""
        request = self._new_request(kind, leader, tps, name, several)
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(
                f"client.{kind}",
                client=self.client_id,
                op=request.id,
                broker=leader,
                keys=[str(tp) for tp in tps],
                **trace_fields(),
            )
        if leader < 0:
            self._fail_all(request, Errors.LEADER_NOT_AVAILABLE, "immediate")
        return request

    def _send(self, request: ClientRequest, message: Any, timeout_ms: int, grace_ms: int) -> None:
        """Send ``message`` to the request's broker; its answer (or a network error) completes it.

        Each client class reads its own answers in ``_on_response``.
        """
        self.cluster.network.request(
            self.client_id,
            request.broker,
            message,
            timeout_ms + grace_ms,
            lambda response: self._on_response(request, response),
        )

    def _group_by_leader(self, partitions: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            groups.setdefault(self.cluster.leader_of(tp), []).append(tp)
        return groups


class Producer(_Client):
    """Sends produce requests; ``acks`` -1 waits in the leader's produce purgatory."""

    def __init__(self, cluster: Cluster, client_id: str, config: ProducerConfig) -> None:
        super().__init__(cluster, client_id)
        self.config = config

    def produce(
        self, data: Mapping[TopicPartition, ProduceData], name: str | None = None
    ) -> list[ClientRequest]:
        """Send now, one request per leader; return the requests (complete later).

        A ``name`` becomes the request id (suffixed ``@b<leader>`` when the data spans leaders).
        """
        requests = []
        groups = self._group_by_leader(data)
        config = self.config
        for leader, tps in sorted(groups.items()):
            request = self._open(
                "produce",
                leader,
                tps,
                name,
                len(groups) > 1,
                lambda tps=tps: {"acks": config.acks, "records": sum(data[tp].count for tp in tps)},
            )
            requests.append(request)
            if request.completed:
                continue
            message = ProduceRequest(
                self.config.acks,
                self.config.request_timeout_ms,
                data if len(groups) == 1 else {tp: data[tp] for tp in tps},
                request.id,
            )
            if self.config.acks == 0:
                self.cluster.network.send(self.client_id, leader, message)
                for tp in tps:
                    request.errors[str(tp)] = Errors.NONE.name
                    request.base_offsets[str(tp)] = -1
                self._finish(request, "immediate")
                continue
            self._send(request, message, config.request_timeout_ms, config.response_grace_ms)
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
        (``minibroker.delay``; ``delay_via`` names one when several are installed).
        """
        tp = TopicPartition(topic, partition)
        if delay_ms is not None:
            routers = self.cluster.delay_routers
            if not routers:
                raise ValueError("delay_ms needs delayed messages on the cluster (minibroker.delay)")
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
        self, topic: str, partition: int = 0, count: int = 1, size: int = 100, **delayed: Any
    ) -> ClientRequest:
        """``send`` (``delayed``: its ``delay_ms``, ``delay_via``) and wait for the answer."""
        return await self.send(topic, partition, count, size, **delayed).wait()

    def _on_response(self, request: ClientRequest, response: ProduceResponse | NetworkError) -> None:
        if isinstance(response, NetworkError):
            self._fail_all(request, response.error, "network")
            return
        for tp, part in response.partitions.items():
            request.errors[str(tp)] = part.error.name
            request.base_offsets[str(tp)] = part.base_offset
        self._finish(request, response.cause)


class Consumer(_Client):
    """An assign()-based consumer: ``fetch`` sends one fetch per leader from the current positions."""

    def __init__(self, cluster: Cluster, client_id: str, config: ConsumerConfig) -> None:
        super().__init__(cluster, client_id)
        self.config = config
        self.positions: dict[TopicPartition, int] = {}
        #: every batch received, per partition, in order (offsets, for tests and expectations)
        self.received: dict[TopicPartition, list[tuple[int, int]]] = {}
        #: assigned partitions that ``fetch`` skips (Kafka's ``pause``)
        self.paused: set[TopicPartition] = set()
        #: partitions ``unassign``ed (until assigned again): late answers for them are ignored
        self.dropped: set[TopicPartition] = set()
        #: called with each partition's new batches (past the position) as a fetch answer arrives
        self.on_batches: Callable[[TopicPartition, list[RecordBatch]], None] | None = None
        #: called with (partition, batch, high watermark of the answer) for each new batch (chaos checks)
        self.on_batch: Callable[[TopicPartition, RecordBatch, int], None] | None = None
        #: called with each FetchRequest as it is sent (chaos checks when its completion was due)
        self.on_fetch: Callable[[FetchRequest], None] | None = None
        #: the group membership once ``subscribe`` was called (minibroker.cluster.membership)
        self.membership: GroupMembership | None = None

    def subscribe(self, topics: Iterable[str]) -> GroupMembership:
        """Join ``group.id`` for ``topics``; run the returned membership's ``run`` in a nursery."""
        if not self.config.group_id:
            raise ConfigError(f"consumer {self.client_id}: subscribe needs a group.id")
        self.membership = GroupMembership(self, list(topics))
        return self.membership

    def assign(self, partitions: Iterable[TopicPartition], offset: int = 0) -> None:
        for tp in partitions:
            self.positions[tp] = offset
            self.received.setdefault(tp, [])
            self.dropped.discard(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions; an answer still on its way for them is ignored."""
        for tp in partitions:
            self.positions.pop(tp, None)
            self.paused.discard(tp)
            self.dropped.add(tp)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these assigned partitions until ``resume`` (their positions stay)."""
        self.paused.update(tp for tp in partitions if tp in self.positions)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.paused.difference_update(partitions)

    def fetch(self, name: str | None = None) -> list[ClientRequest]:
        """Send a fetch for every assigned partition not paused, one per leader; return the requests."""
        if not self.positions:
            raise ValueError(f"consumer {self.client_id} has no assigned partitions")
        isolation = TXN_COMMITTED if self.config.isolation_level == "read_committed" else HIGH_WATERMARK
        requests = []
        paused = self.paused
        groups = self._group_by_leader(tp for tp in self.positions if tp not in paused)
        positions = self.positions
        for leader, tps in sorted(groups.items()):
            request = self._open(
                "fetch",
                leader,
                tps,
                name,
                len(groups) > 1,
                lambda tps=tps: {"offset": min(positions[tp] for tp in tps)},
            )
            requests.append(request)
            if request.completed:
                continue
            parts = {
                tp: FetchPartition(self.positions[tp], self.config.max_partition_fetch_bytes) for tp in tps
            }
            message = FetchRequest(
                CONSUMER_REPLICA_ID,
                self.config.fetch_max_wait_ms,
                self.config.fetch_min_bytes,
                self.config.fetch_max_bytes,
                parts,
                isolation,
                request.id,
            )
            if self.on_fetch is not None:
                self.on_fetch(message)
            self._send(request, message, self.config.request_timeout_ms, self.config.response_grace_ms)
        return requests

    async def poll(self) -> list[ClientRequest]:
        """Fetch and wait for every answer."""
        requests = self.fetch()
        for request in requests:
            await request.wait()
        return requests

    def _on_response(self, request: ClientRequest, response: FetchResponse | NetworkError) -> None:
        if isinstance(response, NetworkError):
            self._fail_all(request, response.error, "network")
            return
        for tp, part in response.partitions.items():
            label = str(tp)
            request.errors[label] = part.error.name
            request.records[label] = sum(batch.count for batch in part.batches)
            request.bytes[label] = part.size
            request.high_watermarks[label] = part.high_watermark
            if part.batches:
                request.base_offsets[label] = part.batches[0].base_offset
                position = self.positions.get(tp, 0)
                if tp in self.dropped:
                    continue  # unassigned while the fetch was out
                fresh = []
                for batch in part.batches:
                    if batch.next_offset > position:
                        self.received[tp].append((batch.base_offset, batch.count))
                        if self.on_batch is not None:
                            self.on_batch(tp, batch, part.high_watermark)
                        fresh.append(batch)
                        position = batch.next_offset
                self.positions[tp] = position
                if fresh and self.on_batches is not None:
                    self.on_batches(tp, fresh)
        self._finish(request, response.cause)
