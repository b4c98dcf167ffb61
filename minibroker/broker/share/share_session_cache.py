"""ShareSessionCache: the share sessions of one broker, one per (group, member) (KIP-932).

Kafka's class: https://github.com/apache/kafka/blob/trunk/server/src/main/java/org/apache/kafka/server/share/session/ShareSessionCache.java
A ShareFetch with epoch 0 opens a session (replacing the member's old one), listing the partitions it
fetches; every later ShareFetch or ShareAcknowledge carries the session's next epoch (it rises by one per
request), may add partitions and forget some; epoch -1 closes the session. An epoch other than the expected
one is INVALID_SHARE_SESSION_EPOCH; a non-zero epoch without a session SHARE_SESSION_NOT_FOUND.
"""

from __future__ import annotations

import attrs

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition

OPEN_EPOCH = 0
CLOSE_EPOCH = -1


@attrs.define(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: list[TopicPartition] = attrs.field(factory=list)


class ShareSessionCache:
    """Sessions keyed by (group, member)."""

    def __init__(self) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def check(self, group_id: str, member_id: str, epoch: int) -> tuple[Errors, ShareSession | None]:
        """The session a request with ``epoch`` continues (NONE), or why it cannot."""
        session = self.sessions.get((group_id, member_id))
        if epoch == OPEN_EPOCH:
            return Errors.NONE, None
        if session is None:
            return Errors.SHARE_SESSION_NOT_FOUND, None
        if epoch != CLOSE_EPOCH and epoch != session.epoch:
            return Errors.INVALID_SHARE_SESSION_EPOCH, session
        return Errors.NONE, session

    def open(self, group_id: str, member_id: str, partitions: list[TopicPartition]) -> ShareSession:
        session = ShareSession(group_id, member_id, 1, list(dict.fromkeys(partitions)))
        self.sessions[(group_id, member_id)] = session
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)
