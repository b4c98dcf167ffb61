"""The classic protocol's Heartbeat, session timeouts and LeaveGroup."""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.coordinator.group import group as states
from minibroker.coordinator.group.classic_base import ClassicBase, heartbeat_key
from minibroker.coordinator.group.group import Answer, ClassicGroup, Member
from minibroker.coordinator.group.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
)


class MemberSessions(ClassicBase):
    """Mixin of ``GroupCoordinator``: see ``classic`` for the rules."""

    # --- Heartbeat and session timeouts ------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest, answer: Answer) -> None:
        answer(HeartbeatResponse(self._heartbeat_error(request)))

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
            self.emit("group.session.expire", group=group_id, member=member_id, pending=True)
            if group.state == states.PREPARING_REBALANCE and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.emit(
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
        self.emit("group.member.remove", group=group.group_id, member=member.member_id, reason=reason)
        if group.state in (states.STABLE, states.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.state == states.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_join(group)

    # --- LeaveGroup --------------------------------------------------------------------------
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
        self.emit("group.leave", group=group.group_id, member=member_id, reason=reason or "not provided")
