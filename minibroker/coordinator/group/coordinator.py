"""GroupCoordinator: one broker's groups, for the ``__consumer_offsets`` partitions it leads.

A group belongs to partition ``partition_for(group_id, partitions)`` of
``__consumer_offsets``; the broker leading that partition is its coordinator.
Becoming leader of such a partition *loads* it: every record of its log (to the log
end, as Kafka does) is replayed into groups and committed offsets, and each loaded
member's session timeout is armed again. Reading the log takes virtual time:
``minibroker.coordinator.load.ms.per.record`` (default 1) times the records in the
partition, a keyed task ``load-<partition>`` on the broker's timer; until it fires,
requests for the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS, as Kafka's
coordinator does while its loader reads the log (an empty partition loads at once).
Losing leadership *unloads* it (a load in progress is abandoned): parked
JoinGroup/SyncGroup answers get NOT_COORDINATOR and its timers are cancelled. A
request for a group whose partition this broker neither leads nor loads answers
NOT_COORDINATOR.

Every write (a generation's metadata, offset commits, tombstones) is one acks=-1
produce on the group's partition with ``offsets.commit.timeout.ms``: a DelayedProduce
in this broker's produce purgatory, answered when the ISR has it.

The coordinator is Kafka's ``GroupCoordinatorService`` and ``GroupCoordinatorShard`` in
one object: it routes each request (refusing groups it does not serve), follows the
leadership of ``__consumer_offsets`` partitions, loads (replays) and unloads them, and
runs the retention checks. The protocol lives in the two managers it holds, as a
Kafka shard holds them: a ``GroupMetadataManager`` (membership, rebalances, the
group records) and an ``OffsetMetadataManager`` (committed offsets), which sees the
groups through the first. Both reach the broker through one ``CoordinatorContext``.
Deviation: Kafka builds one shard (with its own managers and timer) per
``__consumer_offsets`` partition, each run by one thread of its runtime; here one
coordinator per broker holds one pair of managers for every partition it has loaded
(a partition's groups are found by ``partition_for``), on the broker's single-threaded
reaper, so requests and timers of all its partitions run in one order.

Pure: no trio. The broker's ReplicaManager supplies the timer, the logs and the
appends; trace events are ``group.*`` and ``timer.*`` (the keyed tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import records
from minibroker.coordinator.group.consumer_group_manager import ConsumerGroupManager
from minibroker.coordinator.group.coordinator_context import CoordinatorContext, write_error
from minibroker.coordinator.group.coordinator_timer import CoordinatorTimer
from minibroker.coordinator.group.group import ClassicGroup
from minibroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from minibroker.coordinator.group.hashing import OFFSETS_TOPIC
from minibroker.coordinator.group.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResult,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
)
from minibroker.coordinator.group.offset_metadata_manager import OffsetMetadataManager, commit_response
from minibroker.coordinator.group.records import OffsetAndMetadata
from minibroker.coordinator.group.views import CoordinatorView
from minibroker.trace import NULL_TRACER, Tracer


def expire_key(partition: int) -> str:
    return f"expire-offsets-{partition}"


def load_key(partition: int) -> str:
    return f"load-{partition}"


class GroupCoordinator:
    """The group coordinator of one broker (lives and dies with its ReplicaManager)."""

    def __init__(
        self,
        manager: Any,
        partitions: Callable[[], int],
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.manager = manager
        self.broker_id: int = manager.broker_id
        self.partitions = partitions
        self.context = CoordinatorContext(manager, partitions, tracer)
        self.timer: CoordinatorTimer = self.context.timer
        self.group_metadata_manager = GroupMetadataManager(self.context)
        self.offset_metadata_manager = OffsetMetadataManager(self.context, self.group_metadata_manager)
        #: KIP-848's consumer groups (ConsumerGroupHeartbeat), beside the classic ones
        self.consumer_group_manager = ConsumerGroupManager(self.context, self.group_metadata_manager)
        self.offset_metadata_manager.consumer_groups = self.consumer_group_manager.groups
        self.offset_metadata_manager.consumer_group_manager = self.consumer_group_manager
        #: the share groups beside these (a ``ShareGroupCoordinator`` sets itself here): their records are
        #: replayed, and their groups loaded and unloaded, with each partition's
        self.share_groups: Any = None
        #: __consumer_offsets partition -> leader epoch it was loaded at
        self.loaded: dict[int, int] = {}
        #: __consumer_offsets partition -> leader epoch of the load in progress (its log is being read)
        self.loading: dict[int, int] = {}

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        """The loaded groups by id (the group metadata manager's)."""
        return self.group_metadata_manager.groups

    @property
    def offsets(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """The loaded committed offsets by group id (the offset metadata manager's)."""
        return self.offset_metadata_manager.offsets

    def refusal(self, group_id: str) -> Errors | None:
        """Why this broker cannot serve ``group_id`` now (NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS), or None when its partition is loaded."""
        partition = self.context.partition_of(group_id)
        if partition in self.loaded:
            return None
        return Errors.COORDINATOR_LOAD_IN_PROGRESS if partition in self.loading else Errors.NOT_COORDINATOR

    # ==========================================================================================
    # Requests
    # ==========================================================================================
    def handle(self, message: GroupRequest, answer: Callable[[Any], None]) -> None:
        """Answer one request (now or later, exactly once)."""
        groups, offsets = self.group_metadata_manager, self.offset_metadata_manager
        if isinstance(
            message,
            (
                JoinGroupRequest,
                SyncGroupRequest,
                HeartbeatRequest,
                LeaveGroupRequest,
                OffsetCommitRequest,
                TxnOffsetCommitRequest,
            ),
        ):
            gid = message.group_id
            refused = self.refusal(gid) if gid else None
            if refused is not None:
                return answer(_refused(message, refused))
            mixed = self.consumer_group_manager.groups.get(gid)
            migration = self.consumer_group_manager.migration
            if mixed is not None and isinstance(message, JoinGroupRequest) and mixed.members:
                migration.join(mixed, message, answer)  # a classic member in a consumer group
            elif mixed is not None and isinstance(message, SyncGroupRequest):
                migration.sync(mixed, message, answer)
            elif mixed is not None and isinstance(message, HeartbeatRequest):
                migration.heartbeat(mixed, message, answer)
            elif mixed is not None and isinstance(message, LeaveGroupRequest):
                migration.leave(mixed, message, answer)
            elif isinstance(message, JoinGroupRequest):
                self.consumer_group_manager.downgrade(gid)
                groups.join_group(message, answer)
            elif isinstance(message, SyncGroupRequest):
                groups.sync_group(message, answer)
            elif isinstance(message, HeartbeatRequest):
                groups.heartbeat(message, answer)
            elif isinstance(message, LeaveGroupRequest):
                groups.leave_group(message, answer)
            elif isinstance(message, TxnOffsetCommitRequest):
                offsets.commit_transactional_offsets(message, answer)
            else:
                offsets.commit_offsets(message, answer)
        elif isinstance(message, OffsetFetchRequest):
            fetch = message

            def fetched(_written: Errors = Errors.NONE) -> None:
                answer(
                    OffsetFetchResponse(
                        tuple(
                            OffsetFetchResult(g.group_id, refused)
                            if g.group_id and (refused := self.refusal(g.group_id)) is not None
                            else offsets.fetch_offsets(g, fetch.require_stable)
                            for g in fetch.groups
                        )
                    )
                )

            if message.require_stable:  # Kafka's write operation without records: after the pending ones
                self.context.when_written([g.group_id for g in message.groups], fetched)
            else:
                fetched()
        elif isinstance(message, ConsumerGroupHeartbeatRequest):
            refused = self.refusal(message.group_id) if message.group_id else None
            if refused is not None:
                return answer(ConsumerGroupHeartbeatResponse(refused))
            self.consumer_group_manager.heartbeat(message, answer)
        elif isinstance(message, ConsumerGroupDescribeRequest):
            answer(self.consumer_group_manager.describe(message.group_ids, self.refusal))
        elif isinstance(message, DescribeGroupsRequest):
            answer(DescribeGroupsResponse(tuple(self.describe(gid) for gid in message.group_ids)))
        elif isinstance(message, ListGroupsRequest):
            answer(self.list_groups(message))
        elif isinstance(message, DeleteGroupsRequest):
            self.delete_groups(message, answer)
        elif isinstance(message, OffsetDeleteRequest):
            gid = message.group_id
            refused = self.refusal(gid) if gid else Errors.INVALID_GROUP_ID
            if refused is not None:
                return answer(OffsetDeleteResponse(refused))
            offsets.delete_offsets(message, self.group_metadata_manager.groups.get(message.group_id), answer)
        else:
            raise TypeError(f"the group coordinator cannot handle {type(message).__name__}")

    def describe(self, group_id: str) -> DescribedGroup:
        refused = self.refusal(group_id)
        if refused is not None:
            return DescribedGroup(group_id, refused, "")
        if group_id in self.consumer_group_manager.groups:
            return self.consumer_group_manager.described_group(group_id)
        return self.group_metadata_manager.describe_group(group_id)

    def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        if self.loading:  # as Kafka: no partial listing while a partition loads
            return ListGroupsResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS, ())
        classic = self.group_metadata_manager.list_groups(request)
        consumer = self.consumer_group_manager.listed(
            {s.strip().lower() for s in request.states}, {t.strip().lower() for t in request.types}
        )
        return ListGroupsResponse(
            Errors.NONE, tuple(sorted((*classic.groups, *consumer), key=lambda g: g.group_id))
        )

    def delete_groups(self, request: DeleteGroupsRequest, answer: Callable[[Any], None]) -> None:
        """Delete each Empty group; answer once, in request order, when every deletion is written.

        As Kafka's ``GroupCoordinatorShard.deleteGroups``: a group's error (INVALID_GROUP_ID,
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is its own;
        the deletable groups of one ``__consumer_offsets`` partition are one write of their tombstones
        (offsets first, then the group's), and that write's error is each of theirs. A group named twice
        is deleted once and both entries carry its result. Every write is counted before the first is
        issued: a write may complete inside ``write`` (an ISR of one), and the answer must wait for the
        others.
        """
        groups, offsets = self.group_metadata_manager, self.offset_metadata_manager
        results: dict[str, Errors] = {}
        writes: dict[int, tuple[list[str], list[bytes]]] = {}
        for gid in dict.fromkeys(request.group_ids):
            error = self._delete_error(gid)
            if error is not None:
                results[gid] = error
                continue
            gids, values = writes.setdefault(self.context.partition_of(gid), ([], []))
            gids.append(gid)
            values += offsets.delete_all_offsets(gid)
            if gid in self.consumer_group_manager.groups:
                values.append(self.consumer_group_manager.delete(gid))
            else:
                values.append(groups.group_tombstone(gid))
                groups.remove_group(gid)
        waiting = len(writes)

        def finish() -> None:
            answer(DeleteGroupsResponse(tuple((gid, results[gid]) for gid in request.group_ids)))

        for gids, values in writes.values():

            def done(error: Errors, gids: list[str] = gids) -> None:
                nonlocal waiting
                for gid in gids:
                    results[gid] = write_error(error)
                waiting -= 1
                if waiting == 0:
                    finish()

            self.context.write(gids[0], values, done)
        if not writes:
            finish()

    def _delete_error(self, group_id: str) -> Errors | None:
        if not group_id:
            return Errors.INVALID_GROUP_ID
        refused = self.refusal(group_id)
        if refused is not None:
            return refused
        consumer = self.consumer_group_manager.groups.get(group_id)
        if consumer is not None:
            return Errors.NON_EMPTY_GROUP if consumer.members else None
        return self.group_metadata_manager.validate_delete_group(group_id)

    def snapshot(self) -> CoordinatorView:
        """The loaded partitions, every group with its members' session deadlines, the keyed tasks."""
        return CoordinatorView(
            tuple(sorted(self.loaded)),
            self.group_metadata_manager.snapshot(),
            tuple(self.timer.armed()),
            tuple(sorted(self.loading)),
            self.consumer_group_manager.snapshot(),
        )

    # ==========================================================================================
    # Loading and unloading __consumer_offsets partitions
    # ==========================================================================================
    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        """ReplicaManager hook: this broker became leader (or stopped leading) ``tp``."""
        if tp.topic != OFFSETS_TOPIC:
            return
        if leader:
            if epoch in (self.loaded.get(tp.partition), self.loading.get(tp.partition)):
                return
            self.unload(tp.partition)
            self.load(tp.partition, epoch)
        else:
            self.unload(tp.partition)

    def load(self, partition: int, epoch: int) -> None:
        """Start loading ``partition``: at once when its log is empty, else after reading it."""
        count = sum(len(batch.values or ()) for batch in self._batches(partition))
        delay = count * self.context.config.coordinator_load_ms_per_record
        if delay <= 0:
            self._loaded(partition, epoch)
            return
        self.loading[partition] = epoch
        self.context.emit("group.load.start", partition=partition, epoch=epoch, records=count, load_ms=delay)

        def read() -> None:
            if self.loading.get(partition) == epoch:
                self._loaded(partition, epoch)

        self.timer.schedule(load_key(partition), delay, read)

    def _batches(self, partition: int) -> Any:
        log = self.manager.logs.get(TopicPartition(OFFSETS_TOPIC, partition))
        return log.batches() if log is not None else ()

    def _loaded(self, partition: int, epoch: int) -> None:
        """The log is read: replay it to its end and serve the partition's groups."""
        self.loading.pop(partition, None)
        replayed = 0
        for batch in self._batches(partition):
            for marker in batch.producers:
                if marker.control >= 0:  # a transaction marker: its producer's pending offsets end
                    self.offset_metadata_manager.complete_transaction(marker.producer_id, marker.control == 1)
            for value in batch.values or ():
                self.replay(records.decode(value))
                replayed += 1
        self.loaded[partition] = epoch
        groups = self.group_metadata_manager.on_loaded(partition)
        groups += self.consumer_group_manager.on_loaded(partition)
        if self.share_groups is not None:
            groups += self.share_groups.on_loaded(partition)
        self.context.emit("group.load", partition=partition, epoch=epoch, records=replayed, groups=groups)
        self._schedule_expiry(partition)

    def unload(self, partition: int) -> None:
        if self.loading.pop(partition, None) is not None:
            self.timer.cancel(load_key(partition))
            self.context.emit("group.unload", partition=partition)
        if self.loaded.pop(partition, None) is None:
            return
        self.timer.cancel(expire_key(partition))
        dropped = self.group_metadata_manager.unload(partition)
        dropped += self.consumer_group_manager.unload(partition)
        if self.share_groups is not None:
            dropped += self.share_groups.unload(partition)
        self.offset_metadata_manager.unload(dropped)
        self.context.emit("group.unload", partition=partition)

    def on_transaction_completed(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker reached ``__consumer_offsets-partition`` (Kafka's onTransactionCompleted)."""
        if partition in self.loaded:
            self.offset_metadata_manager.complete_transaction(producer_id, committed)

    def replay(self, record: dict[str, Any]) -> None:
        """Apply one record of ``__consumer_offsets`` to the manager it belongs to."""
        if record["type"] == "offset":
            self.offset_metadata_manager.replay(record)
        elif record["type"] in ("consumer_group", "consumer_member"):
            self.consumer_group_manager.replay(record)
        elif record["type"].startswith("share_"):
            if self.share_groups is not None:
                self.share_groups.replay(record)
        else:
            self.group_metadata_manager.replay(record)

    # ==========================================================================================
    # Retention checks
    # ==========================================================================================
    def _schedule_expiry(self, partition: int) -> None:
        def due() -> None:
            if partition not in self.loaded:
                return
            mine = sorted(
                self.group_metadata_manager.group_ids(partition)
                + self.consumer_group_manager.group_ids(partition)
            )
            self.offset_metadata_manager.expire_offsets(mine)
            self._schedule_expiry(partition)

        self.timer.schedule(
            expire_key(partition), self.context.config.offsets_retention_check_interval_ms, due
        )


def _refused(message: GroupRequest, error: Errors) -> Any:
    """``message``'s answer when the coordinator cannot serve its group (``error`` for all of it)."""
    if isinstance(message, JoinGroupRequest):
        return JoinGroupResponse(error, member_id=message.member_id)
    if isinstance(message, SyncGroupRequest):
        return SyncGroupResponse(error)
    if isinstance(message, HeartbeatRequest):
        return HeartbeatResponse(error)
    if isinstance(message, LeaveGroupRequest):
        return LeaveGroupResponse(error)
    assert isinstance(message, (OffsetCommitRequest, TxnOffsetCommitRequest))
    return commit_response(message, {}, error)
