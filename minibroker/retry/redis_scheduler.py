"""The ``redis`` backend: a sorted set scored by due time, claimed atomically by a Lua script.

``schedule`` is a ZADD (member: the record packed by ``member``, unique by its original offset and
attempt). ``claim_due`` runs one Lua script that moves up to ``batch`` due members to ``<key>:inflight``
(scored by the claim time): Redis runs a script alone, so two schedulers never claim one member. ``done``
removes them from ``<key>:inflight`` after the produce was acknowledged and leaves a tombstone (the
member's SHA-1 in ``<key>:done``, scored by Redis's own clock, kept ``dedup_ms``); ``recover`` puts back
claims older than a lease (a scheduler that died between claim and produce): at-least-once, never lost.

Identity: a record is one entry per *identity*, ``retry.original.topic``/``partition``/``offset`` and
``retry.attempt`` (the record's SHA-1 when it lacks an original offset). ``<key>:ids`` maps the identity of
every member scheduled or in flight to its member; tombstones hold identities. So a duplicate of a
delivery (the batch in flight at a crash, delivered again) that fails again and is handed off again is
the same entry, not a new one: it is not scheduled while its twin is held and not within ``dedup_ms``
after its twin was delivered, and duplicates do not cascade through the attempts.

Invariant: a member is in at most one of ``key`` and ``<key>:inflight``; an identity that is scheduled,
in flight or was done within ``dedup_ms`` is not scheduled again (a retry topic read twice after a crash
or a rebalance does not deliver a record twice).

A Redis that restarts empty (no persistence) loses what it held without a word; the scheduler notices:
it keeps a marker, ``<key>:epoch``, and every claim reads it back. When it is gone (or another instance
replaced it after finding it gone), ``on_lost(held)`` is called once with the entries the set held at
the previous claim, and a new marker is written.

Every call may be made again after a lost reply (a Redis restart or a reset connection):
``schedule_many``, ``done`` and ``release`` are idempotent, and a ``claim_due`` whose reply was lost
leaves its members in flight until ``recover`` takes them back. Every call is one round trip:
``schedule_many`` sends its members in scripts of ``SCHEDULE_CHUNK``, pipelined.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from minibroker.retry import headers as h
from minibroker.retry.member import pack, unpack

#: KEYS: set, inflight, done, ids; ARGV: due, member, identity, ... -> how many were added
SCHEDULE = """
local added = 0
for i = 1, #ARGV, 3 do
  local member, identity = ARGV[i + 1], ARGV[i + 2]
  if redis.call('HEXISTS', KEYS[4], identity) == 0
     and not redis.call('ZSCORE', KEYS[2], member)
     and not redis.call('ZSCORE', KEYS[3], identity) then
    local new = redis.call('ZADD', KEYS[1], 'NX', ARGV[i], member)
    if new == 1 then redis.call('HSET', KEYS[4], identity, member) end
    added = added + new
  end
end
return added
"""

#: KEYS: set, inflight; ARGV: now, batch -> the claimed members
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return due end
redis.call('ZREM', KEYS[1], unpack(due))
local scored = {}
for i, member in ipairs(due) do
  scored[2 * i - 1] = ARGV[1]
  scored[2 * i] = member
end
redis.call('ZADD', KEYS[2], unpack(scored))
return due
"""

#: KEYS: inflight, done, set, ids; ARGV: dedup_ms, member, identity, ... -> how many were in flight. A
#: member that a ``recover`` put back into the set meanwhile (its claim outlived the lease, e.g. through
#: a Redis outage) was delivered all the same: it leaves the set too, so it is not delivered again.
DONE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = 0
local keep = tonumber(ARGV[1]) > 0
for i = 2, #ARGV, 2 do
  local member, identity = ARGV[i], ARGV[i + 1]
  removed = removed + redis.call('ZREM', KEYS[1], member)
  redis.call('ZREM', KEYS[3], member)
  redis.call('HDEL', KEYS[4], identity)
  if keep then redis.call('ZADD', KEYS[2], now, identity) end
end
if keep then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1])) end
return removed
"""

#: KEYS: inflight, set; ARGV: due, member, ... -> how many were put back. Only a member still in flight
#: goes back: a release sent again after a lost reply must not put back what another scheduler claimed.
RELEASE = """
local released = 0
for i = 2, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    released = released + redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i])
  end
end
return released
"""

#: KEYS: set, inflight; ARGV: claimed before, due -> how many were put back
RECOVER = """
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
for _, member in ipairs(stale) do
  redis.call('ZREM', KEYS[2], member)
  redis.call('ZADD', KEYS[1], ARGV[2], member)
