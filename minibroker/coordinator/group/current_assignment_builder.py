"""How a member moves from its current assignment to its target (Kafka's ``CurrentAssignmentBuilder``).

Incremental reconciliation (KIP-848): a partition moves between members in two
steps, never owned by both. ``reconcile`` returns the member's next state:

- STABLE at the assignment epoch: nothing to do. STABLE at an older epoch, or
  UNRELEASED_PARTITIONS: compute the next assignment.
- UNREVOKED_PARTITIONS: while the member still reports owning a partition pending
  revocation (or reports nothing), it stays; once it has let them all go the next
  assignment is computed.

The next assignment, topic by topic: partitions kept (current and target), to
revoke (current, not target), to assign (target, not current). A partition to
assign is given at once only if no member owns it (its partition epoch is -1, or
the member itself is revoking it); else it is *unreleased*. With partitions to
revoke that the member still owns, the member keeps its epoch and turns
UNREVOKED_PARTITIONS (its assignment shrinks to the kept ones); else with
unreleased partitions it takes the assignment epoch and turns
UNRELEASED_PARTITIONS; else it takes the assignment epoch and is STABLE.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.coordinator.group.consumer_group import (
    MEMBER_STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroupMember,
)

Owned = dict[str, frozenset[int]] | None


def owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Whether the member's reported partitions include any of ``partitions`` (unknown: yes)."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & parts for topic, parts in partitions.items())


def reconcile(
    member: ConsumerGroupMember,
    assignment_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[str, int], int],
    owned: Owned,
) -> ConsumerGroupMember:
    """The member's next state towards ``target`` at ``assignment_epoch`` (the same object if none)."""
    if member.state == MEMBER_STABLE and member.member_epoch == assignment_epoch:
        return member
    if member.state == UNREVOKED_PARTITIONS and owns_any(owned, member.pending_revocation):
        return member
    assigned: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in sorted(set(member.assigned) | set(target)):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        keep = set(current & wanted)
        revoking = member.pending_revocation.get(topic, frozenset())
        for p in sorted(wanted - current):
            # a partition this member still revokes is its own, not another member's
            if partition_epoch(topic, p) == -1 or p in revoking:
                keep.add(p)
            else:
                unreleased = True
        if keep:
            assigned[topic] = frozenset(keep)
        if current - wanted:
            revoke[topic] = frozenset(current - wanted)
    if revoke and owns_any(owned, revoke):
        state, new_epoch = UNREVOKED_PARTITIONS, member.member_epoch
    else:
        revoke = {}
        state = UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE
        new_epoch = assignment_epoch
    if (
        state == member.state
        and new_epoch == member.member_epoch
        and assigned == member.assigned
        and revoke == member.pending_revocation
    ):
        return member
    return attrs.evolve(
        member,
        state=state,
        member_epoch=new_epoch,
        previous_member_epoch=member.member_epoch,
        assigned=assigned,
        pending_revocation=revoke,
    )
