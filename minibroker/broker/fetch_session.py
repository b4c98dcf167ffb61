"""Fetch sessions (KIP-227): a broker's session cache and what each session remembers.

A fetch session is a client's partition list, kept by the broker so the client
can send only what changed (an *incremental* fetch) and get back only the
partitions with news. Numbers are Kafka's:

- session id 0 (``INVALID_SESSION_ID``) means no session; epoch 0
  (``INITIAL_EPOCH``) asks for a new one, -1 (``FINAL_EPOCH``) for none; a new
  session's epoch is 1 and each incremental fetch moves it on by one
  (``next_epoch``: after 2**31-1 comes 1; -1 stays -1).
- ``FetchSessionCache`` holds at most ``max_entries`` sessions
  (``max.incremental.fetch.session.cache.slots``). When it is full a new
  session may take the slot of: first the least recently used session if it
  was unused for more than ``eviction_ms`` (120 s, Kafka's
  MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS); otherwise the least valuable
  evictable session, if the newcomer is worth at least as much. Value orders by
  (privileged, partition count, id): a follower's session beats a consumer's, a
  bigger session a smaller one. A consumer (unprivileged) may evict only
  sessions created more than ``eviction_ms`` ago; a follower (privileged) also
  any unprivileged session. Which sessions are evictable is decided when a
  session is last touched (created or used), as in Kafka. Otherwise no session
  is created and the client is answered with session id 0.
- ``CachedPartition.must_respond``: an incremental answer carries a partition
  only if it has records, an error, or a changed high watermark or log start
  offset; an error also resets the cached HW to -1 so the partition is sent
  again once the error clears.

Pure data (no trio): time is passed in as integer ms; session ids come from a
``random.Random`` the caller seeds, so a run is reproducible. Deviation: Kafka
3.8+ splits the cache into shards by session id; this is one unsharded cache
(the rules above per shard are the same).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import attrs

from minibroker.common.messages import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: a session unused this long may be evicted by anyone; a younger one only under the rules above
EVICTION_MS = 120_000
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@attrs.define(slots=True)
class CachedPartition:
    """What the session remembers of one partition: the client's request and the last answer sent."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_respond(self, has_records: bool, error: int, high_watermark: int, log_start_offset: int) -> bool:
        """Whether an incremental answer carries this partition; remembers what it sends."""
        respond = has_records
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.log_start_offset != log_start_offset:
            respond = True
            self.log_start_offset = log_start_offset
        if error:
            self.high_watermark = -1
            respond = True
        return respond


@attrs.define(slots=True, eq=False)
class FetchSession:
    """One client's session: ``partitions`` in the order answers consider them."""

    id: int
    privileged: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    partitions: dict[TopicPartition, CachedPartition] = attrs.Factory(dict)
    #: fixed by ``FetchSessionCache.touch``: which newcomers may evict the session
    evictable_by_privileged: bool = False
    evictable_by_all: bool = False

    @property
    def value(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey order: a session with a smaller value is evicted first."""
        return (self.privileged, len(self.partitions), self.id)

    def update(
        self, changed: Mapping[TopicPartition, CachedPartition], forgotten: Iterable[TopicPartition]
    ) -> None:
        """An incremental request: add or update ``changed`` (keeping cached answers), drop ``forgotten``."""
        for tp, request in changed.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = request
            else:
                cached.fetch_offset = request.fetch_offset
                cached.max_bytes = request.max_bytes
                cached.leader_epoch = request.leader_epoch
        for tp in forgotten:
            self.partitions.pop(tp, None)

    def move_to_end(self, tp: TopicPartition) -> None:
        """A partition that returned records goes last, so the others get their turn (Kafka's fairness)."""
        self.partitions[tp] = self.partitions.pop(tp)


class FetchSessionCache:
    """At most ``max_entries`` sessions of one broker, evicted by Kafka's rules (module docstring)."""

    def __init__(self, max_entries: int, seed: int = 0, eviction_ms: int = EVICTION_MS) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        #: sessions evicted to make room (Kafka's IncrementalFetchSessionEvictionsPerSec, as a count)
        self.evictions = 0
        self._random = random.Random(seed)

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def num_partitions(self) -> int:
        """Partitions cached over all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(s.partitions) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def maybe_create(
        self, now_ms: int, privileged: bool, partitions: dict[TopicPartition, CachedPartition]
    ) -> int:
        """A new session holding ``partitions`` and its id, or ``INVALID_SESSION_ID`` if there is no room."""
        full = len(self.sessions) >= self.max_entries
        if full and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = self._random.randint(1, _MAX_EPOCH)
        session = FetchSession(session_id, privileged, now_ms, now_ms, partitions=partitions)
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        return session_id

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used at ``now_ms``: it is the most recently used, and may have become evictable."""
        session.last_used_ms = now_ms
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a session of ``size`` partitions, if Kafka's rules allow it."""
        if not self.sessions:
            return False
        least_recent = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            victim = least_recent
        else:
            candidates = [
                s
                for s in self.sessions.values()
                if (s.evictable_by_privileged if privileged else s.evictable_by_all)
            ]
            if not candidates:
                return False
            victim = min(candidates, key=lambda s: s.value)
            if (privileged, size, 0) < victim.value:
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True
