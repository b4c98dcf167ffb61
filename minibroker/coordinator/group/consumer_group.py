"""A consumer group of the KIP-848 protocol: members, epochs, target assignment (Kafka's ``ConsumerGroup``).

The group epoch counts the changes of its membership, subscriptions and subscribed
topics' partitions; the assignment epoch is the group epoch its target assignment
was computed at (``assignment_epoch <= group_epoch``). Each member carries its own
epoch and reconciles from its current assignment towards its target one
(``CurrentAssignmentBuilder``).

Invariants:
- ``partition_epochs[(topic, p)]`` is the epoch of the member that owns ``p``: a
  partition in a member's ``assigned`` or ``pending_revocation`` set; no partition is
  owned by two members (a partition is handed to its next owner only once released);
- ``static_members`` maps each ``group.instance.id`` to its current member id;
- the state is Empty without members, Assigning while the assignment epoch lags the
  group epoch, Reconciling while a member's epoch lags the assignment epoch or it is
  not STABLE, else Stable (Kafka's ``ConsumerGroup.maybeUpdateGroupState``).

Pure: no timers, no I/O; ``ConsumerGroupManager`` changes it and writes its records.
"""

from __future__ import annotations

import base64
import re
from collections import Counter

import attrs

#: a member's partitions, by topic name: {topic: frozenset of partition numbers}
Assignment = dict[str, frozenset[int]]
#: an assignor's view: member id -> subscribed topics in, member id -> (topic, partition) pairs out
Subscriptions = dict[str, set[str]]
Assignments = dict[str, set[tuple[str, int]]]

EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
DEAD = "Dead"

#: member states (Kafka's ``MemberState``)
MEMBER_STABLE = "STABLE"
UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"

#: member epochs with a meaning of their own
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def partitions_of(assignment: Assignment) -> set[tuple[str, int]]:
    return {(topic, p) for topic, parts in assignment.items() for p in parts}


def as_assignment(pairs: set[tuple[str, int]] | list[tuple[str, int]]) -> Assignment:
    out: dict[str, set[int]] = {}
    for topic, p in pairs:
        out.setdefault(topic, set()).add(p)
    return {topic: frozenset(parts) for topic, parts in sorted(out.items())}


