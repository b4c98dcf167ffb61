"""A scheduler process for the SIGKILL test: claim due records, "produce" each (RPUSH to a list, the
stand-in for the produce back), then ``done``. Run: python redis_worker.py PORT KEY SINK."""

from __future__ import annotations

import sys
import time

import redis

from minibroker.retry.redis_scheduler import RedisScheduler

if __name__ == "__main__":
    port, key, sink = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    client = redis.Redis(host="127.0.0.1", port=port)
    scheduler = RedisScheduler(client, key, batch=10)
    while True:
        batch = scheduler.claim_due(10**12)
        for record in batch:
            client.rpush(sink, record.key)
            time.sleep(0.002)  # a produce takes a while: the kill lands mid-batch
        scheduler.done(batch)
        if not batch:
            time.sleep(0.01)
