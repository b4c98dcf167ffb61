"""ShareGroup and its members, as the group coordinator keeps them (KIP-932).

Kafka's classes: https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/share/ShareGroup.java
and ``ShareGroupMember``. The group epoch rises whenever membership, a subscription or the partitions of a
subscribed topic change; the simple assignor then runs at once and the assignment epoch follows it. A
member takes its new target assignment, and the assignment epoch as its member epoch, at its next
heartbeat (share groups revoke nothing: a partition may be shared, so no handshake is needed); it keeps its
previous epoch, which the coordinator still accepts (the answer that raised it may have been lost).
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] = ()
    assignment: dict[str, tuple[int, ...]] = attrs.field(factory=dict)


@attrs.define(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = attrs.field(factory=dict)
    #: member -> topic -> partitions, the simple assignor's result at ``assignment_epoch``
    target: dict[str, dict[str, tuple[int, ...]]] = attrs.field(factory=dict)
    #: topics the group has share-partition state on: every topic a member subscribed to or whose offsets
    #: were altered, until its offsets are deleted (Kafka's share-group state partition metadata)
    topics: set[str] = attrs.field(factory=set)

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty without members, else Stable."""
        return "Stable" if self.members else "Empty"
