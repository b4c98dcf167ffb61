"""The consumer group protocol of KIP-848: Kafka's ``GroupMetadataManager`` consumer-group paths.

ConsumerGroupHeartbeat (API 68) is the only request a member sends to be in the
group; the coordinator assigns partitions itself (the ``uniform`` and ``range``
server-side assignors) and hands them over incrementally. One heartbeat, rule for
rule as Kafka 4.x's ``consumerGroupHeartbeat``:

1. validation: an empty group id or member id (v1), a first heartbeat (epoch 0)
   without rebalance timeout or subscription, or with owned partitions, an epoch
   below -2, an instance id given empty: INVALID_REQUEST; an assignor not in
   ``group.consumer.assignors``: UNSUPPORTED_ASSIGNOR; a regex that does not
   compile: INVALID_REGULAR_EXPRESSION;
2. epoch -1 leaves (the member is fenced: removed, the group epoch bumped); -2
   is a static member's temporary leave (it keeps its partitions, at epoch -2,
   until its session times out or its instance id joins again);
3. the group: created by an epoch-0 heartbeat, as is an empty classic group converted
   (the classic group's tombstone is written; its offsets stay) and a classic group with
   members upgraded online (``consumer_group_migration``); an unknown group, or a classic
   one the migration policy keeps classic: GROUP_ID_NOT_FOUND; a member that would exceed
   ``group.consumer.max.size``: GROUP_MAX_SIZE_REACHED;
4. the member: a new dynamic member joins at epoch 0; a known one must send its
   epoch (or its previous epoch with owned partitions within its assignment, a lost
   response), else FENCED_MEMBER_EPOCH; an unknown id: UNKNOWN_MEMBER_ID; a static
   member's instance id taken by a member that has not left with -2:
   UNRELEASED_INSTANCE_ID, else the new member id takes over its epoch and
   partitions; an instance id that is not the member's: FENCED_INSTANCE_ID;
5. a new member, a changed subscription (topic names or regex) or a change in the
   subscribed topics' partition counts bumps the group epoch; when the group epoch is
   ahead of the assignment epoch the target assignment is computed for every member
   (``target_assignment_builder``) and the assignment epoch catches up;
6. the member reconciles towards its target (``current_assignment_builder``):
   partitions are revoked before they are given to another member;
7. its ``session-timeout-<group>-<member>`` task is re-armed for
   ``group.consumer.session.timeout.ms``; while the member is UNREVOKED_PARTITIONS
   ``rebalance-timeout-<group>-<member>`` runs its rebalance timeout (armed when it
   enters that state or its epoch changes, cancelled when it leaves it); either
   expiring fences the member;
8. the records the heartbeat produced (the member, the group's epochs) are written
   with acks=-1; the answer (member id, epoch, ``group.consumer.heartbeat.interval.ms``
   and, for a full request or a changed assignment, the assignment) is sent once
   they are replicated (a failed write answers its mapped error). A batch the log refuses
   is undone: the group goes back to its records in the log (``revert``), as Kafka's
   ``CoordinatorRuntime`` reverts its state machine to the last written offset; a timeout
   whose fencing is refused runs again after ``TIMER_RETRY_BACKOFF_MS``.

OffsetCommit from a consumer group's member is checked against its member epoch
(STALE_MEMBER_EPOCH; UNSUPPORTED_VERSION below v9), OffsetFetch v9 likewise; an
admin commit (epoch -1, no member) is accepted only while the group is empty.
A classic JoinGroup to an empty consumer group converts it back to a classic group;
to one with members it joins as a classic member of the consumer group, and groups with
members move between the protocols as ``group.consumer.migration.policy`` allows
(``consumer_group_migration``).

Deviations: the records are one per member (subscription, epochs, current and target
assignment together) and one per group (epochs, subscribed topics' partition counts,
assignor) instead of Kafka's six record types; the regex is Python's ``re``
(Kafka uses RE2/J) and is resolved against the topics at every heartbeat.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import attrs

from minibroker.common.errors import Errors
from minibroker.coordinator.group import consumer_protocol, records
from minibroker.coordinator.group import target_assignment_builder as targets
from minibroker.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroupMember,
    partitions_of,
    sorted_assignment,
)
from minibroker.coordinator.group.consumer_group_migration import (
    ConsumerGroupMigration,
    MigrationRefused,
    member_join_key,
    member_sync_key,
)
from minibroker.coordinator.group.coordinator_context import CoordinatorContext, write_error
from minibroker.coordinator.group.current_assignment_builder import reconcile
from minibroker.coordinator.group.messages import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedGroup,
    DescribedMember,
    ListedGroup,
    partition_names,
)
from minibroker.coordinator.group.views import ConsumerGroupView, ConsumerMemberView

Answer = Callable[[Any], None]

#: ConsumerGroupHeartbeat v0 is the version whose member ids the coordinator makes
MEMBER_ID_BY_CLIENT_VERSION = 1

#: a timeout whose write was refused runs again after this long (the retry backoff of Kafka's
#: ``CoordinatorRuntime`` timer)
TIMER_RETRY_BACKOFF_MS = 500


def session_timeout_key(group_id: str, member_id: str) -> str:
    return f"session-timeout-{group_id}-{member_id}"


def rebalance_timeout_key(group_id: str, member_id: str) -> str:
    return f"rebalance-timeout-{group_id}-{member_id}"


class HeartbeatError(Exception):
    """A heartbeat refused with ``error`` (and a message, as Kafka's response carries)."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


class ConsumerGroupManager:
    """The consumer groups of one broker's loaded ``__consumer_offsets`` partitions, by group id.

    ``classic`` is the ``GroupMetadataManager`` of the classic groups: a group id names one group
    of either type, and the conversions between them go through both managers.
    """

    def __init__(self, context: CoordinatorContext, classic: Any) -> None:
        self.context = context
        self.timer = context.timer
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}
        #: each group's state as last traced (``group.consumer.state`` is emitted when it changes)
        self.traced_states: dict[str, str] = {}
        self.migration = ConsumerGroupMigration(self)

    # ==========================================================================================
    # ConsumerGroupHeartbeat
    # ==========================================================================================
    def heartbeat(self, request: ConsumerGroupHeartbeatRequest, answer: Answer) -> None:
        """Answer one heartbeat, once its records are replicated; one without records once the
        group's writes sent before it are (with the first failed one's error)."""
        writes: list[bytes] = []
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave(request, writes)
            else:
                response = self._heartbeat(request, writes)
        except HeartbeatError as refused:
            response = ConsumerGroupHeartbeatResponse(refused.error, refused.message)
        self._trace_state(request.group_id)
        self.context.emit(
            "group.consumer.heartbeat",
            group=request.group_id,
            member=response.member_id or request.member_id,
            epoch=request.member_epoch,
            error=response.error.name,
            member_epoch=response.member_epoch,
            assignment=None if response.assignment is None else partition_names(response.assignment),
        )
        if not writes and response.error is not Errors.NONE:
            return answer(response)  # a refusal is answered at once, as Kafka's runtime does

        def done(error: Errors) -> None:
            if error is Errors.NONE:
                answer(response)
            else:
                answer(ConsumerGroupHeartbeatResponse(write_error(error)))

        if writes:
            self._write(request.group_id, writes, done)
        else:  # read from state the group's pending writes changed: held until they are answered
            self.context.answer_when_written(
                request.group_id, answer, response, ConsumerGroupHeartbeatResponse
            )

    def _write(self, group_id: str, writes: list[bytes], on_done: Callable[[Errors], Any]) -> bool:
        """Write the records one operation produced as one batch; if the log refuses it, revert the
        group to its records in the log and return False."""
        if self.context.write(group_id, writes, on_done):
            return True
        self.revert(group_id)
        return False

    def revert(self, group_id: str) -> None:
        """Bring ``group_id`` back to what its records in the log say, after a batch of its records was
        refused (Kafka's ``CoordinatorRuntime`` reverts its state machine to the last written offset).

        Every earlier batch reached the log when it was written (a refusal is immediate), so the log is
        the state before the refused operation. The keyed tasks follow: a member that is gone loses its
        tasks, a member restored without its session timeout gets it in full, and the rebalance timeout
        runs exactly for the members UNREVOKED_PARTITIONS (armed in full when it is not running)."""
        before = self.groups.pop(group_id, None)
        had_classic = group_id in self.classic.groups
        for record in self.context.group_records(group_id):
            if record["type"] in ("consumer_group", "consumer_member"):
                self.replay(record)
            elif record["type"] == "group" and not had_classic:  # a conversion from classic undone
                self.classic.replay(record)
        group = self.groups.get(group_id)
        members = group.members if group is not None else {}
        for member_id in before.members if before is not None else ():
            if member_id not in members:
                self.timer.cancel(session_timeout_key(group_id, member_id))
                self.timer.cancel(rebalance_timeout_key(group_id, member_id))
        for member in members.values():
            mid = member.member_id
            if self.timer.deadline(session_timeout_key(group_id, mid)) is None:
                self._schedule_session_timeout(group_id, mid)
            if member.state != UNREVOKED_PARTITIONS:
                self.timer.cancel(rebalance_timeout_key(group_id, mid))
            elif self.timer.deadline(rebalance_timeout_key(group_id, mid)) is None:
                self._schedule_rebalance_timeout(group_id, member)
        self.context.emit(
            "group.consumer.revert",
            group=group_id,
            group_epoch=group.group_epoch if group is not None else -1,
            owned={mid: sorted(f"{t}-{p}" for t, p in m.owned()) for mid, m in sorted(members.items())},
        )

    def _validate(self, request: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        epoch = request.member_epoch
        by_client = request.api_version >= MEMBER_ID_BY_CLIENT_VERSION
        if (by_client or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(request.member_id):
            raise HeartbeatError(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        for value, name in ((request.group_id, "GroupId"), (request.instance_id, "InstanceId")):
            if _blank(value):
                raise HeartbeatError(Errors.INVALID_REQUEST, f"{name} can't be empty.")
        if _blank(request.rack_id):
            raise HeartbeatError(Errors.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise HeartbeatError(
                    Errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
                )
            if request.owned_partitions is None or request.owned_partitions:
                raise HeartbeatError(
                    Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
                )
            if not request.subscribed_topic_names and not request.subscribed_topic_regex:
                raise HeartbeatError(
                    Errors.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise HeartbeatError(Errors.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        assignors = self.assignors()
        if request.server_assignor is not None and request.server_assignor not in assignors:
            raise HeartbeatError(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.",
            )
        if request.subscribed_topic_regex:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as error:
                raise HeartbeatError(
                    Errors.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex {request.subscribed_topic_regex} is not a valid regex: {error}",
                ) from None

    def assignors(self) -> list[str]:
        """The server-side assignors this broker offers (``group.consumer.assignors``), default first."""
        return [
            name.strip() for name in self.context.config.group_consumer_assignors.split(",") if name.strip()
        ]

    def _heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, writes: list[bytes]
    ) -> ConsumerGroupHeartbeatResponse:
        gid, epoch = request.group_id, request.member_epoch
        group = self._group_for(request, writes)
        member_id = request.member_id or self.context.new_member_id(request.client_id or "consumer")
        known = group.members.get(member_id)
        if known is None and request.instance_id is not None:
            known = group.static_member(request.instance_id)
        if known is None and len(group.members) >= self.context.config.group_consumer_max_size:
            raise HeartbeatError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.context.config.group_consumer_max_size} members.",
            )
        member, how = self._member(group, member_id, request, writes)
        joined = how == "joined"
        before = member
        member = attrs.evolve(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=(
                tuple(sorted(set(request.subscribed_topic_names)))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            server_assignor=(
                request.server_assignor if request.server_assignor is not None else member.server_assignor
            ),
        )
        reasons = []
        if joined:
            reasons.append(f"member {member_id} joined")
        elif (
            member.subscribed_topic_names != before.subscribed_topic_names
            or member.subscribed_topic_regex != before.subscribed_topic_regex
        ):
            reasons.append(f"member {member_id} updated its subscription")
        group.put(member)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            if not reasons:
                reasons.append("subscribed topics' partitions changed")
        if reasons:
            self._bump_group_epoch(group, "; ".join(reasons), writes)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, writes)
        member = group.members[member_id]
        owned = (
            None
            if request.owned_partitions is None
            else {t: frozenset(ps) for t, ps in request.owned_partitions}
        )
        reconciled = reconcile(
            member, group.assignment_epoch, member.target, group.current_partition_epoch, owned
        )
        if reconciled is not member:
            group.put(reconciled)
            self._member_changed(group, member, reconciled)
        if how != "known" or reconciled.to_record() != before.to_record():
            writes.append(self._member_record(gid, reconciled))
        self._schedule_session_timeout(gid, member_id)
        full = epoch == 0 or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned_partitions is not None
        )
        changed = reconciled.assigned != before.assigned or joined
        return ConsumerGroupHeartbeatResponse(
            Errors.NONE,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.context.config.group_consumer_heartbeat_interval_ms,
            assignment=sorted_assignment(reconciled.assigned) if full or changed else None,
        )

    def _group_for(self, request: ConsumerGroupHeartbeatRequest, writes: list[bytes]) -> ConsumerGroup:
        """The request's group: created by a joining member, converted from an empty classic group."""
        gid = request.group_id
        group = self.groups.get(gid)
        if group is not None:
            return group
        classic = self.classic.groups.get(gid)
        if classic is None and request.member_epoch != 0:
            raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        if classic is not None:
            if request.member_epoch != 0:
                raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            if classic.state != "Empty":  # the online upgrade, as group.consumer.migration.policy allows
                try:
                    return self.migration.upgrade(classic, writes)
                except MigrationRefused as refused:
                    raise HeartbeatError(refused.error, str(refused)) from None
            del self.classic.groups[gid]
            writes.append(records.group_record(gid, None))
            self.context.emit("group.consumer.convert", group=gid, to="consumer")
        group = ConsumerGroup(gid, state_timestamp_ms=self.context.now())
        self.groups[gid] = group
        return group

    def _member(
        self,
        group: ConsumerGroup,
        member_id: str,
        request: ConsumerGroupHeartbeatRequest,
        writes: list[bytes],
    ) -> tuple[ConsumerGroupMember, str]:
        """The heartbeating member and how it came: "joined", "replaced" (a static member's new id) or
        "known" (Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember)."""
        epoch, iid = request.member_epoch, request.instance_id
        member = group.members.get(member_id)
        if iid is None:
            if member is None:
                if epoch != 0:
                    raise HeartbeatError(
                        Errors.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id), "joined"
            if epoch != 0:
                self._check_epoch(member, epoch, request)
            return member, "known"
        if epoch == 0:
            existing = group.static_member(iid)
            if existing is None:
                if member is None:
                    return ConsumerGroupMember(member_id, instance_id=iid), "joined"
                return member, "known"
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(
                    Errors.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing.member_id} with instance id {iid} is not released yet.",
                )
            # the new member id takes the static member's place, its epoch and its partitions
            group.remove(existing.member_id)
            self.timer.cancel(session_timeout_key(group.group_id, existing.member_id))
            self.timer.cancel(rebalance_timeout_key(group.group_id, existing.member_id))
            writes.append(records.consumer_member_record(group.group_id, existing.member_id, None))
            replaced = attrs.evolve(
                existing, member_id=member_id, member_epoch=existing.previous_member_epoch
            )
            self.context.emit(
                "group.consumer.replace",
                group=group.group_id,
                member=member_id,
                previous=existing.member_id,
                instance=iid,
                member_epoch=replaced.member_epoch,
            )
            return replaced, "replaced"
        member = _static_member(group, iid, member_id)
        self._check_epoch(member, epoch, request)
        return member, "known"

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, request: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: the member's epoch, or its previous one with owned
        partitions within its assignment (the answer to its last heartbeat was lost)."""
        if epoch > member.member_epoch:
            raise HeartbeatError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                f"the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            owned = request.owned_partitions
            within = owned is not None and all(
                set(parts) <= member.assigned.get(topic, frozenset()) for topic, parts in owned
            )
            if epoch != member.previous_member_epoch or not within:
                raise HeartbeatError(
                    Errors.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by "
                    f"the group coordinator ({member.member_epoch}). "
                    "The member must abandon all its partitions and rejoin.",
                )

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self.context.topic_partitions()
        return {t: topics[t] for t in sorted(group.subscribed_topics(list(topics)))}

    def _bump_group_epoch(self, group: ConsumerGroup, reason: str, writes: list[bytes]) -> None:
        group.group_epoch += 1
        self.context.emit(
            "group.consumer.epoch", group=group.group_id, group_epoch=group.group_epoch, reason=reason
        )
        writes.append(self._group_record(group))

    def _compute_target(self, group: ConsumerGroup, writes: list[bytes]) -> None:
        """The target assignment at the group epoch, for every member; the changed members' records."""
        name = targets.preferred_assignor(group, self.assignors()[0])
        changed = targets.build(group, name, self.context.topic_partitions())
        group.assignment_epoch = group.group_epoch
        group.assignor = name
        for member_id, target in changed.items():
            updated = attrs.evolve(group.members[member_id], target=target)
            group.put(updated)
            writes.append(self._member_record(group.group_id, updated))
        writes.append(self._group_record(group))
        if self.context.tracer.enabled:  # the targets of a large group are costly to spell out
            self.context.emit(
                "group.consumer.target",
                group=group.group_id,
                assignment_epoch=group.assignment_epoch,
                assignor=name,
                targets={
                    mid: partition_names(sorted_assignment(m.target))
                    for mid, m in sorted(group.members.items())
                },
            )

    def _member_changed(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember
    ) -> None:
        """Trace the member's new state; arm or cancel its rebalance timeout (Kafka's maybeReconcile)."""
        gid, mid = group.group_id, new.member_id
        self.context.emit(
            "group.consumer.member",
            group=gid,
            member=mid,
            member_epoch=new.member_epoch,
            previous_epoch=old.member_epoch,
            state=new.state,
            assigned=partition_names(sorted_assignment(new.assigned)),
            pending_revocation=partition_names(sorted_assignment(new.pending_revocation)),
        )
        self._trace_owners(gid, mid, old.owned(), new.owned())
        if new.state == UNREVOKED_PARTITIONS:
            self._schedule_rebalance_timeout(gid, new)
        else:
            self.timer.cancel(rebalance_timeout_key(gid, mid))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        mid, epoch = member.member_id, member.member_epoch
        self.timer.schedule(
            rebalance_timeout_key(group_id, mid),
            member.rebalance_timeout_ms,
            lambda: self._rebalance_timeout_due(group_id, mid, epoch),
        )

    # ==========================================================================================
    # Leaving, fencing, timeouts
    # ==========================================================================================
    def _leave(
        self, request: ConsumerGroupHeartbeatRequest, writes: list[bytes]
    ) -> ConsumerGroupHeartbeatResponse:
        gid, mid, iid = request.group_id, request.member_id, request.instance_id
        group = self.groups.get(gid)
        if group is None:
            raise HeartbeatError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        if iid is None:
            member = group.members.get(mid)
            if member is None:
                raise HeartbeatError(
                    Errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}."
                )
        else:
            member = _static_member(group, iid, mid)
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            left = attrs.evolve(
                member,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=member.member_epoch,
                pending_revocation={},
            )
            group.put(left)
            self._trace_owners(gid, mid, member.owned(), left.owned())
            self.timer.cancel(rebalance_timeout_key(gid, mid))
            writes.append(self._member_record(gid, left))
            self.context.emit("group.consumer.leave", group=gid, member=mid, instance=iid, static=True)
        else:
            self.context.emit("group.consumer.leave", group=gid, member=mid, instance=iid, static=False)
            self.fence_member(group, member, "left the group", writes)
        return ConsumerGroupHeartbeatResponse(Errors.NONE, member_id=mid, member_epoch=request.member_epoch)

    def fence_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str, writes: list[bytes]
    ) -> None:
        """Remove ``member`` (its partitions become free) and bump the group epoch (Kafka's
        consumerGroupFenceMember)."""
        gid, mid = group.group_id, member.member_id
        if self.migration.maybe_downgrade(group, member, writes):
            self.context.emit(
                "group.consumer.fence", group=gid, member=mid, member_epoch=member.member_epoch, reason=reason
            )
            return
        group.remove(mid)
        self._cancel_member_tasks(gid, mid)
        writes.append(records.consumer_member_record(gid, mid, None))
        group.subscription_metadata = self._subscription_metadata(group)
        self.context.emit(
            "group.consumer.fence", group=gid, member=mid, member_epoch=member.member_epoch, reason=reason
        )
        self._trace_owners(gid, mid, member.owned(), set())
        self._bump_group_epoch(group, f"member {mid} removed: {reason}", writes)

    def fence(self, group_id: str, member_id: str, reason: str = "fenced by an operator") -> bool:
        """Fence one member now (the control API's and tests' hook); False if there is no such member."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return False
        writes: list[bytes] = []
        self.fence_member(group, member, reason, writes)
        self._trace_state(group_id)
        self._write(group_id, writes, lambda error: None)
        return True

    def _trace_owners(
        self, group_id: str, member_id: str, before: set[tuple[str, int]], after: set[tuple[str, int]]
    ) -> None:
        """``group.consumer.release`` for each partition ``member_id`` no longer owns (revoked, or its
        owner gone), ``group.consumer.own`` for each it now owns: a partition is fetched by nobody
        from its release to its next ``own``."""
        for kind, partitions in (
            ("group.consumer.release", before - after),
            ("group.consumer.own", after - before),
        ):
            for topic, p in sorted(partitions):
                self.context.emit(kind, group=group_id, member=member_id, partition=f"{topic}-{p}")

    def _trace_state(self, group_id: str) -> None:
        """``group.consumer.state`` when the group's state is not the one last traced."""
        group = self.groups.get(group_id)
        if group is None:
            self.traced_states.pop(group_id, None)
            return
        if self.traced_states.get(group_id) != group.state:
            self.traced_states[group_id] = group.state
            self.context.emit(
                "group.consumer.state",
                group=group_id,
                state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
            )

    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """Re-arm the member's session task: ``group.consumer.session.timeout.ms``, or a classic
        member's own ``timeout_ms``."""
        self.timer.schedule(
            session_timeout_key(group_id, member_id),
            self.context.config.group_consumer_session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._session_timeout_due(group_id, member_id),
        )

    def _cancel_member_tasks(self, group_id: str, member_id: str) -> None:
        """Disarm every task of the member: session and rebalance timeouts, a classic member's
        join and sync timeouts."""
        for key in (
            session_timeout_key(group_id, member_id),
            rebalance_timeout_key(group_id, member_id),
            member_join_key(group_id, member_id),
            member_sync_key(group_id, member_id),
        ):
            self.timer.cancel(key)

    def _session_timeout_due(self, group_id: str, member_id: str) -> None:
        if self.fence(group_id, member_id, "session timeout") and self._member_of(group_id, member_id):
            # the fencing's write was refused: retried after the timer's backoff, as Kafka's is
            self.timer.schedule(
                session_timeout_key(group_id, member_id),
                TIMER_RETRY_BACKOFF_MS,
                lambda: self._session_timeout_due(group_id, member_id),
            )

    def _rebalance_timeout_due(self, group_id: str, member_id: str, epoch: int) -> None:
        member = self._member_of(group_id, member_id)
        if member is None or member.member_epoch != epoch:
            return
        self.fence(group_id, member_id, "rebalance timeout: partitions not revoked")
        if self._member_of(group_id, member_id) is not None:  # refused: retried after the backoff
            self.timer.schedule(
                rebalance_timeout_key(group_id, member_id),
                TIMER_RETRY_BACKOFF_MS,
                lambda: self._rebalance_timeout_due(group_id, member_id, epoch),
            )

    def _member_of(self, group_id: str, member_id: str) -> ConsumerGroupMember | None:
        group = self.groups.get(group_id)
        return group.members.get(member_id) if group is not None else None

    # ==========================================================================================
    # Offsets: the member-epoch checks
    # ==========================================================================================
    def validate_offset_commit(
        self, group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int, transactional: bool
    ) -> Errors | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: the error, or None when the commit may go on."""
        if member_epoch < 0 and not group.members and (transactional or not member_id):
            return None
        if transactional and member_epoch < 0 and not member_id:
            return None
        member = group.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol:  # its generation is its member epoch
            return None if member_epoch == member.member_epoch else Errors.ILLEGAL_GENERATION
        if not transactional and api_version < 9:
            return Errors.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return Errors.ILLEGAL_GENERATION if transactional else Errors.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(
        self, group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> Errors | None:
        """Kafka's ConsumerGroup.validateOffsetFetch: an admin fetch (no member, epoch -1) is accepted."""
        if member_id is None and member_epoch < 0:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return None

    # ==========================================================================================
    # Describing, listing, converting, deleting
    # ==========================================================================================
    def describe(
        self, group_ids: tuple[str, ...], refusal: Callable[[str], Errors | None]
    ) -> ConsumerGroupDescribeResponse:
        """ConsumerGroupDescribe: each group with its epochs, assignor and members' assignments."""
        described = []
        for gid in group_ids:
            refused = refusal(gid) if gid else Errors.INVALID_GROUP_ID
            group = self.groups.get(gid)
            if refused is not None:
                described.append(DescribedConsumerGroup(gid, refused))
            elif group is None:
                kind = "is not a consumer group" if gid in self.classic.groups else "not found"
                described.append(
                    DescribedConsumerGroup(gid, Errors.GROUP_ID_NOT_FOUND, f"Group {gid} {kind}.")
                )
            else:
                described.append(
                    DescribedConsumerGroup(
                        gid,
                        Errors.NONE,
                        None,
                        group.state,
                        group.group_epoch,
                        group.assignment_epoch,
                        group.assignor or targets.preferred_assignor(group, self.assignors()[0]),
                        tuple(
                            DescribedConsumerGroupMember(
                                m.member_id,
                                m.instance_id,
                                m.rack_id,
                                m.member_epoch,
                                m.client_id,
                                m.client_host,
                                m.subscribed_topic_names,
                                m.subscribed_topic_regex,
                                sorted_assignment(m.assigned),
                                sorted_assignment(m.target),
                            )
                            for m in group.members.values()
                        ),
                    )
                )
        return ConsumerGroupDescribeResponse(tuple(described))

    def described_group(self, group_id: str) -> DescribedGroup:
        """DescribeGroups (the classic API) on a consumer group: protocol type ``consumer``, the assignor
        as protocol, each member's subscription and current assignment in the consumer protocol's bytes
        (Kafka's ``ConsumerGroup.asDescribedGroup``)."""
        group = self.groups[group_id]
        assignor = group.assignor or targets.preferred_assignor(group, self.assignors()[0])
        members = tuple(
            DescribedMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                consumer_protocol.encode_subscription(list(m.subscribed_topic_names)),
                consumer_protocol.encode_assignment(sorted(partitions_of(m.assigned))),
            )
            for m in group.members.values()
        )
        return DescribedGroup(group_id, Errors.NONE, group.state, "consumer", assignor, members)

    def listed(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        """ListGroups' rows for the consumer groups (type ``consumer``, protocol type ``consumer``)."""
        if types and "consumer" not in types:
            return []
        return [
            ListedGroup(gid, "consumer", group.state, "consumer")
            for gid, group in sorted(self.groups.items())
            if not states or group.state.lower() in states
        ]

    def downgrade(self, group_id: str) -> None:
        """A classic JoinGroup for ``group_id`` with no consumer group member: an empty consumer group
        is converted to classic (the join then goes on as any classic join)."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return
        del self.groups[group_id]
        self.traced_states.pop(group_id, None)
        self.context.write(group_id, [records.consumer_group_record(group_id, None)], lambda error: None)
        self.context.emit("group.consumer.convert", group=group_id, to="classic")

    def delete(self, group_id: str) -> bytes:
        """Forget the empty ``group_id`` (DeleteGroups, expiry); return its tombstone."""
        self.groups.pop(group_id, None)
        self.traced_states.pop(group_id, None)
        return records.consumer_group_record(group_id, None)

    def snapshot(self) -> tuple[ConsumerGroupView, ...]:
        """Every consumer group, by id, with its epochs and each member's reconciliation and deadlines."""
        return tuple(
            ConsumerGroupView(
                gid,
                group.state,
                group.group_epoch,
                group.assignment_epoch,
                group.assignor,
                tuple(self._member_view(gid, m) for m in group.members.values()),
            )
            for gid, group in sorted(self.groups.items())
        )

    def _member_view(self, group_id: str, member: ConsumerGroupMember) -> ConsumerMemberView:
        deadline = self.timer.deadline
        return ConsumerMemberView(
            member.member_id,
            member.client_id,
            member.instance_id,
            member.member_epoch,
            member.state,
            sorted_assignment(member.assigned),
            sorted_assignment(member.pending_revocation),
            sorted_assignment(member.target),
            deadline(session_timeout_key(group_id, member.member_id)) or -1,
            deadline(rebalance_timeout_key(group_id, member.member_id)) or -1,
        )

    # ==========================================================================================
    # Records: write, replay, load, unload
    # ==========================================================================================
    def _member_record(self, group_id: str, member: ConsumerGroupMember) -> bytes:
        return records.consumer_member_record(group_id, member.member_id, member.to_record())

    @staticmethod
    def _group_record(group: ConsumerGroup) -> bytes:
        return records.consumer_group_record(
            group.group_id,
            {
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor": group.assignor,
                "subscription_metadata": group.subscription_metadata,
                "state_timestamp_ms": group.state_timestamp_ms,
            },
        )

    def replay(self, record: dict[str, Any]) -> None:
        """Apply one consumer group record read from the log (a tombstone removes the group or member)."""
        gid, value = record["group"], record["value"]
        if record["type"] == "consumer_group":
            if value is None:
                self.groups.pop(gid, None)
                return
            group = self.groups.setdefault(gid, ConsumerGroup(gid))
            group.group_epoch = value["group_epoch"]
            group.assignment_epoch = value["assignment_epoch"]
            group.assignor = value["assignor"]
            group.subscription_metadata = dict(value["subscription_metadata"])
            group.state_timestamp_ms = value["state_timestamp_ms"]
            self.classic.groups.pop(gid, None)
            return
        group = self.groups.setdefault(gid, ConsumerGroup(gid))
        if value is None:
            group.remove(record["member"])
        else:
            group.put(ConsumerGroupMember.from_record(value))

    def group_ids(self, partition: int) -> list[str]:
        return [gid for gid in self.groups if self.context.partition_of(gid) == partition]

    def on_loaded(self, partition: int) -> int:
        """Arm the session timeout of every member of ``partition``'s consumer groups (and the rebalance
        timeout of those revoking); return how many consumer groups the partition holds."""
        mine = self.group_ids(partition)
        for gid in mine:
            for member in self.groups[gid].members.values():
                classic = member.classic_session_timeout_ms if member.uses_classic_protocol else None
                self._schedule_session_timeout(gid, member.member_id, classic)
                if member.state == UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(gid, member)
        return len(mine)

    def unload(self, partition: int) -> list[str]:
        """Drop ``partition``'s consumer groups and disarm their members' tasks."""
        dropped = self.group_ids(partition)
        for gid in dropped:
            self.traced_states.pop(gid, None)
            for member_id in self.groups.pop(gid).members:
                self._cancel_member_tasks(gid, member_id)
        return dropped


def _static_member(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
    """The static member of ``instance_id``, which must be ``member_id`` (Kafka's
    throwIfStaticMemberIsUnknown, throwIfInstanceIdIsFenced)."""
    member = group.static_member(instance_id)
    if member is None:
        raise HeartbeatError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise HeartbeatError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{member.member_id}.",
        )
    return member


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: given, and empty or only whitespace."""
    return value is not None and not value.strip()
