"""Kafka's ``GroupMetadataManager`` for classic groups: membership, rebalances, and the group records.

The classic protocol's JoinGroup, SyncGroup, Heartbeat and LeaveGroup, rule for rule
as Kafka 4.x's ``GroupMetadataManager``:

- a new dynamic member's first JoinGroup (v4+) answers MEMBER_ID_REQUIRED with its
  new id, which is *pending* until it joins again (its session timeout runs meanwhile);
- a member joining an Empty group starts the initial rebalance: the ``join-<group>``
  task fires after ``group.initial.rebalance.delay.ms`` and is re-armed (for
  min(delay, remaining)) while new members keep arriving, up to the rebalance timeout;
- any other rebalance completes as soon as every member has rejoined, else when
  ``join-<group>`` fires after the rebalance timeout (max of the members'): members
  that did not rejoin are removed;
- completing the join bumps the generation, picks the protocol, answers every
  parked JoinGroup (the leader gets the members' metadata) and arms ``sync-<group>``
  (rebalance timeout): members that have not sent SyncGroup by then are removed;
- the leader's SyncGroup writes the group's metadata record; when it is replicated
  every parked SyncGroup gets its assignment and the group is Stable;
- ``heartbeat-<group>-<member>`` runs each member's session timeout; a heartbeat,
  a commit or a completed join re-arms it. A member in the middle of a rebalance
  is not expired unless it is new (it then has 5 minutes to complete its join).

It also answers DescribeGroups and ListGroups from its groups, writes and replays the
groups' metadata records, removes deleted groups, and on a partition's unload answers
its groups' parked requests NOT_COORDINATOR and disarms their tasks.

One manager per broker holds the groups of every ``__consumer_offsets`` partition the
broker has loaded (``GroupCoordinator`` decides which requests reach it). It reaches
the broker only through its ``CoordinatorContext``: clock, keyed timer, config, trace,
member ids and writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.common.errors import Errors
from minibroker.coordinator.group import group as states
from minibroker.coordinator.group import records
from minibroker.coordinator.group.coordinator_context import CoordinatorContext, write_error
from minibroker.coordinator.group.group import Answer, ClassicGroup, Member
from minibroker.coordinator.group.messages import (
    DescribedGroup,
    DescribedMember,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsResponse,
    SyncGroupResponse,
)
from minibroker.coordinator.group.views import GroupView, MemberView

if TYPE_CHECKING:
    from minibroker.coordinator.group.messages import (
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        SyncGroupRequest,
    )

#: Kafka's classicGroupNewMemberJoinTimeoutMs
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


class GroupMetadataManager:
    """The classic groups of one broker's loaded ``__consumer_offsets`` partitions, by group id."""

    def __init__(self, context: CoordinatorContext) -> None:
        self.context = context
        self.timer = context.timer
        self.groups: dict[str, ClassicGroup] = {}

    # ==========================================================================================
    # Groups
    # ==========================================================================================
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, state_timestamp_ms=self.context.now())
        self.groups[group_id] = group
        return group

    def group_ids(self, partition: int) -> list[str]:
        """The groups of ``__consumer_offsets`` partition ``partition``, in creation order."""
        return [gid for gid in self.groups if self.context.partition_of(gid) == partition]

    def generation_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> Errors | None:
        """Why a member's request for ``generation_id`` is refused (Heartbeat, SyncGroup), or None."""
        if group.state == states.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        return Errors.ILLEGAL_GENERATION if generation_id != group.generation_id else None

    def trace_request(self, kind: str, request: Any, **fields: Any) -> None:
        """Trace a JoinGroup or SyncGroup as it arrives: its group, its member and ``fields``."""
        self.context.emit(kind, group=request.group_id, member=request.member_id, **fields)

    def set_state(self, group: ClassicGroup, state: str, reason: str | None = None) -> None:
        group.transition(state, self.context.now())
        self.context.emit(
            "group.state", group=group.group_id, state=state, generation=group.generation_id, reason=reason
        )

    # ==========================================================================================
    # JoinGroup
    # ==========================================================================================
    def join_group(self, request: JoinGroupRequest, answer: Answer) -> None:
        gid, mid = request.group_id, request.member_id
        self.trace_request(
            "group.join",
            request,
            instance=request.instance_id,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
        )
        config = self.context.config
        if not gid:
            return answer(JoinGroupResponse(Errors.INVALID_GROUP_ID, member_id=mid))
        if (
            not config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= (config.group_max_session_timeout_ms)
        ):
            return answer(JoinGroupResponse(Errors.INVALID_SESSION_TIMEOUT, member_id=mid))
        group = self.groups.get(gid)
        if group is None:
            if mid:
                return answer(JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id=mid))
            group = self.create_group(gid)
        if not self._accept_joining_member(group, mid):
            group.remove(mid)
            return answer(JoinGroupResponse(Errors.GROUP_MAX_SIZE_REACHED))
        if group.state == states.DEAD:
            return answer(JoinGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, member_id=mid))
        names = [name for name, _ in request.protocols]
        if not group.supports_protocols(request.protocol_type, names):
            return answer(JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=mid))
        if not mid:
            self._join_new_member(request, group, answer)
        elif mid in group.pending_members:
            self._add_member_and_rebalance(request, group, mid, answer)
        else:
            self._join_existing_member(request, group, answer)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.context.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (states.EMPTY, states.DEAD):
            return True
        if group.state == states.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or group.awaiting_join < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, request: JoinGroupRequest, group: ClassicGroup, answer: Answer) -> None:
        new_id = self.context.new_member_id(request.instance_id or request.client_id)
        iid = request.instance_id
        if iid is not None:
            existing = group.static_members.get(iid)
            if existing is not None:
                self._replace_static_member(request, group, existing, new_id, answer)
            else:
                self._add_member_and_rebalance(request, group, new_id, answer)
        elif request.require_known_member_id:
            group.pending_members.add(new_id)
            self.schedule_heartbeat(group.group_id, new_id, request.session_timeout_ms)
            answer(JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(request, group, new_id, answer)

    def _join_existing_member(self, request: JoinGroupRequest, group: ClassicGroup, answer: Answer) -> None:
        mid = request.member_id
        error = group.validate_member(mid, request.instance_id)
        if error is not None:
            return answer(JoinGroupResponse(error, member_id=mid))
        member = group.members[mid]
        same = list(request.protocols) == member.protocols
        if group.state == states.PREPARING_REBALANCE:
            self._update_member_and_rebalance(request, group, member, answer)
        elif group.state == states.COMPLETING_REBALANCE:
            if same:
                answer(self._join_response(group, member, with_members=group.leader_id == mid))
            else:
                self._update_member_and_rebalance(request, group, member, answer)
        elif group.state == states.STABLE:
            if group.leader_id == mid or not same:
                self._update_member_and_rebalance(request, group, member, answer)
            else:
                answer(self._join_response(group, member, with_members=False))
        else:
            answer(JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_response(self, group: ClassicGroup, member: Member, with_members: bool) -> JoinGroupResponse:
        return JoinGroupResponse(
            Errors.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.member_metadata() if with_members else (),
        )

    def _add_member_and_rebalance(
        self, request: JoinGroupRequest, group: ClassicGroup, member_id: str, answer: Answer
    ) -> None:
        member = Member(
            member_id,
            request.instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
            is_new=True,
        )
        if group.state == states.PREPARING_REBALANCE and group.previous_state == states.EMPTY:
            group.new_member_added = True
        group.add(member, answer)
        self.context.emit(
            "group.member.add", group=group.group_id, member=member_id, instance=request.instance_id
        )
        self.schedule_heartbeat(group.group_id, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding member {member_id}")

    def _update_member_and_rebalance(
        self, request: JoinGroupRequest, group: ClassicGroup, member: Member, answer: Answer
    ) -> None:
        group.update(
            member, list(request.protocols), request.rebalance_timeout_ms, request.session_timeout_ms, answer
        )
        self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} rejoined")

    def _replace_static_member(
        self, request: JoinGroupRequest, group: ClassicGroup, old_id: str, new_id: str, answer: Answer
    ) -> None:
        assert request.instance_id is not None
        leader_before = group.leader_id or ""
        member = group.replace_static_member(request.instance_id, old_id, new_id)
        self.context.emit(
            "group.member.replace",
            group=group.group_id,
            member=new_id,
            previous=old_id,
            instance=request.instance_id,
        )
        self.timer.cancel(heartbeat_key(group.group_id, old_id))
        self.schedule_heartbeat(group.group_id, new_id, member.session_timeout_ms)
        group.update(
            member, list(request.protocols), request.rebalance_timeout_ms, request.session_timeout_ms, answer
        )
        if group.state == states.STABLE:
            if group.protocol_name == group.select_protocol():
                generation = group.generation_id

                def done(error: Errors) -> None:
                    if error is not Errors.NONE:
                        group.complete_join(member, JoinGroupResponse(write_error(error)))
                        return
                    response = JoinGroupResponse(
                        Errors.NONE,
                        member_id=new_id,
                        generation_id=generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=leader_before,
                    )
                    group.complete_join(member, response)

                self.write_group(group, {m.member_id: m.assignment for m in group.members.values()}, done)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, "static member replaced")
        elif group.state == states.COMPLETING_REBALANCE:
            self.prepare_rebalance(group, "static member replaced during CompletingRebalance")
        else:
            self._maybe_complete_join_phase(group)

    # ==========================================================================================
    # Rebalance: preparing it, completing the join
    # ==========================================================================================
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state == states.COMPLETING_REBALANCE:
            self._reset_and_propagate(group, Errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.state == states.EMPTY
        gid = group.group_id
        if initial:
            delay = self.context.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(join_key(gid), delay, lambda: self._initial_join_due(gid, delay, remaining))
        self.set_state(group, states.PREPARING_REBALANCE, reason=reason)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self._schedule_join(group)

    def _schedule_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(), lambda: self._join_due(gid))

    def _join_due(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self.complete_join(group)

    def _initial_join_due(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.context.config.group_initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(
                join_key(group_id),
                new_delay,
                lambda: self._initial_join_due(group_id, new_delay, new_remaining),
            )
        else:
            self.complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (
            group.state == states.PREPARING_REBALANCE
            and group.previous_state != states.EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(join_key(gid))
        for member in group.not_yet_rejoined():
            if member.instance_id is None:
                group.remove(member.member_id)
                self.context.emit(
                    "group.member.remove", group=gid, member=member.member_id, reason="not rejoined"
                )
        if group.state == states.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._schedule_join(group)
            return
        group.init_next_generation(self.context.now())
        self.context.emit(
            "group.state",
            group=gid,
            state=group.state,
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            members=sorted(group.members),
        )
        if group.state == states.EMPTY:
            self.write_group(group, {}, lambda error: None)
            return
        for member in list(group.members.values()):
            response = self._join_response(group, member, with_members=group.leader_id == member.member_id)
            group.complete_join(member, response)
            self.schedule_heartbeat(gid, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self.timer.schedule(
            sync_key(gid), group.rebalance_timeout_ms(), lambda: self._sync_due(gid, generation)
        )

    def _sync_due(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state in (states.COMPLETING_REBALANCE, states.STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                group.remove(member_id)
                self.context.emit(
                    "group.member.remove", group=group_id, member=member_id, reason="no SyncGroup"
                )
            self.prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync.clear()
        self.timer.cancel(sync_key(group.group_id))

    # ==========================================================================================
    # SyncGroup
    # ==========================================================================================
    def sync_group(self, request: SyncGroupRequest, answer: Answer) -> None:
        gid, mid = request.group_id, request.member_id
        self.trace_request(
            "group.sync", request, generation=request.generation_id, assignments=len(request.assignments)
        )
        if not gid:
            return answer(SyncGroupResponse(Errors.INVALID_GROUP_ID))
        group = self.groups.get(gid)
        if group is None or group.is_empty():
            return answer(SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, request)
        if error is not None:
            return answer(SyncGroupResponse(error))
        if group.state == states.PREPARING_REBALANCE:
            return answer(SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS))
        member = group.members[mid]
        if group.state == states.STABLE:
            self._remove_pending_sync(group, mid)
            return answer(
                SyncGroupResponse(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name)
            )
        member.awaiting_sync = answer
        self._remove_pending_sync(group, mid)
        if group.leader_id != mid:
            return
        assignment = dict(request.assignments)
        for other in group.members:
            assignment.setdefault(other, b"")
        generation = request.generation_id

        def done(error: Errors) -> None:
            if group.state != states.COMPLETING_REBALANCE or group.generation_id != generation:
                return
            if error is not Errors.NONE:
                self._reset_and_propagate(group, write_error(error))
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"error {error.name} storing assignment"
                )
                return
            for other in group.members.values():
                other.assignment = assignment.get(other.member_id, b"")
            self._propagate(group, Errors.NONE)
            self.set_state(group, states.STABLE)

        self.write_group(group, assignment, done)

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> Errors | None:
        error = self.generation_error(group, request.member_id, request.instance_id, request.generation_id)
        if error is not None:
            return error
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if group.state in (states.DEAD, states.EMPTY, states.PREPARING_REBALANCE) or not group.pending_sync:
            self.timer.cancel(sync_key(group.group_id))

    def _reset_and_propagate(self, group: ClassicGroup, error: Errors) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error)

    def _propagate(self, group: ClassicGroup, error: Errors) -> None:
        ok = error is Errors.NONE
        for member in list(group.members.values()):
            response = SyncGroupResponse(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if group.complete_sync(member, response):
                self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)

    # ==========================================================================================
    # Heartbeat and session timeouts
    # ==========================================================================================
    def heartbeat(self, request: HeartbeatRequest, answer: Answer) -> None:
        """A refusal is answered at once; NONE and REBALANCE_IN_PROGRESS, read from the group's
        state, once the group's writes sent before are answered (Kafka's write operation without
        records)."""
        error = self._heartbeat_error(request)
        if error not in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS):
            return answer(HeartbeatResponse(error))
        self.context.answer_when_written(
            request.group_id, answer, HeartbeatResponse(error), HeartbeatResponse
        )

    def _heartbeat_error(self, request: HeartbeatRequest) -> Errors:
        if not request.group_id:
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(request.group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        error = self.generation_error(group, request.member_id, request.instance_id, request.generation_id)
        if error is not None:
            return error
        if group.state == states.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        member = group.members[request.member_id]
        self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
        return Errors.REBALANCE_IN_PROGRESS if group.state == states.PREPARING_REBALANCE else Errors.NONE

    def schedule_heartbeat(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        deadline = self.timer.schedule(
            heartbeat_key(group_id, member_id), timeout_ms, lambda: self._heartbeat_due(group_id, member_id)
        )
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None:
            member.session_deadline_ms = deadline

    def _heartbeat_due(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.state == states.DEAD:
            return
        if member_id in group.pending_members:
            group.remove(member_id)
            self.context.emit("group.session.expire", group=group_id, member=member_id, pending=True)
            if group.state == states.PREPARING_REBALANCE and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.context.emit(
            "group.session.expire",
            group=group_id,
            member=member_id,
            pending=False,
            generation=group.generation_id,
        )
        self._remove_member_and_update(group, member, "session timeout")

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.complete_join(member, JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self.context.emit("group.member.remove", group=group.group_id, member=member.member_id, reason=reason)
        if group.state in (states.STABLE, states.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state == states.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_join(group)

    # ==========================================================================================
    # LeaveGroup
    # ==========================================================================================
    def leave_group(self, request: LeaveGroupRequest, answer: Answer) -> None:
        gid = request.group_id
        group = self.groups.get(gid) if gid else None
        if group is None:
            error = Errors.INVALID_GROUP_ID if not gid else Errors.UNKNOWN_MEMBER_ID
            return answer(LeaveGroupResponse(error))
        if group.state == states.DEAD:
            return answer(LeaveGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE))
        results: list[tuple[str, str | None, Errors]] = []
        for leaving in request.members:
            mid, iid = leaving.member_id, leaving.instance_id
            error: Errors | None = None
            if not mid:
                if iid is not None and iid in group.static_members:
                    self._remove_current_member(group, group.static_members[iid], leaving.reason)
                else:
                    error = Errors.UNKNOWN_MEMBER_ID
            elif mid in group.pending_members:
                group.remove(mid)
                self.timer.cancel(heartbeat_key(gid, mid))
            else:
                error = group.validate_member(mid, iid)
                if error is None:
                    self._remove_current_member(group, mid, leaving.reason)
            results.append((mid, iid, error or Errors.NONE))
        if any(error is Errors.NONE for _, _, error in results):
            if group.state in (states.STABLE, states.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left")
            elif group.state == states.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group)
        answer(LeaveGroupResponse(Errors.NONE, tuple(results)))

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str | None) -> None:
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        member = group.members[member_id]
        group.complete_join(member, JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID))
        group.remove(member_id)
        self.context.emit(
            "group.leave", group=group.group_id, member=member_id, reason=reason or "not provided"
        )

    # ==========================================================================================
    # DescribeGroups and ListGroups
    # ==========================================================================================
    def describe_group(self, group_id: str) -> DescribedGroup:
        """The group as DescribeGroups shows it: members' metadata and assignments only when Stable."""
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, Errors.NONE, "Dead")
        stable = group.state == states.STABLE
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
        """Every group, by id, filtered by the request's states and types (all are classic)."""
        states_filter = {s.strip().lower() for s in request.states}
        types = {t.strip().lower() for t in request.types}
        listed = tuple(
            ListedGroup(gid, group.protocol_type or "", group.state)
            for gid, group in sorted(self.groups.items())
            if (not states_filter or group.state.lower() in states_filter)
            and (not types or "classic" in types)
        )
        return ListGroupsResponse(Errors.NONE, listed)

    def snapshot(self) -> tuple[GroupView, ...]:
        """Every group, by id, with its members' session deadlines and what each is awaiting."""
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
        return tuple(groups)

    # ==========================================================================================
    # Group records: write, replay, delete
    # ==========================================================================================
    def write_group(self, group: ClassicGroup, assignment: dict[str, bytes], on_done: Any) -> None:
        """Append the group's metadata record; ``on_done(error)`` once replicated (or failed)."""
        self.context.write(group.group_id, [self.group_metadata_record(group, assignment)], on_done)

    @staticmethod
    def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> bytes:
        """The group's metadata record: its generation and members with ``assignment``'s bytes."""
        value = {
            "protocol_type": group.protocol_type,
            "generation": group.generation_id,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "state_timestamp_ms": group.state_timestamp_ms,
            "members": [
                records.member_value(m, group.protocol_name, assignment.get(m.member_id, b""))
                for m in group.members.values()
            ],
        }
        return records.group_record(group.group_id, value)

    def replay(self, record: dict[str, Any]) -> None:
        """Apply one group metadata record read from the log (a tombstone removes the group)."""
        gid = record["group"]
        value = record["value"]
        if value is None:
            self.groups.pop(gid, None)
            return
        group = ClassicGroup(
            gid,
            state=states.STABLE if value["members"] else states.EMPTY,
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

    def validate_delete_group(self, group_id: str) -> Errors | None:
        """Kafka's validateDeleteGroup: why ``group_id`` cannot be deleted, or None (it is Empty)."""
        group = self.groups.get(group_id)
        if group is None or group.state == states.DEAD:
            return Errors.GROUP_ID_NOT_FOUND
        if group.state != states.EMPTY:
            return Errors.NON_EMPTY_GROUP
        return None

    @staticmethod
    def group_tombstone(group_id: str) -> bytes:
        """The record deleting ``group_id``'s metadata."""
        return records.group_record(group_id, None)

    def remove_group(self, group_id: str) -> None:
        """Forget ``group_id`` (deleted or expired): it is Dead and its tasks are disarmed."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            if group.state != states.DEAD:
                group.transition(states.DEAD, self.context.now())
            self.timer.cancel(join_key(group_id))
            self.timer.cancel(sync_key(group_id))
            for member_id in list(group.members) + list(group.pending_members):
                self.timer.cancel(heartbeat_key(group_id, member_id))
            self.context.emit(
                "group.state",
                group=group_id,
                state=states.DEAD,
                generation=group.generation_id,
                reason="deleted",
            )

    # ==========================================================================================
    # Loading and unloading a partition
    # ==========================================================================================
    def on_loaded(self, partition: int) -> int:
        """Kafka's onLoaded: arm the session timeout of every member of ``partition``'s groups (replayed
        from its log); return how many groups the partition holds."""
        mine = [self.groups[gid] for gid in self.group_ids(partition)]
        for group in mine:
            for member in group.members.values():
                self.schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
        return len(mine)

    def unload(self, partition: int) -> list[str]:
        """Drop ``partition``'s groups: parked JoinGroup and SyncGroup answers get NOT_COORDINATOR and
        their tasks are disarmed. Returns the dropped group ids."""
        dropped = self.group_ids(partition)
        for gid in dropped:
            group = self.groups.pop(gid)
            for member in group.members.values():
                group.complete_join(
                    member, JoinGroupResponse(Errors.NOT_COORDINATOR, member_id=member.member_id)
                )
                group.complete_sync(member, SyncGroupResponse(Errors.NOT_COORDINATOR))
            for member_id in list(group.members) + list(group.pending_members):
                self.timer.cancel(heartbeat_key(gid, member_id))
            self.timer.cancel(join_key(gid))
            self.timer.cancel(sync_key(gid))
        return dropped
