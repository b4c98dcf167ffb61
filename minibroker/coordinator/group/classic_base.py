"""What the classic group protocol's parts share: task keys, the write-error mapping, the host's
services, request tracing, state changes and the group's metadata record."""

from __future__ import annotations

from typing import Any

from minibroker.common.errors import Errors
from minibroker.coordinator.group import records
from minibroker.coordinator.group.group import DEAD, ClassicGroup

#: Kafka's classicGroupNewMemberJoinTimeoutMs
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def write_error(error: Errors) -> Errors:
    """Kafka's appendGroupMetadataErrorToResponseError: what a failed write answers."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    return error


class ClassicBase:
    """What the classic protocol's mixins share; the host (``GroupCoordinator``) provides
    ``groups``, ``timer``, ``config``, ``now``, ``write``, ``emit`` and ``new_member_id``."""

    groups: dict[str, ClassicGroup]
    timer: Any
    config: Any

    def now(self) -> int: ...
    def emit(self, kind: str, **fields: Any) -> None: ...
    def write(self, group_id: str, values: list[bytes], on_done: Any) -> None: ...
    def new_member_id(self, prefix: str) -> str: ...

    def generation_error(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> Errors | None:
        """Why a member's request for ``generation_id`` is refused (Heartbeat, SyncGroup), or None."""
        if group.state == DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        return Errors.ILLEGAL_GENERATION if generation_id != group.generation_id else None

    def trace_request(self, kind: str, request: Any, **fields: Any) -> None:
        """Trace a JoinGroup or SyncGroup as it arrives: its group, its member and ``fields``."""
        self.emit(kind, group=request.group_id, member=request.member_id, **fields)

    # --- records -----------------------------------------------------------------------------
    def write_group(self, group: ClassicGroup, assignment: dict[str, bytes], on_done: Any) -> None:
        """Append the group's metadata record; ``on_done(error)`` once replicated (or failed)."""
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
        self.write(group.group_id, [records.group_record(group.group_id, value)], on_done)

    def set_state(self, group: ClassicGroup, state: str, reason: str | None = None) -> None:
        group.transition(state, self.now())
        self.emit(
            "group.state", group=group.group_id, state=state, generation=group.generation_id, reason=reason
        )
