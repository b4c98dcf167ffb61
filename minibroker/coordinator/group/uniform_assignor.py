"""The server-side ``uniform`` assignor (Kafka's ``UniformAssignor``, the default of KIP-848).

Every partition of a subscribed topic goes to one member subscribed to its topic;
the counts are as even as the subscriptions allow, and the previous target
assignment is kept as far as balance permits (sticky):

1. each member keeps the partitions of its previous target it still subscribes to;
2. the unassigned partitions go, in (topic, partition) order, to the eligible member
   with the fewest partitions (ties: the smallest member id);
3. while a partition can move from a member to an eligible member holding at least
   two fewer, the highest such partition of the fullest member moves to the emptiest.

With equal subscriptions the counts differ by at most one. Kafka picks between an
optimized builder (equal subscriptions) and a general one; this one algorithm
covers both, with the same balance and stickiness goals (a documented deviation:
which member gets a given partition may differ from Kafka's choice).
"""

from __future__ import annotations

from minibroker.coordinator.group.consumer_group import Assignments, Subscriptions

NAME = "uniform"


def assign(subscriptions: Subscriptions, partitions: dict[str, int], previous: Assignments) -> Assignments:
    """Member id -> its partitions, for members subscribed to topics with ``partitions`` counts."""
    eligible: dict[tuple[str, int], list[str]] = {}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if members:
            for p in range(partitions[topic]):
                eligible[(topic, p)] = members
    result: Assignments = {m: set() for m in subscriptions}
    taken: set[tuple[str, int]] = set()
    for member in sorted(subscriptions):
        for tp in sorted(previous.get(member, ())):
            if tp in eligible and member in eligible[tp] and tp not in taken:
                result[member].add(tp)
                taken.add(tp)
    for tp in sorted(eligible):
        if tp not in taken:
            member = min(eligible[tp], key=lambda m: (len(result[m]), m))
            result[member].add(tp)
    moved = True
    while moved:
        moved = False
        for donor in sorted(result, key=lambda m: (-len(result[m]), m)):
            for tp in sorted(result[donor], reverse=True):
                takers = [m for m in eligible[tp] if len(result[m]) <= len(result[donor]) - 2]
                if takers:
                    taker = min(takers, key=lambda m: (len(result[m]), m))
                    result[donor].discard(tp)
                    result[taker].add(tp)
                    moved = True
                    break
            if moved:
                break
    return result
