"""The ``redis`` backend: a sorted set scored by due time, claimed atomically by a Lua script.

``schedule`` is a ZADD (member: the record packed by ``member``, unique by its original offset and
attempt). ``claim_due`` runs one Lua script that moves up to ``batch`` due members to ``<key>:inflight``
(scored by the claim time): Redis runs a script alone, so two schedulers never claim one member. ``done``
removes them from ``<key>:inflight`` after the produce was acknowledged and leaves a tombstone (the
member's SHA-1 in ``<key>:done``, scored by Redis's own clock, kept ``dedup_ms``); ``recover`` puts back
claims older than a lease (a scheduler that died between claim and produce): at-least-once, never lost.

Invariant: a member is in at most one of ``key`` and ``<key>:inflight``; a member that is in flight or was
done within ``dedup_ms`` is not scheduled again (a retry topic read twice after a crash or a rebalance
does not deliver a record twice). Every call may be made again after a lost reply (a Redis restart or a
reset connection): ``schedule_many``, ``done`` and ``release`` are idempotent, and a ``claim_due`` whose
reply was lost leaves its members in flight until ``recover`` takes them back. Every call is one round
trip: ``schedule_many`` sends its members in scripts of ``SCHEDULE_CHUNK``, pipelined.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from minibroker.retry import headers as h
from minibroker.retry.member import pack, unpack

#: KEYS: set, inflight, done; ARGV: due, member, due, member, ... -> how many were added
SCHEDULE = """
local added = 0
for i = 1, #ARGV, 2 do
  local member = ARGV[i + 1]
  if not redis.call('ZSCORE', KEYS[2], member)
     and not redis.call('ZSCORE', KEYS[3], redis.sha1hex(member)) then
    added = added + redis.call('ZADD', KEYS[1], 'NX', ARGV[i], member)
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

#: KEYS: inflight, done, set; ARGV: dedup_ms, member, ... -> how many were in flight. A member that a
#: ``recover`` put back into the set meanwhile (its claim outlived the lease, e.g. through a Redis
#: outage) was delivered all the same: it leaves the set too, so it is not delivered again.
DONE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = redis.call('ZREM', KEYS[1], unpack(ARGV, 2))
redis.call('ZREM', KEYS[3], unpack(ARGV, 2))
if tonumber(ARGV[1]) > 0 then
  local scored = {}
  for i = 2, #ARGV do
    scored[2 * i - 3] = now
    scored[2 * i - 2] = redis.sha1hex(ARGV[i])
  end
  redis.call('ZADD', KEYS[2], unpack(scored))
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
end
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
            args += (due_ms, pack(record))
        if not args:
            return 0
        keys = [self.key, self.inflight, self.tombstones]
        pipe = self.client.pipeline(transaction=False)
        step = 2 * SCHEDULE_CHUNK
        for start in range(0, len(args), step):
            self._schedule(keys=keys, args=args[start : start + step], client=pipe)
        return sum(int(added) for added in pipe.execute())

    def claim_due(self, now_ms: int) -> list[h.RetryRecord]:
        members = self._claim(keys=[self.key, self.inflight], args=[now_ms, self.batch])
        claimed = []
        for member in members:
            record = unpack(member)
            self._members[id(record)] = (record, member)  # done() and release() need no re-encoding
            claimed.append(record)
        return claimed

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
        pipe = self.client.pipeline(transaction=False)
        keys = [self.inflight, self.tombstones, self.key]
        for start in range(0, len(members), SCHEDULE_CHUNK):
            chunk = members[start : start + SCHEDULE_CHUNK]
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
