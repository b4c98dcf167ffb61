"""``ClientRequest`` (one request and its outcome) and the base every emulated client shares:
requests opened per leader, sent over the emulated network, finished with a cause.

A client runs in a ``ClientContext``: the network it sends through, the clock, the tracer, the
record of every request, and the metadata it asks (a partition's leader, a group's coordinator, a
topic's partition count, a leader's log for offset resets). ``minibroker.sim.cluster.Cluster`` is the
one implementation; clients rank below it and see it only through this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from minibroker.common.errors import Errors
from minibroker.common.messages import (
    HIGH_WATERMARK,
    ListOffsetsRequest,
    ListOffsetsResponse,
    NetworkError,
    TopicPartition,
)
from minibroker.common.network import NetworkClient
from minibroker.runtime import MsClock
from minibroker.trace import Tracer

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker


class TopicMetadata(Protocol):
    partitions: int


class ClientContext(Protocol):
    """What an emulated client uses of the cluster it runs in."""

    network: NetworkClient
    clock: MsClock
    tracer: Tracer
    #: every client request, in the order they were opened
    requests: list[ClientRequest]
    #: the delayed-message routers installed on the cluster, by design name
    delay_routers: dict[str, Any]

    @property
    def topics(self) -> Mapping[str, TopicMetadata]: ...

    @property
    def brokers(self) -> Sequence[Broker]: ...

    def now(self) -> int: ...

    def leader_of(self, tp: TopicPartition) -> int: ...

    def coordinator_for(self, group_id: str) -> int: ...

    def transaction_coordinator_for(self, transactional_id: str) -> int: ...

    def ensure_offsets_topic(self) -> TopicMetadata: ...

    @property
    def nursery(self) -> trio.Nursery: ...


@attrs.define(eq=False)
class ClientRequest:
    """One request and its outcome. ``errors`` maps partition label -> Kafka error name."""

    id: str
    client: str
    #: "produce", "fetch", "delete_records", "elect_leaders", "list_offsets", or a transactional producer's
    #: "init_producer_id", "send_offsets", "end_txn"
    kind: str
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
    #: DeleteRecords: the low watermark each partition answered with (-1 on error)
    low_watermarks: dict[str, int] = attrs.Factory(dict)
    #: ListOffsets: the offset each partition answered with (-1: no record found, or an error)
    offsets: dict[str, int] = attrs.Factory(dict)
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


class Client:
    """What Producer and Consumer share: an id on the network and the requests it opens."""

    def __init__(self, cluster: ClientContext, client_id: str) -> None:
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
            self.cluster.clock.now_ms(),
            tuple(partitions),
        )
        self.cluster.requests.append(request)
        return request

    def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
        name: str | None = None,
    ) -> list[ClientRequest]:
        """ListOffsets to the leader of each partition, one request per leader: the offset of a special
        timestamp (-1 latest, -2 earliest, -4 earliest local, -5 latest tiered) or of the first record
        appended at or after a time in ms. The leader may wait in its RemoteListOffsets purgatory."""
        isolation, timeout_ms, grace_ms = self._list_offsets_settings()
        requests = []

        def traced(tps: list[TopicPartition]) -> dict[str, Any]:
            return {"timestamps": [timestamps[tp] for tp in tps]}

        for tps, request in self._open_per_leader("list_offsets", timestamps, name, traced):
            requests.append(request)
            if request.completed:
                continue
            message = ListOffsetsRequest({tp: timestamps[tp] for tp in tps}, isolation, request.id)
            self.cluster.network.request(
                self.client_id,
                request.broker,
                message,
                timeout_ms + grace_ms,
                lambda response, request=request: self._on_list_offsets(request, response),
            )
        return requests

    def _list_offsets_settings(self) -> tuple[str, int, int]:
        """ListOffsets' isolation, and how long the client waits for the answer (plus a grace)."""
        return HIGH_WATERMARK, 30_000, 1000

    def _on_list_offsets(self, request: ClientRequest, response: ListOffsetsResponse | NetworkError) -> None:
        if isinstance(response, NetworkError):
            request.offsets.update((str(tp), -1) for tp in request.partitions)
            self._fail_all(request, response.error, "network")
        else:
            answers = {str(tp): part for tp, part in response.partitions.items()}
            request.errors.update((label, part.error.name) for label, part in answers.items())
            request.offsets.update((label, part.offset) for label, part in answers.items())
            self._finish(request, response.cause)

    def _finish(self, request: ClientRequest, cause: str) -> None:
        request.completed_ms = self.cluster.clock.now_ms()
        request.cause = cause
        if self.cluster.tracer.enabled:
            self._trace(
                f"client.{request.kind}.done",
                request,
                lambda: {
                    "keys": list(request.errors),
                    "error": ",".join(sorted(set(request.errors.values()))),
                    "cause": cause,
                    "latency_ms": request.latency_ms,
                },
            )
        if request._done is not None:
            request._done.set()

    def _trace(self, kind: str, request: ClientRequest, fields: Callable[[], dict[str, Any]]) -> None:
        """Trace ``kind`` for ``request`` (client, op, broker and ``fields()``, built only when traced)."""
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(kind, client=self.client_id, op=request.id, broker=request.broker, **fields())

    def _open_per_leader(
        self,
        kind: str,
        partitions: Iterable[TopicPartition],
        name: str | None,
        trace_fields: Callable[[list[TopicPartition]], dict[str, Any]],
    ) -> Iterator[tuple[list[TopicPartition], ClientRequest]]:
        """Open one request per leader of ``partitions``, in leader order, each as the caller
        reaches it (so each is sent before the next is opened); yield it with its partitions."""
        groups = self._group_by_leader(partitions)
        for leader, tps in sorted(groups.items()):
            request = self._open(kind, leader, tps, name, len(groups) > 1, lambda tps=tps: trace_fields(tps))
            yield tps, request

    def _fail_all(self, request: ClientRequest, error: Errors, cause: str) -> None:
        for tp in request.partitions:
            request.errors[str(tp)] = error.name
        self._finish(request, cause)

    def _open(
        self,
        kind: str,
        leader: int,
        tps: Sequence[TopicPartition],
        name: str | None,
        several: bool,
        trace_fields: Callable[[], dict[str, Any]],
    ) -> ClientRequest:
        """Record a new request to ``leader`` and trace it; with no leader it fails at once."""
        request = self._new_request(kind, leader, tps, name, several)
        tracer = self.cluster.tracer
        if tracer.enabled:
            fields = {"keys": [str(tp) for tp in tps], **trace_fields()}
            emit = tracer.emit
            emit(f"client.{kind}", client=self.client_id, op=request.id, broker=request.broker, **fields)
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
