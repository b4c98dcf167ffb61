"""Checking a ``group`` expectation against the group's coordinator at the end of a millisecond."""

from __future__ import annotations

from minibroker.coordinator.group import OFFSETS_TOPIC, consumer_protocol
from minibroker.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember, partitions_of
from minibroker.scenario.expect import ExpectationResult, _compare
from minibroker.scenario.model import GroupState, MemberErrors
from minibroker.sim.cluster import Cluster


def check_group(expectation: GroupState, cluster: Cluster) -> ExpectationResult:
    group = None
    committed: dict[str, int] = {}
    if OFFSETS_TOPIC in cluster.topics:
        broker = cluster.coordinator_for(expectation.group)
        coordinator = cluster.brokers[broker].coordinator if broker >= 0 else None
        if coordinator is not None:
            group = coordinator.groups.get(expectation.group)
            offsets = coordinator.offsets.get(expectation.group, {})
            committed = {str(tp): value.offset for tp, value in sorted(offsets.items())}
            consumer_group = coordinator.consumer_group_manager.groups.get(expectation.group)
            if consumer_group is not None:
                return _check_consumer_group(expectation, consumer_group, committed)
    members = group.members.values() if group is not None else ()
    clients = {m.member_id: m.client_id for m in members}
    assignment = {m.client_id: tuple(sorted(f"{t}-{p}" for t, p in _decode(m.assignment))) for m in members}
    expected, passed, seen = _compare(
        [
            ("state", expectation.state, group.state if group is not None else "Dead"),
            ("generation", expectation.generation, group.generation_id if group is not None else None),
            (
                "members",
                list(expectation.members) if expectation.members is not None else None,
                sorted(clients.values()),
            ),
            ("leader", expectation.leader, clients.get(group.leader_id or "") if group is not None else None),
            ("assignment", _show(expectation.assignment), _show(assignment)),
            ("committed", expectation.committed, committed),
            # a consumer protocol group's fields: never met by a classic group
            ("group_epoch", expectation.group_epoch, None),
            ("assignment_epoch", expectation.assignment_epoch, None),
            ("epochs", expectation.epochs, None),
            ("target", _show(expectation.target), None),
        ]
    )
    return ExpectationResult(
        expectation.where, f"group {expectation.group} at {expectation.at} ms: {expected}", passed, seen
    )


def _check_consumer_group(
    expectation: GroupState, group: ConsumerGroup, committed: dict[str, int]
) -> ExpectationResult:
    """A consumer protocol group: ``assignment`` is what each member owns (assigned and pending
    revocation), ``generation`` its group epoch; ``leader`` never matches (no leader)."""
    members = list(group.members.values())

    def labels(parts: set[tuple[str, int]]) -> tuple[str, ...]:
        return tuple(f"{t}-{p}" for t, p in sorted(parts))

    owned = {m.client_id: labels(m.owned()) for m in members}
    target = {m.client_id: labels(partitions_of(m.target)) for m in members}
    expected, passed, seen = _compare(
        [
            ("state", expectation.state, group.state),
            ("generation", expectation.generation, group.group_epoch),
            ("group_epoch", expectation.group_epoch, group.group_epoch),
            ("assignment_epoch", expectation.assignment_epoch, group.assignment_epoch),
            (
                "members",
                list(expectation.members) if expectation.members is not None else None,
                sorted(m.client_id for m in members),
            ),
            ("leader", expectation.leader, None),
            ("epochs", expectation.epochs, {m.client_id: m.member_epoch for m in sorted(members, key=_by)}),
            ("assignment", _show(expectation.assignment), _show(owned)),
            ("target", _show(expectation.target), _show(target)),
            ("committed", expectation.committed, committed),
        ]
    )
    return ExpectationResult(
        expectation.where, f"group {expectation.group} at {expectation.at} ms: {expected}", passed, seen
    )


def _by(member: ConsumerGroupMember) -> str:
    return member.client_id


def _decode(data: bytes) -> list[tuple[str, int]]:
    try:
        return consumer_protocol.decode_assignment(data)
    except ValueError:
        return []


def _show(assignment: dict[str, tuple[str, ...]] | None) -> dict[str, list[str]] | None:
    if assignment is None:
        return None
    return {client: list(parts) for client, parts in sorted(assignment.items())}


def check_member(expectation: MemberErrors, seen: list[tuple[int, str, str]]) -> ExpectationResult:
    """``seen``: the member's (ms, api, error) answers, in order."""
    errors = [error for _, api, error in seen if expectation.api in (None, api)]
    which = f"{expectation.api} " if expectation.api else ""
    return ExpectationResult(
        expectation.where,
        f"member {expectation.member}: {which}errors {list(expectation.errors)}",
        errors == list(expectation.errors),
        f"{which}errors {errors}",
    )
