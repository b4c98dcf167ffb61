"""A consumer group's target assignment (Kafka's ``TargetAssignmentBuilder``).

At each new group epoch the group's assignor maps every member to its target
partitions from the members' subscriptions (topic names, regex matches) and the
subscribed topics' partition counts, starting from the previous target (the
assignors are sticky where they can be). The assignor is the one most members ask
for (``group.remote.assignor``, ties to the name first in alphabetical order), else
the broker's default: the first of ``group.consumer.assignors`` (Kafka's
``ConsumerGroup.computePreferredServerAssignor``).
"""

from __future__ import annotations

from collections import Counter

from minibroker.coordinator.group import range_assignor, uniform_assignor
from minibroker.coordinator.group.consumer_group import (
    Assignment,
    ConsumerGroup,
    as_assignment,
    partitions_of,
    subscribed,
)

#: the server-side assignors by name
ASSIGNORS = {uniform_assignor.NAME: uniform_assignor.assign, range_assignor.NAME: range_assignor.assign}


def preferred_assignor(group: ConsumerGroup, default: str) -> str:
    counts = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if not counts:
        return default
    most = max(counts.values())
    return min(name for name, count in counts.items() if count == most)


def build(group: ConsumerGroup, assignor: str, topics: dict[str, int]) -> dict[str, Assignment]:
    """Member id -> new target assignment, for the members of ``group`` whose target ``assignor``
    changes (the others keep theirs)."""
    names = sorted(topics)
    subscriptions = {mid: subscribed(m, names) for mid, m in group.members.items()}
    wanted = {t for topics_ in subscriptions.values() for t in topics_}
    counts = {t: topics[t] for t in sorted(wanted)}
    previous = {mid: partitions_of(m.target) for mid, m in group.members.items()}
    result = ASSIGNORS[assignor](subscriptions, counts, previous)
    return {
        mid: as_assignment(result.get(mid, set()))
        for mid in group.members
        if result.get(mid, set()) != previous[mid]
    }
