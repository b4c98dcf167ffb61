"""The classic protocol's JoinGroup and rebalance (join phase) of a group."""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.coordinator.group import group as states
from minibroker.coordinator.group.classic_base import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    ClassicBase,
    heartbeat_key,
    join_key,
    sync_key,
    write_error,
)
from minibroker.coordinator.group.group import Answer, ClassicGroup, Member
from minibroker.coordinator.group.messages import JoinGroupRequest, JoinGroupResponse


class JoinPhase(ClassicBase):
    """Mixin of ``GroupCoordinator``: see ``classic`` for the rules."""

    # --- JoinGroup ---------------------------------------------------------------------------
    def join_group(self, request: JoinGroupRequest, answer: Answer) -> None:
        gid, mid = request.group_id, request.member_id
        self.trace_request(
            "group.join",
            request,
            instance=request.instance_id,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
        )
        config = self.config
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
        limit = self.config.group_max_size
        member = group.members.get(member_id)
        if group.state in (states.EMPTY, states.DEAD):
            return True
        if group.state == states.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join is not None) or group.awaiting_join < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, request: JoinGroupRequest, group: ClassicGroup, answer: Answer) -> None:
        new_id = self.new_member_id(request.instance_id or request.client_id)
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
        self.emit("group.member.add", group=group.group_id, member=member_id, instance=request.instance_id)
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
        self.emit(
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

    # --- rebalance ---------------------------------------------------------------------------
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
            delay = self.config.group_initial_rebalance_delay_ms
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
            new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
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
                self.emit("group.member.remove", group=gid, member=member.member_id, reason="not rejoined")
        if group.state == states.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            self._schedule_join(group)
            return
        group.init_next_generation(self.now())
        self.emit(
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
                self.emit("group.member.remove", group=group_id, member=member_id, reason="no SyncGroup")
            self.prepare_rebalance(group, f"removing {missing} on pending sync expiration")

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync.clear()
        self.timer.cancel(sync_key(group.group_id))
