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

The groups live in memory only: a coordinator failover starts them empty and members join again.
Trace events: ``share.group.join``, ``share.group.leave`` (cause ``leave`` or ``session``),
``share.group.assign`` (group epoch and the member's partitions).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import OFFSETS_TOPIC
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
        #: the broker's persister (reads and writes at the share coordinators); None: offsets admin refused
        self.persister: Any = None

    @property
    def config(self) -> Any:
        """The broker's settings now (a dynamic config change applies at once)."""
        return self.coordinator.manager.config

    def handle(self, message: Any, respond: Callable[[Any], object]) -> None:
        if isinstance(message, ShareGroupHeartbeatRequest):
            respond(self.heartbeat(message))
        elif isinstance(message, ShareGroupDescribeRequest):
            respond(self.describe(message))
        else:
            self.offsets_admin(message, respond)

    # ---- ShareGroupHeartbeat -------------------------------------------------------------------------------
    def heartbeat(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
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
                self._remove(group, request.member_id, "leave")
            return ShareGroupHeartbeatResponse(Errors.NONE, request.member_id, LEAVE_EPOCH)
        if epoch == JOIN_EPOCH:
            member_id = request.member_id or f"{request.group_id}-share-{next(self._ids)}"
            member = group.members.get(member_id)
            if member is None:
                if not request.subscribed_topics:
                    return ShareGroupHeartbeatResponse(Errors.INVALID_REQUEST)
                member = ShareGroupMember(
                    member_id, 0, request.client_id, request.client_host, request.rack_id
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
        if (
            request.subscribed_topics is not None
            and tuple(request.subscribed_topics) != member.subscribed_topics
        ):
            member.subscribed_topics = tuple(request.subscribed_topics)
            group.topics.update(member.subscribed_topics)
            changed = True
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        self._maybe_reassign(group, changed)
        if member.member_epoch != group.assignment_epoch:
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
        self.timer.schedule(
            session_key(group.group_id, member_id),
            self.config.group_share_session_timeout_ms,
            lambda: self._session_expired(group.group_id, member_id),
        )
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

        if not calls:
            finish()
        for tp, call in calls.items():
            call(lambda offset, tp=tp: answered(tp, offset))

    def _partitions(self, topics: list[str]) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in topics for p in range(self.partitions_of(t))]

    # ---- membership ----------------------------------------------------------------------------------------
    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        """Drop the groups of a ``__consumer_offsets`` partition this broker no longer leads."""
        if leader or tp.topic != OFFSETS_TOPIC:
            return
        for group_id in list(self.groups):
            if self.coordinator.context.partition_of(group_id) == tp.partition:
                for member_id in self.groups.pop(group_id).members:
                    self.timer.cancel(session_key(group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove(group, member_id, "session")

    def _remove(self, group: ShareGroup, member_id: str, cause: str) -> None:
        del group.members[member_id]
        self.timer.cancel(session_key(group.group_id, member_id))
        self._emit("share.group.leave", group=group.group_id, member=member_id, cause=cause)
        self._maybe_reassign(group, True)

    def _maybe_reassign(self, group: ShareGroup, changed: bool) -> None:
        """Run the assignor; a new target assignment at a new group epoch when membership, subscriptions
        or the result changed (each member takes its part at its next heartbeat)."""
        subscriptions = {m.member_id: m.subscribed_topics for m in group.members.values()}
        target = simple_assignor.assign(subscriptions, self.partitions_of)
        if not changed and target == group.target:
            return
        group.group_epoch += 1
        group.assignment_epoch = group.group_epoch
        group.target = target

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)


def _order(item: tuple[TopicPartition, ShareGroupOffset]) -> tuple[str, int]:
    return item[0].topic, item[0].partition
