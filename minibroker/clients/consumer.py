"""The emulated Consumer: assign()-based fetches from each partition's leader, or a group
member through ``subscribe`` (``minibroker.clients.consumer_coordinator``, or
``minibroker.clients.consumer_membership_manager`` with ``group.protocol`` = consumer).

``isolation.level`` = ``read_committed`` fetches up to the last stable offset and drops aborted
transactions' records; markers never reach ``received`` (``minibroker.clients.read_committed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from minibroker.broker.config import ConfigError, ConsumerConfig
from minibroker.clients.consumer_coordinator import GroupMembership
from minibroker.clients.consumer_membership_manager import ConsumerMembershipManager
from minibroker.clients.read_committed import deliverable
from minibroker.clients.request import Client, ClientContext, ClientRequest
from minibroker.common import messages
from minibroker.common.messages import NetworkError, TopicPartition

if TYPE_CHECKING:
    from minibroker.common.record_batch import RecordBatch


class Consumer(Client):
    """An assign()-based consumer: ``fetch`` sends one fetch per leader from the current positions."""

    def __init__(self, cluster: ClientContext, client_id: str, config: ConsumerConfig) -> None:
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
        self.on_fetch: Callable[[messages.FetchRequest], None] | None = None
        #: the group membership once ``subscribe`` was called: the classic protocol's
        #: (minibroker.clients.consumer_coordinator) or, with ``group.protocol`` = consumer, KIP-848's
        #: (minibroker.clients.consumer_membership_manager)
        self.membership: GroupMembership | ConsumerMembershipManager | None = None

    def subscribe(self, topics: Iterable[str]) -> GroupMembership | ConsumerMembershipManager:
        """Join ``group.id`` for ``topics``; run the returned membership's ``run`` in a nursery."""
        if not self.config.group_id:
            raise ConfigError(f"consumer {self.client_id}: subscribe needs a group.id")
        if self.config.group_protocol == "consumer":
            self.membership = ConsumerMembershipManager(self, list(topics))
        else:
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
        isolation = self._isolation()
        requests = []
        paused = self.paused
        positions = self.positions
        wanted = [tp for tp in positions if tp not in paused]

        def traced(tps: list[TopicPartition]) -> dict[str, Any]:
            return {"offset": min(positions[tp] for tp in tps)}

        for tps, request in self._open_per_leader("fetch", wanted, name, traced):
            requests.append(request)
            if request.completed:
                continue
            parts = {
                tp: messages.FetchPartition(self.positions[tp], self.config.max_partition_fetch_bytes)
                for tp in tps
            }
            message = messages.FetchRequest(
                messages.CONSUMER_REPLICA_ID,
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

    def _list_offsets_settings(self) -> tuple[str, int, int]:
        return self._isolation(), self.config.request_timeout_ms, self.config.response_grace_ms

    def _isolation(self) -> str:
        return (
            messages.TXN_COMMITTED
            if self.config.isolation_level == "read_committed"
            else messages.HIGH_WATERMARK
        )

    async def poll(self) -> list[ClientRequest]:
        """Fetch and wait for every answer."""
        requests = self.fetch()
        for request in requests:
            await request.wait()
        return requests

    def _on_response(self, request: ClientRequest, response: messages.FetchResponse | NetworkError) -> None:
        if isinstance(response, NetworkError):
            self._fail_all(request, response.error, "network")
            return
        read_committed = self.config.isolation_level == "read_committed"
        for tp, part in response.partitions.items():
            label = str(tp)
            counts = deliverable(part.batches, part.aborted, read_committed)
            request.errors[label] = part.error.name
            request.records[label] = sum(counts)
            request.bytes[label] = part.size
            request.high_watermarks[label] = part.high_watermark
            if part.batches:
                request.base_offsets[label] = part.batches[0].base_offset
                position = self.positions.get(tp, 0)
                if tp in self.dropped:
                    continue  # unassigned while the fetch was out
                fresh = []
                for batch, records in zip(part.batches, counts, strict=True):
                    if batch.next_offset > position:
                        position = batch.next_offset
                        if not records:
                            continue  # a transaction marker or an aborted transaction's batch
                        self.received[tp].append((batch.base_offset, records))
                        if self.on_batch is not None:
                            self.on_batch(tp, batch, part.high_watermark)
                        fresh.append(batch)
                self.positions[tp] = position
                if fresh and self.on_batches is not None:
                    self.on_batches(tp, fresh)
        self._finish(request, response.cause)
