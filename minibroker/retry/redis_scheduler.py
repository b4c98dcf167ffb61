"""The ``redis`` backend (seed 004): a sorted set scored by due time, claimed atomically by a Lua script.

``schedule`` is ZADD (member: the record as a one-record v2 batch, unique by its original offset and
attempt). ``claim_due`` runs one Lua script that moves the due members to ``<key>:inflight`` (scored by
the claim time): Redis runs a script alone, so two schedulers never claim one member. ``done`` ZREMs
them from ``<key>:inflight`` after the produce was acknowledged; ``recover`` puts back claims older than
a lease (a scheduler that died between claim and produce): at-least-once, never lost.
"""

from __future__ import annotations

from typing import Any

from minibroker.retry import headers as h

CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  redis.call('ZREM', KEYS[1], member)
  redis.call('ZADD', KEYS[2], ARGV[1], member)
end
return due
"""

RECOVER = """
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
for _, member in ipairs(stale) do
  redis.call('ZREM', KEYS[2], member)
  redis.call('ZADD', KEYS[1], ARGV[1], member)
end
return #stale
"""


class RedisScheduler:
    """Retry records in the sorted set ``key`` of a Redis server (redis-py client ``client``)."""

    name = "redis"

    def __init__(self, client: Any, key: str = "minibroker:retry", batch: int = 100) -> None:
        self.client, self.key, self.inflight, self.batch = client, key, f"{key}:inflight", batch
        self._claim = client.register_script(CLAIM)
        self._recover = client.register_script(RECOVER)

    def schedule(self, record: h.RetryRecord, due_ms: int) -> None:
        self.client.zadd(self.key, {h.encode([record]): due_ms})

    def claim_due(self, now_ms: int) -> list[h.RetryRecord]:
        members = self._claim(keys=[self.key, self.inflight], args=[now_ms, self.batch])
        return [record for member in members for record in h.decode(member)]

    def done(self, records: list[h.RetryRecord]) -> None:
        """Forget ``records`` (their produce was acknowledged)."""
        members = [h.encode([record]) for record in records]
        if members:
            self.client.zrem(self.inflight, *members)

    def recover(self, claimed_before_ms: int) -> int:
        """Put claims made before ``claimed_before_ms`` back as due now; how many."""
        return int(self._recover(keys=[self.key, self.inflight], args=[claimed_before_ms]))

    def next_due(self) -> int | None:
        head = self.client.zrange(self.key, 0, 0, withscores=True)
        return int(head[0][1]) if head else None

    def pending(self) -> int:
        return int(self.client.zcard(self.key)) + int(self.client.zcard(self.inflight))
