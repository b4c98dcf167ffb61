"""The classic protocol's SyncGroup: the leader's assignment written, then handed to every member."""

from __future__ import annotations

from minibroker.common.errors import Errors
from minibroker.coordinator.group import group as states
from minibroker.coordinator.group.classic_base import ClassicBase, sync_key, write_error
from minibroker.coordinator.group.group import Answer, ClassicGroup
from minibroker.coordinator.group.messages import SyncGroupRequest, SyncGroupResponse


class SyncPhase(ClassicBase):
    """Mixin of ``GroupCoordinator``: see ``classic`` for the rules."""

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