def sorted_assignment(assignment: Assignment) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``assignment`` as sorted (topic, partitions) pairs (the messages' form)."""
    return tuple((topic, tuple(sorted(parts))) for topic, parts in sorted(assignment.items()) if parts)


@attrs.define(eq=False)
class ConsumerGroupMember:
    """One member (Kafka's ``ConsumerGroupMember``)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = MEMBER_STABLE
    assigned: Assignment = attrs.Factory(dict)
    pending_revocation: Assignment = attrs.Factory(dict)
    #: the member's part of the group's target assignment
    target: Assignment = attrs.Factory(dict)
    #: a member speaking the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside the group: its
    #: JoinGroup protocols (name, subscription bytes) in preference order and its session timeout
    #: (Kafka's ``ClassicMemberMetadata``); empty for a consumer protocol member
    classic_protocols: tuple[tuple[str, bytes], ...] = ()
    classic_session_timeout_ms: int = -1

    @property
    def uses_classic_protocol(self) -> bool:
        return bool(self.classic_protocols)

    def owned(self) -> set[tuple[str, int]]:
        """What the member may still be fetching: assigned and pending revocation."""
        return partitions_of(self.assigned) | partitions_of(self.pending_revocation)

    def to_record(self) -> dict:
        value = attrs.asdict(self)
        for name in ("assigned", "pending_revocation", "target"):
            value[name] = {topic: sorted(parts) for topic, parts in sorted(value[name].items())}
        value["subscribed_topic_names"] = list(self.subscribed_topic_names)
        if self.uses_classic_protocol:
            value["classic_protocols"] = [
                [name, base64.b64encode(data).decode()] for name, data in self.classic_protocols
            ]
        else:  # a consumer protocol member's record carries no classic fields
            del value["classic_protocols"], value["classic_session_timeout_ms"]
        return value

    @classmethod
    def from_record(cls, value: dict) -> ConsumerGroupMember:
        fields = dict(value)
        for name in ("assigned", "pending_revocation", "target"):
            fields[name] = {topic: frozenset(parts) for topic, parts in fields[name].items()}
        fields["subscribed_topic_names"] = tuple(fields["subscribed_topic_names"])
        fields["classic_protocols"] = tuple(
            (name, base64.b64decode(data)) for name, data in fields.get("classic_protocols", ())
        )
        return cls(**fields)


@attrs.define(eq=False)
class ConsumerGroup:
    """One consumer group on its coordinator."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = attrs.Factory(dict)
    static_members: dict[str, str] = attrs.Factory(dict)
    partition_epochs: dict[tuple[str, int], int] = attrs.Factory(dict)
    #: how many members subscribe to each topic name / each regex (kept by ``put`` and ``remove``)
    subscribed_names: Counter[str] = attrs.Factory(Counter)
    subscribed_regexes: Counter[str] = attrs.Factory(Counter)
    #: the subscribed topics' partition counts the target assignment was computed for
    subscription_metadata: dict[str, int] = attrs.Factory(dict)
    #: the assignor of the last target assignment
    assignor: str = ""
    state_timestamp_ms: int = -1

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state != MEMBER_STABLE:
                return RECONCILING
        return STABLE

    def is_empty(self) -> bool:
        return not self.members

    def put(self, member: ConsumerGroupMember) -> None:
        """Add or replace ``member`` (same id), keeping ``partition_epochs`` and ``static_members``."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        self._count(member, 1)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned():
            self.partition_epochs[tp] = member.member_epoch

    def remove(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        return member

    def _count(self, member: ConsumerGroupMember, delta: int) -> None:
        """Count ``member``'s subscription in (+1) or out (-1); a name or regex nobody has is dropped."""
        regexes = (member.subscribed_topic_regex,) if member.subscribed_topic_regex else ()
        for counts, keys in (
            (self.subscribed_names, member.subscribed_topic_names),
            (self.subscribed_regexes, regexes),
        ):
            for key in keys:
                counts[key] += delta
                if counts[key] <= 0:
                    del counts[key]

    def _release(self, member: ConsumerGroupMember) -> None:
        self._count(member, -1)
        for tp in member.owned():
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]

    def current_partition_epoch(self, topic: str, partition: int) -> int:
        """The epoch of the member owning the partition, or -1 when it is free."""
        return self.partition_epochs.get((topic, partition), -1)

    def classic_protocol_names(self) -> set[str] | None:
        """The classic protocols every classic member supports, or None without classic members."""
        names = None
        for member in self.members.values():
            if member.uses_classic_protocol:
                mine = {name for name, _ in member.classic_protocols}
                names = mine if names is None else names & mine
        return names

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member but ``member_id`` speaks the classic protocol (Kafka's
        ``allMembersUseClassicProtocolExcept``)."""
        return all(m.uses_classic_protocol for mid, m in self.members.items() if mid != member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topics(self, topics: list[str]) -> set[str]:
        """The topics among ``topics`` that at least one member subscribes to (names or regex)."""
        known = set(topics)
        names = {t for t in self.subscribed_names if t in known}
        for regex in self.subscribed_regexes:
            names |= _matching(regex, topics)
        return names


def subscribed(member: ConsumerGroupMember, topics: list[str]) -> set[str]:
    """The topics among ``topics`` ``member`` subscribes to: its names and the ones its regex matches
    in full (internal topics never match, as Kafka's regex resolution skips them)."""
    names = {t for t in member.subscribed_topic_names if t in topics}
    if member.subscribed_topic_regex:
        names |= _matching(member.subscribed_topic_regex, topics)
    return names


def _matching(regex: str, topics: list[str]) -> set[str]:
    pattern = re.compile(regex)
    return {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
