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

Pure: no trio. The broker's ReplicaManager supplies the timer, the logs and the
appends; trace events are ``group.*`` and ``timer.*`` (the keyed tasks).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.coordinator.group import records
from minibroker.coordinator.group.classic import ClassicMembership, heartbeat_key
from minibroker.coordinator.group.coordinator_timer import CoordinatorTimer
from minibroker.coordinator.group.group import (
    EMPTY,
    STABLE,
    ClassicGroup,
    Member,
)
from minibroker.coordinator.group.hashing import OFFSETS_TOPIC, partition_for
from minibroker.coordinator.group.messages import (
    DeleteGroupsRequest,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResult,
    SyncGroupRequest,
    SyncGroupResponse,
)
from minibroker.coordinator.group.offsets import OffsetsManager
from minibroker.coordinator.group.records import OffsetAndMetadata
from minibroker.coordinator.group.views import CoordinatorView, GroupView, MemberView
from minibroker.trace import NULL_TRACER, Tracer

_MEMBER_IDS = uuid.UUID("6d696e69-6272-6f6b-6572-67726f757073")  # namespace: "minibrokergroups"


def expire_key(partition: int) -> str:
    return f"expire-offsets-{partition}"


def load_key(partition: int) -> str:
    return f"load-{partition}"


class GroupCoordinator(ClassicMembership, OffsetsManager):
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
        self.tracer = tracer
        self.timer = CoordinatorTimer(manager.timer, manager.now, tracer, self.broker_id)
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        #: __consumer_offsets partition -> leader epoch it was loaded at
        self.loaded: dict[int, int] = {}
        #: __consumer_offsets partition -> leader epoch of the load in progress (its log is being read)
        self.loading: dict[int, int] = {}
        self.expired_offsets = 0

    # --- host services (used by the mixins) --------------------------------------------------
    @property
    def config(self) -> Any:
        return self.manager.config

    def now(self) -> int:
        return self.manager.now()

    def known(self, tp: TopicPartition) -> bool:
        return bool(self.manager.known(tp))

    def emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)

    def new_member_id(self, prefix: str) -> str:
        """``prefix-<uuid>`` as Kafka makes them; the uuid is derived, so runs are reproducible."""
        number = next(self.manager.request_numbers)
        return f"{prefix}-{uuid.uuid5(_MEMBER_IDS, f'{self.broker_id}/{number}')}"

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions())

    def owns(self, group_id: str) -> bool:
        return self.partition_of(group_id) in self.loaded

    def refusal(self, group_id: str) -> Errors | None:
        """Why this broker cannot serve ``group_id`` now (NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS), or None when its partition is loaded."""
        partition = self.partition_of(group_id)
        if partition in self.loaded:
            return None
        return Errors.COORDINATOR_LOAD_IN_PROGRESS if partition in self.loading else Errors.NOT_COORDINATOR

    def create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, state_timestamp_ms=self.now())
        self.groups[group_id] = group
        return group

    def write(self, group_id: str, values: list[bytes], on_done: Callable[[Errors], Any]) -> None:
        """Append ``values`` to the group's partition with acks=-1; ``on_done(error)`` when answered."""
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        data = ProduceData(len(values), sum(len(v) for v in values), values=tuple(values))
        request = ProduceRequest(
            -1, self.config.offsets_commit_timeout_ms, {tp: data}, self.manager.next_request_id("offsets")
        )
        self.manager.append_records(request, lambda response: on_done(response.partitions[tp].error))

    # --- requests ----------------------------------------------------------------------------
    def handle(self, message: GroupRequest, answer: Callable[[Any], None]) -> None:
        """Answer one request (now or later, exactly once)."""
        if isinstance(
            message,
            (JoinGroupRequest, SyncGroupRequest, HeartbeatRequest, LeaveGroupRequest, OffsetCommitRequest),
        ):
            gid = message.group_id
            refused = self.refusal(gid) if gid else None
            if refused is not None:
                return answer(_refused(message, refused))
            if isinstance(message, JoinGroupRequest):
                self.join_group(message, answer)
            elif isinstance(message, SyncGroupRequest):
                self.sync_group(message, answer)
            elif isinstance(message, HeartbeatRequest):
                self.heartbeat(message, answer)
            elif isinstance(message, LeaveGroupRequest):
                self.leave_group(message, answer)
            else:
                self.commit_offsets(message, answer)
        elif isinstance(message, OffsetFetchRequest):
            answer(
                OffsetFetchResponse(
                    tuple(
                        OffsetFetchResult(g.group_id, refused)
                        if g.group_id and (refused := self.refusal(g.group_id)) is not None
                        else self.fetch_offsets(g)
                        for g in message.groups
                    )
                )
            )
        elif isinstance(message, DescribeGroupsRequest):
            answer(DescribeGroupsResponse(tuple(self.describe(gid) for gid in message.group_ids)))
        elif isinstance(message, ListGroupsRequest):
            answer(self.list_groups(message))
        elif isinstance(message, DeleteGroupsRequest):
            self.delete_groups(message, answer, self.refusal)
        else:
            raise TypeError(f"the group coordinator cannot handle {type(message).__name__}")

    def describe(self, group_id: str) -> DescribedGroup:
        refused = self.refusal(group_id)
        if refused is not None:
            return DescribedGroup(group_id, refused, "")
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, Errors.NONE, "Dead")
        stable = group.state == STABLE
        members = tuple(
            DescribedMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return DescribedGroup(
            group_id,
            Errors.NONE,
            group.state,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        if self.loading:  # as Kafka: no partial listing while a partition loads
            return ListGroupsResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS, ())
        states = {s.strip().lower() for s in request.states}
        types = {t.strip().lower() for t in request.types}
        listed = tuple(
            ListedGroup(gid, group.protocol_type or "", group.state)
            for gid, group in sorted(self.groups.items())
            if (not states or group.state.lower() in states) and (not types or "classic" in types)
        )
        return ListGroupsResponse(Errors.NONE, listed)

    def snapshot(self) -> CoordinatorView:
        """The loaded partitions, every group with its members' session deadlines, the keyed tasks."""
        groups = []
        for gid, group in sorted(self.groups.items()):
            members = tuple(
                MemberView(
                    m.member_id,
                    m.client_id,
                    self.timer.deadline(heartbeat_key(gid, m.member_id)) or -1,
                    "join" if m.awaiting_join is not None else "sync" if m.awaiting_sync is not None else "",
                )
                for m in group.members.values()
            )
            leader = group.members.get(group.leader_id or "")
            groups.append(
                GroupView(
                    gid,
                    group.state,
                    group.generation_id,
                    group.protocol_name,
                    leader.client_id if leader is not None else None,
                    members,
                    len(group.pending_members),
                )
            )
        return CoordinatorView(
            tuple(sorted(self.loaded)), tuple(groups), tuple(self.timer.armed()), tuple(sorted(self.loading))
        )

    # --- loading -----------------------------------------------------------------------------
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
        delay = count * self.config.coordinator_load_ms_per_record
        if delay <= 0:
            self._loaded(partition, epoch)
            return
        self.loading[partition] = epoch
        self.emit("group.load.start", partition=partition, epoch=epoch, records=count, load_ms=delay)

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
            for value in batch.values or ():
                self.replay(records.decode(value))
                replayed += 1
        self.loaded[partition] = epoch
        mine = [g for gid, g in self.groups.items() if self.partition_of(gid) == partition]
        for group in mine:
            for member in group.members.values():
                self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
        self.emit("group.load", partition=partition, epoch=epoch, records=replayed, groups=len(mine))
        self._schedule_expiry(partition)

    def unload(self, partition: int) -> None:
        if self.loading.pop(partition, None) is not None:
            self.timer.cancel(load_key(partition))
            self.emit("group.unload", partition=partition)
        if self.loaded.pop(partition, None) is None:
            return
        self.timer.cancel(expire_key(partition))
        for gid in [gid for gid in self.groups if self.partition_of(gid) == partition]:
            group = self.groups.pop(gid)
            self.offsets.pop(gid, None)
            for member in group.members.values():
                group.complete_join(
                    member, JoinGroupResponse(Errors.NOT_COORDINATOR, member_id=member.member_id)
                )
                group.complete_sync(member, SyncGroupResponse(Errors.NOT_COORDINATOR))
            for member_id in list(group.members) + list(group.pending_members):
                self.timer.cancel(heartbeat_key(gid, member_id))
            self.timer.cancel(f"join-{gid}")
            self.timer.cancel(f"sync-{gid}")
        self.emit("group.unload", partition=partition)

    def replay(self, record: dict[str, Any]) -> None:
        gid = record["group"]
        value = record["value"]
        if record["type"] == "offset":
            tp = TopicPartition(record["topic"], record["partition"])
            if value is None:
                committed = self.offsets.get(gid, {})
                committed.pop(tp, None)
                if not committed:
                    self.offsets.pop(gid, None)
                return
            if gid not in self.groups:
                self.create_group(gid)
            self.offsets.setdefault(gid, {})[tp] = OffsetAndMetadata(**value)
            return
        if value is None:
            self.groups.pop(gid, None)
            return
        group = ClassicGroup(
            gid,
            state=STABLE if value["members"] else EMPTY,
            state_timestamp_ms=value["state_timestamp_ms"],
            generation_id=value["generation"],
            protocol_type=value["protocol_type"] or None,
            protocol_name=value["protocol"],
        )
        for m in value["members"]:
            protocols = [(value["protocol"], records.b64(m["subscription"]))] if value["protocol"] else []
            member = Member(
                m["member_id"],
                m["instance_id"],
                m["client_id"],
                m["client_host"],
                m["rebalance_timeout_ms"],
                m["session_timeout_ms"],
                value["protocol_type"] or "",
                protocols,
                records.b64(m["assignment"]),
            )
            group.add(member, None)
        group.leader_id = value["leader"] if value["leader"] in group.members else group.leader_id
        self.groups[gid] = group

    # --- offsets expiry ----------------------------------------------------------------------
    def _schedule_expiry(self, partition: int) -> None:
        def due() -> None:
            if partition not in self.loaded:
                return
            mine = sorted(gid for gid in self.groups if self.partition_of(gid) == partition)
            self.expired_offsets += self.expire_offsets(mine)
            self._schedule_expiry(partition)

        self.timer.schedule(expire_key(partition), self.config.offsets_retention_check_interval_ms, due)


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
    assert isinstance(message, OffsetCommitRequest)
    return OffsetsManager._commit_response(message, {}, error)
