"""Errors pushed by a test for the next requests touching one partition on one broker.

librdkafka's mock cluster and kfake let a test say "the next N produce requests
for this partition fail with NOT_LEADER_OR_FOLLOWER"; these are those queues,
one per (kind, partition), where kind names an API (``produce``, ``fetch``,
``list_offsets``, ...) and partition None means whole requests. The replica
manager takes the ``produce`` and ``fetch`` ones: one request error per client
Produce or Fetch, given to every partition of that request, else one error per
partition from the partition's queue. Either happens before it appends or
reads, so nothing happens to the log; replica fetches of followers are never
touched. The wire front end takes the other kinds (``server/error_responses.py``).
Queues live on the broker's replica manager: a crash forgets them, as it
forgets everything else in memory.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition

#: the kinds the replica manager takes itself: the two purgatory paths
KINDS = ("produce", "fetch")


class PushedErrors:
    """(kind, partition) -> errors still to hand out, oldest first."""

    def __init__(self) -> None:
        self._queues: dict[tuple[str, TopicPartition | None], collections.deque[Errors]] = {}

    def push(self, kind: str, tp: TopicPartition | None, errors: Iterable[Errors]) -> None:
        self._queues.setdefault((kind, tp), collections.deque()).extend(errors)

    def any(self) -> bool:
        """Whether any error is waiting (the cheap check on every request)."""
        return bool(self._queues)

    def take(self, kind: str, tp: TopicPartition | None) -> Errors | None:
        """The next pushed error for ``tp``'s (None: a whole request's) ``kind`` requests, or None."""
        if not self._queues:
            return None
        queue = self._queues.get((kind, tp))
        if not queue:
            return None
        error = queue.popleft()
        if not queue:
            del self._queues[kind, tp]
        return error

    def pending(self) -> dict[str, int]:
        """'kind tp' -> errors left (a read-out)."""
        return {f"{kind} {tp or '*'}": len(queue) for (kind, tp), queue in self._queues.items()}
