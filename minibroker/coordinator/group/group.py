"""A classic group's state: members, generation, protocol, leader (Kafka's ``ClassicGroup``).

States and their legal predecessors (Kafka's ``ClassicGroupState``)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any

Invariants:
- ``awaiting_join`` is the number of members with a parked JoinGroup answer;
  ``has_all_members_joined()`` is "every member is awaiting and no member id is pending";
- ``protocol_votes[name]`` counts the members supporting ``name``; a protocol is a
  candidate when every member supports it;
- the leader is a member (or None when there are none); removing it hands leadership
  to the first remaining member in join order;
- ``static_members`` maps each ``group.instance.id`` to its current member id.

Pure: answers are callables stored on members and called by the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from minibroker.common.errors import Errors
from minibroker.coordinator.group.messages import JoinGroupMember, JoinGroupResponse, SyncGroupResponse

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}

Answer = Callable[[Any], None]


@attrs.define(eq=False)
class Member:
    """One member: its ids, timeouts, protocols (name -> metadata, in preference order), assignment."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: joined in this rebalance and not yet through a completed join (KIP-394's new-member timeout)
    is_new: bool = False
    awaiting_join: Answer | None = None
    awaiting_sync: Answer | None = None
    #: virtual ms of the member's session deadline (for views; the timer holds the truth)
    session_deadline_ms: int = -1

    def protocol_names(self) -> list[str]:
        """Each protocol once, in preference order: a name the member repeats counts once, and its
        first entry is the one used (as ``metadata`` and ``vote`` read them)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A rebalancing member need not heartbeat, unless it is new (Kafka's rule)."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


class IllegalStateTransition(RuntimeError):
    """A transition Kafka's state machine does not allow (a coordinator bug, never input)."""


@attrs.define(eq=False)
class ClassicGroup:
    """One classic group on its coordinator."""

    group_id: str
    state: str = EMPTY
    previous_state: str | None = None
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = attrs.Factory(dict)
    pending_members: set[str] = attrs.Factory(set)
    pending_sync: set[str] = attrs.Factory(set)
    static_members: dict[str, str] = attrs.Factory(dict)
    protocol_votes: dict[str, int] = attrs.Factory(dict)
    awaiting_join: int = 0
    new_member_added: bool = False

    # --- state -------------------------------------------------------------------------------
    def transition(self, state: str, now_ms: int) -> None:
        if self.state not in _PREVIOUS[state]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state} -> {state}")
        self.previous_state, self.state, self.state_timestamp_ms = self.state, state, now_ms

    def can_rebalance(self) -> bool:
        return self.state in _PREVIOUS[PREPARING_REBALANCE]

    def is_empty(self) -> bool:
        return self.state == EMPTY

    # --- members -----------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member, answer: Answer | None) -> None:
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count(member, 1)
        member.awaiting_join = answer
        if answer is not None:
            self.awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count(member, -1)
            if member.awaiting_join is not None:
                self.awaiting_join -= 1
            if member.instance_id is not None:
                self.static_members.pop(member.instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def update(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        answer: Answer | None,
    ) -> None:
        self._count(member, -1)
        member.protocols = protocols
        self._count(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if answer is not None and member.awaiting_join is None:
            self.awaiting_join += 1
        elif answer is None and member.awaiting_join is not None:
            self.awaiting_join -= 1
        member.awaiting_join = answer

    def complete_join(self, member: Member, response: Any) -> bool:
        answer = member.awaiting_join
        if answer is None:
            return False
        member.awaiting_join = None
        self.awaiting_join -= 1
        answer(response)
        return True

    def complete_sync(self, member: Member, response: Any) -> bool:
        answer = member.awaiting_sync
        if answer is None:
            return False
        member.awaiting_sync = None
        answer(response)
        return True

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``instance_id`` a new member id (KIP-345); the old id is fenced:
        its parked JoinGroup and SyncGroup answer FENCED_INSTANCE_ID."""
        old = self.members.pop(old_id)
        self._count(old, -1)
        if old.awaiting_join is not None:
            self.awaiting_join -= 1
            old.awaiting_join(JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id=old_id))
        if old.awaiting_sync is not None:
            old.awaiting_sync(SyncGroupResponse(Errors.FENCED_INSTANCE_ID))
        new = attrs.evolve(old, member_id=new_id, awaiting_join=None, awaiting_sync=None, is_new=False)
        self.members[new_id] = new
        self._count(new, 1)
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.pending_sync.discard(old_id)
        return new

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick the first member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- static members ----------------------------------------------------------------------
    def validate_member(self, member_id: str, instance_id: str | None) -> Errors | None:
        """Kafka's ``validateMember``: the error, or None when the member may act."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return Errors.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return Errors.UNKNOWN_MEMBER_ID
        return None

    # --- protocols ---------------------------------------------------------------------------
    def _count(self, member: Member, delta: int) -> None:
        for name in member.protocol_names():
            self.protocol_votes[name] = self.protocol_votes.get(name, 0) + delta

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.protocol_votes.get(name, 0) == len(self.members) for name in names
        )

    def select_protocol(self) -> str:
        """The candidate with the most votes; ties go to the one the leader prefers (deterministic)."""
        size = len(self.members)
        candidates = {name for name, votes in self.protocol_votes.items() if votes == size}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(EMPTY, now_ms)
        self.pending_sync.clear()

    def member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """Every member with its metadata for the chosen protocol: what the leader's JoinGroup carries."""
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )
