"""A redis scheduler process killed with SIGKILL mid-batch, then a survivor: nothing lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from minibroker.retry import headers as h
from minibroker.retry.redis_scheduler import RedisScheduler

WORKER = Path(__file__).with_name("redis_worker.py")


def test_sigkill_mid_batch_loses_nothing(redis_client):
    port = redis_client.connection_pool.connection_kwargs["port"]
    total, batch = 500, 10
    feeder = RedisScheduler(redis_client, "crash", batch=batch)
    for i in range(total):
        feeder.schedule(h.RetryRecord(str(i).encode(), b"v", 0, {h.ORIGINAL_OFFSET: i}), i)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    worker = subprocess.Popen([sys.executable, str(WORKER), str(port), "crash", "sink"], env=env)
    try:
        deadline = time.monotonic() + 60  # generous: the machine is shared
        while redis_client.llen("sink") < 105 and time.monotonic() < deadline:
            time.sleep(0.005)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    before = redis_client.llen("sink")
    assert 105 <= before < total
    in_flight = redis_client.zcard("crash:inflight")
    # killed mid-batch: at most one claimed batch not done (0 only if the kill fell between done and claim)
    assert 0 <= in_flight <= batch
    survivor = RedisScheduler(redis_client, "crash", batch=batch)
    assert survivor.recover(claimed_before_ms=10**12) == in_flight
    while records := survivor.claim_due(10**12):
        for record in records:
            redis_client.rpush("sink", record.key)
        survivor.done(records)
    delivered = [k.decode() for k in redis_client.lrange("sink", 0, -1)]
    assert set(delivered) == {str(i) for i in range(total)}  # nothing lost
    duplicates = len(delivered) - total
    # the duplicate window: the killed batch's records already produced before the kill, at most one batch
    assert 0 <= duplicates <= in_flight
    print(f"killed at {before} delivered, {in_flight} in flight, {duplicates} duplicates")
    assert survivor.pending() == 0
