"""Mixed groups: classic members inside a consumer group, and the online conversions (KIP-848).

Kafka 4's ``GroupMetadataManager`` lets a group move between the protocols while it
has members, as ``group.consumer.migration.policy`` allows (``bidirectional`` by
default, ``upgrade``, ``downgrade``, ``disabled``; Kafka's ``ConsumerGroupMigrationPolicy``):

- **Upgrade** (``convertToConsumerGroup``, ``ConsumerGroup.fromClassicGroup``): the
  first ConsumerGroupHeartbeat to a classic group with members converts it when the
  policy allows upgrades, its protocol type is ``consumer`` and it has no more members
  than ``group.consumer.max.size``; else GROUP_ID_NOT_FOUND ("Group g is not a consumer
  group."). Parked JoinGroup and SyncGroup answers get REBALANCE_IN_PROGRESS; each classic
  member becomes a member at the classic generation (group epoch = assignment epoch =
  member epochs = generation), STABLE, owning and targeted its last classic assignment,
  subscribed to its subscription's topics; its session timeout is its classic one. A
  subscription or assignment that does not decode leaves the group classic
  (GROUP_ID_NOT_FOUND).
- **Classic members in a consumer group** (``classicGroupJoinToConsumerGroup`` and its
  SyncGroup, Heartbeat and LeaveGroup siblings): JoinGroup to a consumer group with
  members adds or updates a member that keeps its JoinGroup protocols (protocol type
  ``consumer``, a protocol every classic member supports, else INCONSISTENT_GROUP_PROTOCOL;
  a dynamic member without an id first gets MEMBER_ID_REQUIRED). Its subscription goes
  through the same epochs, server-side assignor and reconciliation as a heartbeat (its
  owned partitions are the subscription's, none for a version 0 subscription), and the
  answer carries its member epoch as generation, its first protocol's name and no member
  list (it is not the leader). SyncGroup answers its current assignment (ILLEGAL_GENERATION
  unless the generation is its member epoch; REBALANCE_IN_PROGRESS when the group epoch is
  ahead and it is not revoking). Heartbeat answers REBALANCE_IN_PROGRESS while it must rejoin:
  its epoch is behind the group epoch, it has partitions to revoke, or the partitions it waits
  for are free. After a join ``sync-<group>-<member>`` runs the rebalance timeout until its
  SyncGroup; a heartbeat asking it to rejoin arms ``join-<group>-<member>`` (if not armed) until
  its JoinGroup; either expiring fences it. LeaveGroup removes it and bumps the group epoch.
- **Downgrade** (``convertToClassicGroup``, ``ClassicGroup.fromConsumerGroup``): when a member
  leaves with ConsumerGroupHeartbeat or is fenced (session, rebalance, join or sync timeout) and
  every other member is classic (at least one), the
  policy allows downgrades and they fit in ``group.max.size``, the group becomes a classic group
  at generation = group epoch, Stable, each member's assignment its target, then
  PreparingRebalance at once: the members' heartbeats answer REBALANCE_IN_PROGRESS and they
  rejoin as in any classic rebalance.

Deviations: a static classic member joining with a new member id takes the old id's place
without the downgrade check of a replaced static member; the conversions' records are the
usual per-group and per-member records of each protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from minibroker.common.errors import Errors
from minibroker.coordinator.group import consumer_protocol, records
from minibroker.coordinator.group import group as classic_states
from minibroker.coordinator.group.consumer_group import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroupMember,
    as_assignment,
    partitions_of,
)
from minibroker.coordinator.group.coordinator_context import write_error
from minibroker.coordinator.group.current_assignment_builder import reconcile
from minibroker.coordinator.group.group import ClassicGroup, Member
from minibroker.coordinator.group.group_metadata_manager import heartbeat_key, join_key, sync_key
from minibroker.coordinator.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

Answer = Callable[[Any], None]
PROTOCOL_TYPE = "consumer"


def member_join_key(group_id: str, member_id: str) -> str:
    return f"join-{group_id}-{member_id}"


def member_sync_key(group_id: str, member_id: str) -> str:
    return f"sync-{group_id}-{member_id}"


class MigrationRefused(Exception):
    """A classic request to a consumer group refused with ``error``."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


