"""What a broker's group coordinator shows (the TUI's coordinator section, ``Broker.snapshot``).

Frozen values read from ``GroupCoordinator.snapshot()``: nothing here refers back to live state.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class MemberView:
    member_id: str
    client_id: str
    session_deadline_ms: int  # -1 when not armed
    awaiting: str  # "join", "sync" or ""


@attrs.frozen
class GroupView:
    group_id: str
    state: str
    generation: int
    protocol: str | None
    leader: str | None  # the leader's client id
    members: tuple[MemberView, ...]
    pending: int  # member ids handed out (MEMBER_ID_REQUIRED) and not joined yet


@attrs.frozen
class ConsumerMemberView:
    """A KIP-848 member: its epoch and state, current, revoking and target partitions, its keyed
    tasks' deadlines (-1 when not armed)."""

    member_id: str
    client_id: str
    instance_id: str | None
    member_epoch: int
    state: str  # STABLE, UNREVOKED_PARTITIONS or UNRELEASED_PARTITIONS
    assigned: tuple[tuple[str, tuple[int, ...]], ...]
    pending_revocation: tuple[tuple[str, tuple[int, ...]], ...]
    target: tuple[tuple[str, tuple[int, ...]], ...]
    session_deadline_ms: int
    rebalance_deadline_ms: int


@attrs.frozen
class ConsumerGroupView:
    """A KIP-848 consumer group: its state, group epoch, assignment epoch, assignor and members."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberView, ...]


@attrs.frozen
class CoordinatorView:
    """A broker's group coordinator: the partitions it loaded, its groups, its keyed timer tasks,
    and the partitions whose log it is still reading (COORDINATOR_LOAD_IN_PROGRESS)."""

    partitions: tuple[int, ...]
    groups: tuple[GroupView, ...]
    timers: tuple[tuple[str, int], ...]  # (key, deadline), soonest first
    loading: tuple[int, ...] = ()
    consumer_groups: tuple[ConsumerGroupView, ...] = ()
