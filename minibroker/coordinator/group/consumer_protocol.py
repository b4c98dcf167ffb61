"""Kafka's consumer embedded protocol (v0) and the range and roundrobin assignors.

A consumer's JoinGroup metadata is a *subscription*: ``version int16, topics [string],
user_data bytes``; a SyncGroup assignment is ``version int16, [topic string,
partitions [int32]], user_data bytes`` (Kafka's ``ConsumerProtocol``, the first fields
of every version). Real clients in a group with the emulator's own consumers therefore
understand each other.

The assignors are computed by the group leader, as in the Java client:

- ``range`` (``RangeAssignor``): per topic, the members subscribed to it sorted by member
  id; with P partitions and C members, member i gets ``P // C`` partitions, one more for
  the first ``P % C`` members, in partition order;
- ``roundrobin`` (``RoundRobinAssignor``): every subscribed partition sorted by topic and
  partition, dealt to the members sorted by member id in turn, skipping members not
  subscribed to the partition's topic.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

ASSIGNORS = ("range", "roundrobin")

Assignment = dict[str, list[tuple[str, int]]]


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def encode_subscription(topics: list[str]) -> bytes:
    return (
        struct.pack(">h", 0)
        + struct.pack(">i", len(topics))
        + b"".join(map(_string, topics))
        + struct.pack(">i", -1)
    )


def encode_assignment(partitions: list[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = [struct.pack(">h", 0), struct.pack(">i", len(by_topic))]
    for topic, numbers in by_topic.items():
        out.append(_string(topic))
        out.append(struct.pack(">i", len(numbers)) + b"".join(struct.pack(">i", p) for p in numbers))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def topic_partitions(self) -> list[tuple[str, int]]:
        """An array of (topic, array of partitions): as (topic, partition) pairs."""
        out = []
        for _ in range(self.unpack(">i")):
            topic = self.string()
            out += [(topic, self.unpack(">i")) for _ in range(self.unpack(">i"))]
        return out

    def string(self) -> str:
        size = self.unpack(">h")
        text = self.data[self.pos : self.pos + size].decode()
        self.pos += size
        return text


def decode_subscription(data: bytes) -> list[str]:
    """The topics of a subscription; ValueError if the bytes are not one."""
    try:
        reader = _Reader(data)
        reader.unpack(">h")
        return [reader.string() for _ in range(reader.unpack(">i"))]
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"not a consumer subscription: {error}") from None


def decode_owned_partitions(data: bytes) -> list[tuple[str, int]]:
    """The partitions a subscription of version 1 or later says its member owns (a cooperative
    member's rejoin); none for version 0; ValueError if the bytes are not a subscription."""
    try:
        reader = _Reader(data)
        version = reader.unpack(">h")
        for _ in range(reader.unpack(">i")):
            reader.string()
        if version < 1:
            return []
        size = reader.unpack(">i")  # user data
        reader.pos += max(size, 0)
        return reader.topic_partitions()
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"not a consumer subscription: {error}") from None


def subscribed_topics(data: bytes) -> list[str]:
    """A member's topics; a subscription that does not decode (another client's bug) subscribes to none."""
    try:
        return decode_subscription(data)
    except ValueError:
        return []


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of an assignment (empty bytes: none)."""
    if not data:
        return []
    try:
        reader = _Reader(data)
        reader.unpack(">h")
        return reader.topic_partitions()
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"not a consumer assignment: {error}") from None


def range_assign(subscriptions: Mapping[str, list[str]], partitions: Callable[[str], int]) -> Assignment:
    assignment: Assignment = {member: [] for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        members = sorted(m for m, subscribed in subscriptions.items() if topic in subscribed)
        count = partitions(topic)
        per, extra = divmod(count, len(members))
        for i, member in enumerate(members):
            start = i * per + min(i, extra)
            size = per + (1 if i < extra else 0)
            assignment[member] += [(topic, p) for p in range(start, start + size)]
    return assignment


def roundrobin_assign(subscriptions: Mapping[str, list[str]], partitions: Callable[[str], int]) -> Assignment:
    assignment: Assignment = {member: [] for member in subscriptions}
    members = sorted(subscriptions)
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    turn = 0
    for topic in topics:
        for p in range(partitions(topic)):
            for _ in range(len(members)):
                member = members[turn % len(members)]
                turn += 1
                if topic in subscriptions[member]:
                    assignment[member].append((topic, p))
                    break
    return assignment


def assign(
    strategy: str, subscriptions: Mapping[str, list[str]], partitions: Callable[[str], int]
) -> Assignment:
    if strategy == "range":
        return range_assign(subscriptions, partitions)
    if strategy == "roundrobin":
        return roundrobin_assign(subscriptions, partitions)
    raise ValueError(f"unknown assignor {strategy!r}; expected one of {', '.join(ASSIGNORS)}")
