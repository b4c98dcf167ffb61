"""SimpleAssignor: the share groups' server-side assignor (KIP-932).

Kafka's class: https://github.com/apache/kafka/blob/trunk/group-coordinator/group-coordinator-api/src/main/java/org/apache/kafka/coordinator/group/api/assignor/SimpleAssignor.java
(the ``simple`` assignor). Per topic, over the members subscribed to it (sorted by id) and its partitions:
with at least as many members as partitions, member i gets partition i mod P, so a partition is shared by
several members; with fewer members, partition j goes to member j mod M. Every partition of a subscribed
topic is assigned to at least one member; no member gets more than one partition more than another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def assign(
    subscriptions: Mapping[str, tuple[str, ...]], partitions_of: Callable[[str], int]
) -> dict[str, dict[str, tuple[int, ...]]]:
    """member -> topic -> partitions, for ``subscriptions`` (member -> subscribed topics)."""
    result: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    topics = sorted({topic for wanted in subscriptions.values() for topic in wanted})
    for topic in topics:
        count = partitions_of(topic)
        members = sorted(m for m, wanted in subscriptions.items() if topic in wanted)
        if count <= 0 or not members:
            continue
        if len(members) >= count:
            for i, member in enumerate(members):
                result[member].setdefault(topic, []).append(i % count)
        else:
            for partition in range(count):
                result[members[partition % len(members)]].setdefault(topic, []).append(partition)
    return {m: {t: tuple(sorted(ps)) for t, ps in topics_.items()} for m, topics_ in result.items()}