end
return #stale
"""

#: members per SCHEDULE / DONE script call (Lua's unpack and Redis's argument lists stay small)
SCHEDULE_CHUNK = 1000


def identity(record: h.RetryRecord, member: bytes) -> str:
    """One entry per original record and attempt; the member's SHA-1 (as Redis's ``sha1hex``) for a
    record that does not say where it was first consumed."""
    fields = record.headers
    if h.ORIGINAL_OFFSET in fields and h.ORIGINAL_PARTITION in fields:
        origin = (fields.get(h.ORIGINAL_TOPIC, ""), fields[h.ORIGINAL_PARTITION], fields[h.ORIGINAL_OFFSET])
        return "{}-{}@{}#{}".format(*origin, record.attempt)
    return hashlib.sha1(member).hexdigest()


class RedisScheduler:
    """Retry records in the sorted set ``key`` of a Redis server (redis-py client ``client``).

    ``batch``: the most members one ``claim_due`` takes; ``dedup_ms``: how long a done member's
    tombstone keeps it from being scheduled again (0: no tombstones).
    """

    name = "redis"

    def __init__(
        self, client: Any, key: str = "minibroker:retry", batch: int = 100, dedup_ms: int = 3_600_000
    ) -> None:
        self.client, self.key, self.batch, self.dedup_ms = client, key, batch, dedup_ms
        self.inflight, self.tombstones = f"{key}:inflight", f"{key}:done"
        self.ids, self.marker = f"{key}:ids", f"{key}:epoch"
        #: called with the entries held at the previous claim when Redis came back without them
        self.on_lost: Callable[[int], None] | None = None
        self._epoch: bytes | None = None
        self._held = 0
        self._schedule = client.register_script(SCHEDULE)
        self._claim = client.register_script(CLAIM)
        self._done = client.register_script(DONE)
        self._release = client.register_script(RELEASE)
        self._recover = client.register_script(RECOVER)
        #: id(claimed record) -> (the record, its member) until done() or release(): no re-encoding
        self._members: dict[int, tuple[h.RetryRecord, bytes]] = {}

    def schedule(self, record: h.RetryRecord, due_ms: int) -> None:
        self.schedule_many([(record, due_ms)])

    def schedule_many(self, entries: Iterable[tuple[h.RetryRecord, int]]) -> int:
        """Schedule every (record, due) in one pipelined round trip; how many were new."""
        args: list[Any] = []
        for record, due_ms in entries:
            member = pack(record)
            args += (due_ms, member, identity(record, member))
        if not args:
            return 0
        keys = [self.key, self.inflight, self.tombstones, self.ids]
        pipe = self.client.pipeline(transaction=False)
        step = 3 * SCHEDULE_CHUNK
        for start in range(0, len(args), step):
            self._schedule(keys=keys, args=args[start : start + step], client=pipe)
        return sum(int(added) for added in pipe.execute())

    def claim_due(self, now_ms: int) -> list[h.RetryRecord]:
        """Claim up to ``batch`` due records; also read the marker back (one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        self._claim(keys=[self.key, self.inflight], args=[now_ms, self.batch], client=pipe)
        pipe.get(self.marker)
        pipe.zcard(self.key)
        pipe.zcard(self.inflight)
        members, epoch, held, inflight = pipe.execute()
        self._check_epoch(epoch, held + inflight)
        claimed = []
        for member in members:
            record = unpack(member)
            self._members[id(record)] = (record, member)  # done() and release() need no re-encoding
            claimed.append(record)
        return claimed

    def _check_epoch(self, epoch: bytes | None, held: int) -> None:
        """Write the marker if there is none; ``on_lost`` when the one this scheduler knew is gone."""
        if epoch is None or epoch != self._epoch:
            if self._epoch is not None and self.on_lost is not None:
                self.on_lost(self._held)
            self.client.set(self.marker, uuid.uuid4().hex.encode(), nx=True)
            epoch = self.client.get(self.marker)
            self._epoch = epoch
        self._held = held

    def _members_of(self, records: list[h.RetryRecord]) -> list[bytes]:
        """The members of claimed ``records`` (kept until ``_forget``: a call that failed is made again)."""
        out = []
        for record in records:
            held, member = self._members.get(id(record), (None, b""))
            out.append(member if held is record else pack(record))
        return out

    def _forget(self, records: list[h.RetryRecord]) -> None:
        for record in records:
            self._members.pop(id(record), None)

    def done(self, records: list[h.RetryRecord]) -> None:
        """Forget ``records`` (their produce was acknowledged), leaving tombstones. Safe to repeat."""
        members = self._members_of(records)
        if not members:
            return
        pairs: list[Any] = []
        for record, member in zip(records, members, strict=True):
            pairs += (member, identity(record, member))
        pipe = self.client.pipeline(transaction=False)
        keys = [self.inflight, self.tombstones, self.key, self.ids]
        for start in range(0, len(pairs), 2 * SCHEDULE_CHUNK):
            chunk = pairs[start : start + 2 * SCHEDULE_CHUNK]
            self._done(keys=keys, args=[self.dedup_ms, *chunk], client=pipe)
        pipe.execute()
        self._forget(records)

    def release(self, records: list[h.RetryRecord], due_ms: int) -> None:
        """Put claimed ``records`` whose produce failed back as due at ``due_ms``. Safe to repeat."""
        members = self._members_of(records)
        if members:
            pipe = self.client.pipeline(transaction=False)
            for start in range(0, len(members), SCHEDULE_CHUNK):
                chunk = members[start : start + SCHEDULE_CHUNK]
                self._release(keys=[self.inflight, self.key], args=[due_ms, *chunk], client=pipe)
            pipe.execute()
        self._forget(records)

    def recover(self, claimed_before_ms: int, due_ms: int | None = None) -> int:
        """Put claims made before ``claimed_before_ms`` back as due at ``due_ms`` (default: that time)."""
        due = claimed_before_ms if due_ms is None else due_ms
        return int(self._recover(keys=[self.key, self.inflight], args=[claimed_before_ms, due]))

    def next_due(self) -> int | None:
        head = self.client.zrange(self.key, 0, 0, withscores=True)
        return int(head[0][1]) if head else None

    def pending(self) -> int:
        return int(self.client.zcard(self.key)) + int(self.client.zcard(self.inflight))