class ConsumerGroupMigration:
    """The mixed-group paths of one broker's ``ConsumerGroupManager`` (``manager``)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.context = manager.context
        self.timer = manager.timer

    # --- the policy ---------------------------------------------------------------------------
    @property
    def policy(self) -> str:
        return self.context.config.group_consumer_migration_policy

    def upgrade_enabled(self) -> bool:
        return self.policy in ("upgrade", "bidirectional")

    def downgrade_enabled(self) -> bool:
        return self.policy in ("downgrade", "bidirectional")

    # --- upgrade ------------------------------------------------------------------------------
    def upgrade(self, classic: ClassicGroup, writes: list[bytes]) -> ConsumerGroup:
        """The consumer group ``classic`` becomes (its records in ``writes``), or MigrationRefused."""
        gid = classic.group_id
        if (
            not self.upgrade_enabled()
            or classic.protocol_type != PROTOCOL_TYPE
            or len(classic.members) > self.context.config.group_consumer_max_size
        ):
            raise MigrationRefused(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        gen = classic.generation_id
        try:
            converted = [self._from_classic(m, classic.protocol_name, gen) for m in classic.members.values()]
        except (KeyError, ValueError):
            raise MigrationRefused(
                Errors.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                "consumer protocol is malformed.",
            ) from None
        for member in list(classic.members.values()):
            classic.complete_join(member, JoinGroupResponse(Errors.REBALANCE_IN_PROGRESS, member.member_id))
            classic.complete_sync(member, SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS))
        self._drop_classic(classic)
        writes.append(records.group_record(gid, None))
        group = ConsumerGroup(
            gid, group_epoch=gen, assignment_epoch=gen, state_timestamp_ms=self.context.now()
        )
        for member in converted:
            group.put(member)
            writes.append(self.manager._member_record(gid, member))
            self.manager._trace_owners(gid, member.member_id, set(), member.owned())
        group.subscription_metadata = self.manager._subscription_metadata(group)
        writes.append(self.manager._group_record(group))
        self.manager.groups[gid] = group
        for member in converted:
            self.manager._schedule_session_timeout(gid, member.member_id, member.classic_session_timeout_ms)
        self.context.emit("group.consumer.convert", group=gid, to="consumer", members=len(converted))
        return group

    @staticmethod
    def _from_classic(member: Member, protocol: str | None, generation: int) -> ConsumerGroupMember:
        if protocol is None:
            raise ValueError("the classic group has no protocol yet")
        topics = consumer_protocol.decode_subscription(member.metadata(protocol))
        assigned = as_assignment(consumer_protocol.decode_assignment(member.assignment))
        return ConsumerGroupMember(
            member.member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            assigned=assigned,
            target=dict(assigned),
            **_classic_fields(member, topics),
        )

    def _drop_classic(self, classic: ClassicGroup) -> None:
        gid = classic.group_id
        del self.manager.classic.groups[gid]
        self.timer.cancel(join_key(gid))
        self.timer.cancel(sync_key(gid))
        for member_id in list(classic.members) + list(classic.pending_members):
            self.timer.cancel(heartbeat_key(gid, member_id))

    # --- downgrade ----------------------------------------------------------------------------
    def maybe_downgrade(
        self, group: ConsumerGroup, leaving: ConsumerGroupMember, writes: list[bytes]
    ) -> bool:
        """Convert ``group`` to a classic group without ``leaving`` if Kafka would (Kafka's
        validateOnlineDowngradeWithFencedMember); True when it did."""
        gid = group.group_id
        others = [m for mid, m in group.members.items() if mid != leaving.member_id]
        if (
            not others
            or not group.all_classic_except(leaving.member_id)
            or not self.downgrade_enabled()
            or len(others) > self.context.config.group_max_size
        ):
            return False
        for member in group.members.values():
            self.manager._cancel_member_tasks(gid, member.member_id)
            writes.append(records.consumer_member_record(gid, member.member_id, None))
            self.manager._trace_owners(gid, member.member_id, member.owned(), set())
        writes.append(records.consumer_group_record(gid, None))
        del self.manager.groups[gid]
        self.manager.traced_states.pop(gid, None)
        classic = ClassicGroup(
            gid,
            state=classic_states.STABLE,
            state_timestamp_ms=self.context.now(),
            generation_id=group.group_epoch,
            protocol_type=PROTOCOL_TYPE,
        )
        for member in others:
            classic.add(
                Member(
                    member.member_id,
                    member.instance_id,
                    member.client_id,
                    member.client_host,
                    member.rebalance_timeout_ms,
                    member.classic_session_timeout_ms,
                    PROTOCOL_TYPE,
                    list(member.classic_protocols),
                    consumer_protocol.encode_assignment(sorted(partitions_of(member.target))),
                ),
                None,
            )
        classic.protocol_name = classic.select_protocol()
        manager = self.manager.classic
        manager.groups[gid] = classic
        assignment = {mid: member.assignment for mid, member in classic.members.items()}
        writes.append(manager.group_metadata_record(classic, assignment))
        for member in others:
            manager.schedule_heartbeat(gid, member.member_id, member.classic_session_timeout_ms)
        self.context.emit(
            "group.consumer.convert", group=gid, to="classic", members=len(others), left=leaving.member_id
        )
        manager.prepare_rebalance(classic, f"Downgrade group {gid} from consumer to classic.")
        return True

    # --- JoinGroup ----------------------------------------------------------------------------
    def join(self, group: ConsumerGroup, request: JoinGroupRequest, answer: Answer) -> None:
        """A classic JoinGroup to ``group`` (which has members): answered once its records are written."""
        gid = group.group_id
        unknown = not request.member_id
        mid = request.member_id or self.context.new_member_id(request.instance_id or request.client_id)
        names = [name for name, _ in request.protocols]
        known = group.members.get(mid)
        if known is None and request.instance_id is not None:
            known = group.static_member(request.instance_id)
        if known is None and len(group.members) >= self.context.config.group_consumer_max_size:
            return self._refuse_join(request, mid, Errors.GROUP_MAX_SIZE_REACHED, answer)
        shared = group.classic_protocol_names()
        if (
            request.protocol_type != PROTOCOL_TYPE
            or not names
            or (shared is not None and not shared & set(names))
        ):
            return self._refuse_join(request, mid, Errors.INCONSISTENT_GROUP_PROTOCOL, answer)
        if unknown and request.require_known_member_id and request.instance_id is None:
            return self._refuse_join(request, mid, Errors.MEMBER_ID_REQUIRED, answer)
        metadata = request.protocols[0][1]
        try:
            topics = consumer_protocol.decode_subscription(metadata)
            owned = as_assignment(consumer_protocol.decode_owned_partitions(metadata))
        except ValueError:
            return self._refuse_join(request, mid, Errors.UNKNOWN_SERVER_ERROR, answer)
        writes: list[bytes] = []
        if known is not None and known.member_id != mid:  # a static member's new id takes its place
            self.manager._cancel_member_tasks(gid, known.member_id)
            group.remove(known.member_id)
            writes.append(records.consumer_member_record(gid, known.member_id, None))
            known = attrs.evolve(known, member_id=mid)
        member = known if known is not None else ConsumerGroupMember(mid)
        updated = attrs.evolve(
            member, subscribed_topic_regex=None, server_assignor=None, **_classic_fields(request, topics)
        )
        reasons = []
        if known is None:
            reasons.append(f"member {mid} joined")
        elif updated.subscribed_topic_names != member.subscribed_topic_names:
            reasons.append(f"member {mid} updated its subscription")
        group.put(updated)
        metadata_now = self.manager._subscription_metadata(group)
        if metadata_now != group.subscription_metadata:
            group.subscription_metadata = metadata_now
            reasons = reasons or ["subscribed topics' partitions changed"]
        if reasons:
            self.manager._bump_group_epoch(group, "; ".join(reasons), writes)
        if group.group_epoch > group.assignment_epoch:
            self.manager._compute_target(group, writes)
        updated = group.members[mid]
        reconciled = reconcile(
            updated, group.assignment_epoch, updated.target, group.current_partition_epoch, owned
        )
        if reconciled is not updated:
            group.put(reconciled)
            self.manager._member_changed(group, updated, reconciled)
        writes.append(self.manager._member_record(gid, reconciled))
        response = JoinGroupResponse(
            Errors.NONE,
            member_id=mid,
            generation_id=reconciled.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=request.protocols[0][0],
        )
        self._trace(request, "join", Errors.NONE, mid, reconciled.member_epoch)
        self.manager._trace_state(gid)

        def done(error: Errors) -> None:
            if error is not Errors.NONE:
                return answer(JoinGroupResponse(write_error(error), member_id=mid))
            self.timer.cancel(member_join_key(gid, mid))
            if gid in self.manager.groups and mid in self.manager.groups[gid].members:
                self.manager._schedule_session_timeout(gid, mid, request.session_timeout_ms)
                self.timer.schedule(
                    member_sync_key(gid, mid),
                    request.rebalance_timeout_ms,
                    lambda: self._fence_if_member(gid, mid, "the member failed to sync within timeout."),
                )
            answer(response)

        self.manager._write(gid, writes, done)

    def _refuse_join(self, request: JoinGroupRequest, member_id: str, error: Errors, answer: Answer) -> None:
        self._trace(request, "join", error, member_id, -1)
        answer(JoinGroupResponse(error, member_id=member_id))

    # --- SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------------
    def sync(self, group: ConsumerGroup, request: SyncGroupRequest, answer: Answer) -> None:
        try:
            member = self._classic_member(group, request.member_id, request.instance_id)
            self._check_generation(member, request.generation_id)
            protocol = member.classic_protocols[0][0]
            if request.protocol_type is not None and request.protocol_type != PROTOCOL_TYPE:
                raise MigrationRefused(Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol type")
            if request.protocol_name is not None and request.protocol_name != protocol:
                raise MigrationRefused(Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol name")
            if group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
                self._arm_join_timeout(group.group_id, member)
                raise MigrationRefused(Errors.REBALANCE_IN_PROGRESS, "rejoin")
        except MigrationRefused as refused:
            self._trace(request, "sync", refused.error, request.member_id, -1)
            return answer(SyncGroupResponse(refused.error))
        gid, mid = group.group_id, member.member_id
        self.timer.cancel(member_sync_key(gid, mid))
        self.manager._schedule_session_timeout(gid, mid, member.classic_session_timeout_ms)
        self._trace(request, "sync", Errors.NONE, mid, member.member_epoch)
        assignment = consumer_protocol.encode_assignment(sorted(partitions_of(member.assigned)))
        answer(SyncGroupResponse(Errors.NONE, assignment, PROTOCOL_TYPE, protocol))

    def heartbeat(self, group: ConsumerGroup, request: HeartbeatRequest, answer: Answer) -> None:
        try:
            member = self._classic_member(group, request.member_id, request.instance_id)
            self._check_generation(member, request.generation_id)
        except MigrationRefused as refused:
            self._trace(request, "heartbeat", refused.error, request.member_id, -1)
            return answer(HeartbeatResponse(refused.error))
        gid = group.group_id
        self.manager._schedule_session_timeout(gid, member.member_id, member.classic_session_timeout_ms)
        error = Errors.NONE
        if (
            member.member_epoch < group.group_epoch
            or member.state == UNREVOKED_PARTITIONS
            or (member.state == UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))
        ):
            error = Errors.REBALANCE_IN_PROGRESS
            self._arm_join_timeout(gid, member)
        self._trace(request, "heartbeat", error, member.member_id, member.member_epoch)
        self.manager.context.answer_when_written(gid, answer, HeartbeatResponse(error), HeartbeatResponse)

    def leave(self, group: ConsumerGroup, request: LeaveGroupRequest, answer: Answer) -> None:
        gid = group.group_id
        writes: list[bytes] = []
        answers = []
        for leaving in request.members:
            try:
                if leaving.instance_id is None:
                    member = self._classic_member(group, leaving.member_id, None)
                else:
                    member = group.static_member(leaving.instance_id)
                    if member is None:
                        raise MigrationRefused(Errors.UNKNOWN_MEMBER_ID, "unknown instance")
                    if leaving.member_id and member.member_id != leaving.member_id:
                        raise MigrationRefused(Errors.FENCED_INSTANCE_ID, "fenced instance")
                    if not member.uses_classic_protocol:
                        raise MigrationRefused(Errors.UNKNOWN_MEMBER_ID, "not classic")
            except MigrationRefused as refused:
                answers.append((leaving.member_id, leaving.instance_id, refused.error))
                continue
            mid = member.member_id
            self.manager._cancel_member_tasks(gid, mid)
            group.remove(mid)
            writes.append(records.consumer_member_record(gid, mid, None))
            self.manager._trace_owners(gid, mid, member.owned(), set())
            self.context.emit(
                "group.consumer.leave", group=gid, member=mid, instance=member.instance_id, static=False
            )
            answers.append((mid, leaving.instance_id, Errors.NONE))
        if writes:
            group.subscription_metadata = self.manager._subscription_metadata(group)
            left = ", ".join(mid for mid, _, error in answers if error is Errors.NONE)
            self.manager._bump_group_epoch(group, f"classic member(s) {left} left the group", writes)
            self.manager._trace_state(gid)
        response = LeaveGroupResponse(Errors.NONE, tuple(answers))
        if not writes:
            return answer(response)
        self.manager._write(
            gid,
            writes,
            lambda error: answer(
                response if error is Errors.NONE else LeaveGroupResponse(write_error(error))
            ),
        )

    # --- helpers ------------------------------------------------------------------------------
    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                raise MigrationRefused(Errors.UNKNOWN_MEMBER_ID, "unknown instance")
            if member.member_id != member_id:
                raise MigrationRefused(Errors.FENCED_INSTANCE_ID, "fenced instance")
        else:
            member = group.members.get(member_id)
            if member is None:
                raise MigrationRefused(Errors.UNKNOWN_MEMBER_ID, "unknown member")
        if not member.uses_classic_protocol:
            raise MigrationRefused(
                Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol."
            )
        return member

    @staticmethod
    def _check_generation(member: ConsumerGroupMember, generation: int) -> None:
        if generation != member.member_epoch:
            raise MigrationRefused(Errors.ILLEGAL_GENERATION, "generation")

    def _arm_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = member_join_key(group_id, member.member_id)
        if self.timer.deadline(key) is None:
            mid = member.member_id
            self.timer.schedule(
                key,
                member.rebalance_timeout_ms,
                lambda: self._fence_if_member(
                    group_id, mid, "the classic member failed to join within the rebalance timeout."
                ),
            )

    def _fence_if_member(self, group_id: str, member_id: str, reason: str) -> None:
        self.manager.fence(group_id, member_id, reason)

    def _trace(self, request: Any, api: str, error: Errors, member_id: str, member_epoch: int) -> None:
        self.context.emit(
            "group.consumer.classic",
            group=request.group_id,
            member=member_id,
            api=api,
            error=error.name,
            member_epoch=member_epoch,
        )


def _classic_fields(source: JoinGroupRequest | Member, topics: list[str]) -> dict[str, Any]:
    """What a classic member's JoinGroup (the request, or a classic group's ``Member``) sets on its
    consumer group member (Kafka's ``ClassicMemberMetadata`` and the subscription)."""
    return {
        "instance_id": source.instance_id,
        "client_id": source.client_id,
        "client_host": source.client_host,
        "rebalance_timeout_ms": source.rebalance_timeout_ms,
        "subscribed_topic_names": tuple(sorted(set(topics))),
        "classic_protocols": tuple(source.protocols),
        "classic_session_timeout_ms": source.session_timeout_ms,
    }


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of ``member``'s target it does not have yet is still owned by another
    member (Kafka's ``ConsumerGroup.waitingOnUnreleasedPartition``)."""
    for topic, partition in partitions_of(member.target) - partitions_of(member.assigned):
        if group.current_partition_epoch(topic, partition) != -1:
            return True
    return False
