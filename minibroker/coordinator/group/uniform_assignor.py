"""The server-side ``uniform`` assignor (Kafka's ``UniformAssignor``, the default of KIP-848).

Every partition of a subscribed topic goes to one member subscribed to its topic;
the counts are as even as the subscriptions allow, and the previous target
assignment is kept as far as balance permits (sticky).

When every member subscribes to the same topics (Kafka's homogeneous case), with
``P`` partitions and ``M`` members each gets ``P // M`` and ``P % M`` of them one
more: the members keeping the most of their previous partitions get the extra ones
(ties: the smaller member id), each keeps its previous partitions up to its quota
(the lowest first), and the rest are dealt, in (topic, partition) order, to the
members below quota in member id order. In time O(P log P + M log M), so a group of
thousands of members is assigned at once.

Otherwise (different subscriptions):

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
    if subscriptions and len({frozenset(t) for t in subscriptions.values()}) == 1:
        return _homogeneous(subscriptions, partitions, previous)
    return _general(subscriptions, partitions, previous)


def _homogeneous(
    subscriptions: Subscriptions, partitions: dict[str, int], previous: Assignments
) -> Assignments:
    topics = next(iter(subscriptions.values()))
    valid = [(t, p) for t in sorted(partitions) if t in topics for p in range(partitions[t])]
    members = sorted(subscriptions)
    quota, extra = divmod(len(valid), len(members))
    valid_set = set(valid)
    kept: dict[str, list[tuple[str, int]]] = {}
    taken: set[tuple[str, int]] = set()
    for member in members:
        mine = sorted(tp for tp in previous.get(member, ()) if tp in valid_set and tp not in taken)
        kept[member] = mine
        taken.update(mine)
    by_kept = sorted(members, key=lambda m: (-len(kept[m]), m))
    target = {m: quota + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    result: Assignments = {m: set(kept[m][: target[m]]) for m in members}
    owned = {tp for parts in result.values() for tp in parts}
    free = iter(tp for tp in valid if tp not in owned)
    for member in members:
        for _ in range(target[member] - len(result[member])):
            result[member].add(next(free))
    return result


def _general(subscriptions: Subscriptions, partitions: dict[str, int], previous: Assignments) -> Assignments:
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
