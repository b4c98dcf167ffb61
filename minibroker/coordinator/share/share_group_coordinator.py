"""The share-group side of the group coordinator: ShareGroupHeartbeat (76) and ShareGroupDescribe (77).

Kafka's ``GroupMetadataManager.shareGroupHeartbeat`` and ``shareGroupDescribe``
(https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java),
kept beside the classic groups on the broker that leads the group's ``__consumer_offsets`` partition
(NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while that partition loads):

- epoch 0 joins (a member without an id gets one), -1 leaves; any other epoch must be the member's or its
  previous one (else FENCED_MEMBER_EPOCH), and the member must be known (UNKNOWN_MEMBER_ID).
- A join, a leave, an expired session, a changed subscription or a changed partition count raises the group
  epoch and runs the ``simple`` assignor; each member takes its part and the new epoch at its next
  heartbeat, whose answer carries the assignment. A member's previous epoch is still accepted.
- Each heartbeat re-arms the member's session on the broker's CoordinatorTimer (key
  ``share-session-<group>-<member>``, ``group.share.session.timeout.ms``); when it fires the member is
  removed (and its share partitions' records are released when its share sessions close or their locks
  expire).

Share-group offsets admin (Kafka's ``GroupCoordinatorService`` ``describeShareGroupOffsets``,
``alterShareGroupOffsets``, ``deleteShareGroupOffsets``), through the broker's persister at the share
coordinators:

- DescribeShareGroupOffsets (90): each partition's SPSO from ReadShareGroupStateSummary (-1 without state);
  without topics, every partition of the topics the group has state on. Unknown group: GROUP_ID_NOT_FOUND.
- AlterShareGroupOffsets (91): only an Empty group (NON_EMPTY_GROUP), only existing partitions
  (UNKNOWN_TOPIC_OR_PARTITION); each partition is started afresh at the given SPSO with
  InitializeShareGroupState, which drops its in-flight records and raises its state epoch, so a leader
  still holding the old share partition is fenced at its next write and reads the new state.
- DeleteShareGroupOffsets (92): only an Empty group; DeleteShareGroupState on every partition of each
  topic, which the group no longer has state on.

Every change is written to the group's ``__consumer_offsets`` partition through the coordinator's one
write path (acks=-1, a DelayedProduce in the produce purgatory; Kafka's ``GroupCoordinatorRecordHelpers``
share-group records): a member's metadata and current assignment (``share_member``, a tombstone when it
leaves), the group epoch (``share_group``), the target assignment (``share_target``) and the topics the group
has state on (``share_state_partitions``). A heartbeat that writes is answered when the write is
replicated (its error mapped as the consumer protocol's); an AlterShareGroupOffsets or
DeleteShareGroupOffsets that changes those topics writes them before it calls the share coordinators. A new
coordinator replays the records when it loads the partition and re-arms every member's session, so
members, epochs, assignments and the described offsets' topics survive a failover.
Trace events: ``share.group.join``, ``share.group.leave`` (cause ``leave`` or ``session``),
``share.group.assign`` (group epoch and the member's partitions).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import records
from minibroker.coordinator.group.coordinator_context import write_error
from minibroker.coordinator.share import simple_assignor
from minibroker.coordinator.share.messages import (
    AlterShareGroupOffsetsRequest,
    DescribedShareGroup,
    DescribedShareMember,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareGroupOffset,
    ShareGroupOffsetsResponse,
)
from minibroker.coordinator.share.share_group import ShareGroup, ShareGroupMember

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session-{group_id}-{member_id}"


class ShareGroupCoordinator:
    """Share groups of one broker's group coordinator (``coordinator``: its ``GroupCoordinator``)."""

    def __init__(self, coordinator: Any, partitions_of: Callable[[str], int]) -> None:
        self.coordinator = coordinator
        self.timer = coordinator.timer
        self.tracer = coordinator.manager.tracer
        self.broker_id = coordinator.broker_id
        self.partitions_of = partitions_of
        self.groups: dict[str, ShareGroup] = {}
        self._ids = itertools.count(1)
        coordinator.share_groups = self
        #: the broker's persister (reads and writes at the share coordinators); None: offsets admin refused
        self.persister: Any = None

    @property
    def config(self) -> Any:
        """The broker's settings now (a dynamic config change applies at once)."""
        return self.coordinator.manager.config

    def handle(self, message: Any, respond: Callable[[Any], object]) -> None:
        if isinstance(message, ShareGroupHeartbeatRequest):
            self.heartbeat(message, respond)
        elif isinstance(message, ShareGroupDescribeRequest):
            respond(self.describe(message))
        else:
            self.offsets_admin(message, respond)

    # ---- ShareGroupHeartbeat -------------------------------------------------------------------------------
    def heartbeat(
        self, request: ShareGroupHeartbeatRequest, respond: Callable[[ShareGroupHeartbeatResponse], object]
    ) -> None:
        """Answer one heartbeat, once its records are replicated; one without records that is not a
        refusal once the group's writes sent before it are (with the first failed one's error)."""
        writes: list[bytes] = []
        response = self._heartbeat(request, writes)
        if not writes and response.error is not Errors.NONE:
            respond(response)
            return
        if not writes:
            context = self.coordinator.context
            context.answer_when_written(request.group_id, respond, response, ShareGroupHeartbeatResponse)
            return

        def done(error: Errors) -> None:
            respond(response if error is Errors.NONE else ShareGroupHeartbeatResponse(write_error(error)))

        self.coordinator.context.write(request.group_id, writes, done)

    def _heartbeat(
        self, request: ShareGroupHeartbeatRequest, writes: list[bytes]
    ) -> ShareGroupHeartbeatResponse:
        if not request.group_id:
            return ShareGroupHeartbeatResponse(Errors.INVALID_REQUEST)
        refused = self.coordinator.refusal(request.group_id)
        if refused is not None:
            return ShareGroupHeartbeatResponse(refused)
        if request.group_id in self.coordinator.groups:
            return ShareGroupHeartbeatResponse(Errors.GROUP_ID_NOT_FOUND)  # a classic group has the id
        group = self.groups.setdefault(request.group_id, ShareGroup(request.group_id))
        epoch = request.member_epoch
        if epoch == LEAVE_EPOCH:
            if request.member_id in group.members:
                self._remove(group, request.member_id, "leave", writes)
            return ShareGroupHeartbeatResponse(Errors.NONE, request.member_id, LEAVE_EPOCH)
        if epoch == JOIN_EPOCH:
            member_id = request.member_id or self._new_member_id(group)
            member = group.members.get(member_id)
            if member is None:
                if not request.subscribed_topics:
                    return ShareGroupHeartbeatResponse(Errors.INVALID_REQUEST)
                member = ShareGroupMember(
                    member_id,
                    client_id=request.client_id,
                    client_host=request.client_host,
                    rack_id=request.rack_id,
                )
                group.members[member_id] = member
                self._emit("share.group.join", group=group.group_id, member=member_id)
        else:
            member_id = request.member_id
            member = group.members.get(member_id)
            if member is None:
                return ShareGroupHeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)
            if epoch > member.member_epoch or (
                epoch < member.member_epoch and epoch != member.previous_member_epoch
            ):
                return ShareGroupHeartbeatResponse(Errors.FENCED_MEMBER_EPOCH)
        changed = epoch == JOIN_EPOCH and member.member_epoch == 0
        dirty = changed
        if (
            request.subscribed_topics is not None
            and tuple(request.subscribed_topics) != member.subscribed_topics
        ):
            member.subscribed_topics = tuple(request.subscribed_topics)
            if not group.topics.issuperset(member.subscribed_topics):
                group.topics.update(member.subscribed_topics)
                writes.append(self._topics_record(group))
            changed = True
        if request.rack_id is not None and request.rack_id != member.rack_id:
            member.rack_id = request.rack_id
            dirty = True
        self._maybe_reassign(group, changed, writes)
        if member.member_epoch != group.assignment_epoch:
            dirty = True
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
            member.assignment = group.target.get(member_id, {})
            self._emit(
                "share.group.assign",
                group=group.group_id,
                member=member_id,
                epoch=member.member_epoch,
                keys=[f"{t}-{p}" for t, ps in sorted(member.assignment.items()) for p in ps],
            )
        if dirty or changed:
            writes.append(self._member_record(group.group_id, member))
        self._arm_session(group.group_id, member_id)
        send = epoch != member.member_epoch
        return ShareGroupHeartbeatResponse(
            Errors.NONE,
            member_id,
            member.member_epoch,
            self.config.group_share_heartbeat_interval_ms,
            dict(member.assignment) if send else None,
        )

    # ---- ShareGroupDescribe --------------------------------------------------------------------------------
    def describe(self, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
        described = []
        for group_id in request.group_ids:
            refused = self.coordinator.refusal(group_id)
            group = self.groups.get(group_id)
            if refused is not None or group is None:
                described.append(DescribedShareGroup(group_id, refused or Errors.GROUP_ID_NOT_FOUND))
                continue
            members = tuple(
                DescribedShareMember(
                    m.member_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.rack_id,
                    m.subscribed_topics,
                    dict(m.assignment),
                )
                for m in group.members.values()
            )
            described.append(
                DescribedShareGroup(
                    group_id,
                    Errors.NONE,
                    group.state,
                    group.group_epoch,
                    group.assignment_epoch,
                    "simple",
                    members,
                )
            )
        return ShareGroupDescribeResponse(tuple(described))

    # ---- share-group offsets admin ------------------------------------------------------------------------
    def offsets_admin(self, request: Any, respond: Callable[[ShareGroupOffsetsResponse], object]) -> None:
        """Answer DescribeShareGroupOffsets, AlterShareGroupOffsets or DeleteShareGroupOffsets once the share
        coordinators have answered for every partition."""
        group_id = request.group_id
        error = self.coordinator.refusal(group_id) if group_id else Errors.INVALID_REQUEST
        group = self.groups.get(group_id)
        if error is None and (group is None or self.persister is None):
            error = Errors.GROUP_ID_NOT_FOUND
        describing = isinstance(request, DescribeShareGroupOffsetsRequest)
        if error is None and group is not None and group.members and not describing:
            error = Errors.NON_EMPTY_GROUP
        if error is not None:
            respond(ShareGroupOffsetsResponse(error))
            return
        assert group is not None
        topics_before = set(group.topics)
        persister = self.persister
        answers: dict[TopicPartition, ShareGroupOffset] = {}
        #: partition -> the call at its share coordinator, given the function that takes its answer
        calls: dict[TopicPartition, Callable[[Callable[[ShareGroupOffset], None]], None]] = {}

        def known(tp: TopicPartition) -> bool:
            if 0 <= tp.partition < self.partitions_of(tp.topic):
                return True
            answers[tp] = ShareGroupOffset(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return False

        if describing:
            wanted = request.partitions
            for tp in self._partitions(sorted(group.topics)) if wanted is None else wanted:
                if known(tp):
                    calls[tp] = lambda done, tp=tp: persister.read(
                        group_id,
                        tp,
                        lambda e, s: done(ShareGroupOffset(e, s.start_offset if s else -1)),
                        summary=True,
                    )
        elif isinstance(request, AlterShareGroupOffsetsRequest):
            for tp, offset in request.offsets.items():
                if not known(tp):
                    continue
                if offset < 0:
                    answers[tp] = ShareGroupOffset(Errors.INVALID_REQUEST)
                    continue
                group.topics.add(tp.topic)
                calls[tp] = lambda done, tp=tp, offset=offset: persister.initialize(
                    group_id, tp, offset, lambda e: done(ShareGroupOffset(e, offset))
                )
        else:
            for topic in request.topics:
                if not known(TopicPartition(topic, 0)):
                    answers[TopicPartition(topic, -1)] = answers.pop(TopicPartition(topic, 0))
                    continue
                group.topics.discard(topic)
                for tp in self._partitions([topic]):
                    calls[tp] = lambda done, tp=tp: persister.delete(
                        group_id, tp, lambda e: done(ShareGroupOffset(e))
                    )
        left = [len(calls)]

        def finish() -> None:
            respond(ShareGroupOffsetsResponse(Errors.NONE, dict(sorted(answers.items(), key=_order))))

        def answered(tp: TopicPartition, offset: ShareGroupOffset) -> None:
            answers[tp] = offset
            left[0] -= 1
            if left[0] == 0:
                finish()

        def start() -> None:
            if not calls:
                finish()
            for tp, call in calls.items():
                call(lambda offset, tp=tp: answered(tp, offset))

        if group.topics == topics_before:
            start()
            return

        def written(error: Errors) -> None:
            if error is Errors.NONE:
                start()
            else:
                respond(ShareGroupOffsetsResponse(write_error(error)))

        self.coordinator.context.write(group_id, [self._topics_record(group)], written)

    def _partitions(self, topics: list[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in range(self.partitions_of(t))]

    # ---- membership ----------------------------------------------------------------------------------------
    def _new_member_id(self, group: ShareGroup) -> str:
        """The next ``<group>-share-<n>`` not held by a member (a loaded group keeps its members' ids)."""
        while True:
            member_id = f"{group.group_id}-share-{next(self._ids)}"
            if member_id not in group.members:
                return member_id

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            writes: list[bytes] = []
            self._remove(group, member_id, "session", writes)
            self.coordinator.context.write(group_id, writes, lambda error: None)

    def _arm_session(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(
            session_key(group_id, member_id),
            self.config.group_share_session_timeout_ms,
            lambda: self._session_expired(group_id, member_id),
        )

    def _remove(self, group: ShareGroup, member_id: str, cause: str, writes: list[bytes]) -> None:
        del group.members[member_id]
        self.timer.cancel(session_key(group.group_id, member_id))
        self._emit("share.group.leave", group=group.group_id, member=member_id, cause=cause)
        writes.append(records.share_record("share_member", group.group_id, None, member_id))
        self._maybe_reassign(group, True, writes)

    def _maybe_reassign(self, group: ShareGroup, changed: bool, writes: list[bytes]) -> None:
        """Run the assignor; a new target assignment at a new group epoch when membership, subscriptions
        or the result changed (each member takes its part at its next heartbeat)."""
        subscriptions = {m.member_id: m.subscribed_topics for m in group.members.values()}
        target = simple_assignor.assign(subscriptions, self.partitions_of)
        if not changed and target == group.target:
            return
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        group.target = target
        writes.append(records.share_record("share_group", group.group_id, {"group_epoch": group.group_epoch}))
        writes.append(
            records.share_record(
                "share_target",
                group.group_id,
                {
                    "assignment_epoch": group.assignment_epoch,
                    "members": {m: {t: list(ps) for t, ps in a.items()} for m, a in target.items()},
                },
            )
        )

    # ---- records: write, replay, load, unload -------------------------------------------------------------
    @staticmethod
    def _member_record(group_id: str, member: ShareGroupMember) -> bytes:
        value = {
            "member_epoch": member.member_epoch,
            "previous_member_epoch": member.previous_member_epoch,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "rack_id": member.rack_id,
            "subscribed_topics": list(member.subscribed_topics),
            "assignment": {t: list(ps) for t, ps in member.assignment.items()},
        }
        return records.share_record("share_member", group_id, value, member.member_id)

    @staticmethod
    def _topics_record(group: ShareGroup) -> bytes:
        return records.share_record(
            "share_state_partitions", group.group_id, {"topics": sorted(group.topics)}
        )

    def replay(self, record: dict[str, Any]) -> None:
        """Apply one share group record read from ``__consumer_offsets`` (a member's tombstone removes it)."""
        kind, group_id, value = record["type"], record["group"], record["value"]
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        if kind == "share_member":
            member_id = record["member"]
            if value is None:
                group.members.pop(member_id, None)
                return
            group.members[member_id] = ShareGroupMember(
                member_id,
                value["member_epoch"],
                value["previous_member_epoch"],
                value["client_id"],
                value["client_host"],
                value["rack_id"],
                tuple(value["subscribed_topics"]),
                {t: tuple(ps) for t, ps in value["assignment"].items()},
            )
        elif value is None:
            if kind == "share_group":
                self.groups.pop(group_id, None)
        elif kind == "share_group":
            group.group_epoch = value["group_epoch"]
        elif kind == "share_target":
            group.assignment_epoch = value["assignment_epoch"]
            group.target = {m: {t: tuple(ps) for t, ps in a.items()} for m, a in value["members"].items()}
        else:
            group.topics = set(value["topics"])

    def group_ids(self, partition: int) -> list[str]:
        return [g for g in self.groups if self.coordinator.context.partition_of(g) == partition]

    def on_loaded(self, partition: int) -> int:
        """Arm the session of every member of ``partition``'s share groups; how many groups it holds."""
        mine = self.group_ids(partition)
        for group_id in mine:
            for member_id in self.groups[group_id].members:
                self._arm_session(group_id, member_id)
        return len(mine)

    def unload(self, partition: int) -> list[str]:
        """Drop ``partition``'s share groups and disarm their members' sessions."""
        dropped = self.group_ids(partition)
        for group_id in dropped:
            for member_id in self.groups.pop(group_id).members:
                self.timer.cancel(session_key(group_id, member_id))
        return dropped

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)


def _order(item: tuple[TopicPartition, ShareGroupOffset]) -> tuple[str, int]:
    return item[0].topic, item[0].partition
