"""The server-side ``range`` assignor (Kafka's ``RangeAssignor`` of KIP-848).

Topic by topic, the members subscribed to the topic, sorted by member id, get
contiguous ranges of its partitions: with ``n`` partitions and ``m`` members each
gets ``n // m`` and the first ``n % m`` one more. Members with the same
subscriptions therefore get the same partition numbers of co-partitioned topics.
Kafka's version also keeps a member's previous partitions within its quota; this
one recomputes the ranges (a documented deviation: more partitions may move).
"""

from __future__ import annotations

from minibroker.coordinator.group.consumer_group import Assignments, Subscriptions

NAME = "range"


def assign(subscriptions: Subscriptions, partitions: dict[str, int], previous: Assignments) -> Assignments:
    """Member id -> its partitions (``previous`` is not used)."""
    result: Assignments = {m: set() for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        quota, extra = divmod(partitions[topic], len(members))
        start = 0
        for i, member in enumerate(members):
            count = quota + (1 if i < extra else 0)
            result[member].update((topic, p) for p in range(start, start + count))
            start += count
    return result
