"""Benchmark the retry scheduler's backends: the in-process ``wheel`` and the ``redis`` sorted set.

Usage::

    python tools/retry_bench.py                    # wheel and redis at 10,000 and 1,000,000 pending
    python tools/retry_bench.py --counts 10000 --json
    python tools/retry_bench.py --quick            # 2,000 pending (a CI smoke run, seconds)
    python tools/retry_bench.py --redis-url redis://127.0.0.1:6379/0   # an existing server (flushed key)

The scheduler core, through the protocol the retry service drives (``schedule_many``/``schedule``,
``claim_due``, ``done``), without Kafka: a "delivery" is the claim and the ``done`` that follows the
produce. Without ``--redis-url`` the tool starts a ``redis-server`` of its own on a free loopback port
(no persistence, a temporary directory) and stops it. Real time, wall clock; each (backend, N) runs on
a fresh scheduler (redis: a fresh key). Two phases per (backend, N):

- **drain**: N records due over 1..1000 ms, claimed from 1000 ms on (all due): the time to claim and
  finish every one, in claims of ``--batch`` (redis: one Lua script per claim, one pipelined script
  per ``done``): records per second.
- **lateness**: N records pending, of which ``--paced`` (10,000, or N if smaller) fall due evenly over
  ``--window-ms`` (2 s: 5,000 records/s offered) while the rest are due an hour later; a loop like
  the service's (sleep until the next due time, at most 1 ms; claim; done) delivers the paced ones.
  Lateness = the time ``done`` returned minus the record's due time, p50/p99/max in ms. The tool
  fails if a claim returns a record whose due time is after the claim's ``now``.

Loading (``schedule``) is timed too. The ratio line divides the wheel's figure by the redis figure.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.retry import headers as h
from minibroker.retry.scheduler import WheelScheduler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("rows.[backend,pending].load_per_s", "higher"),
    Figure("rows.[backend,pending].drain_per_s", "higher"),
    Figure("rows.[backend,pending].late_p99_ms", "lower"),
]

HOUR_MS = 3_600_000
VALUE = bytes(16)


def _records(count: int) -> list[h.RetryRecord]:
    return [
        h.RetryRecord(
            f"k{i}".encode(),
            VALUE,
            1_000,
            {h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: 0, h.ORIGINAL_OFFSET: i, h.ATTEMPT: 1},
        )
        for i in range(count)
    ]


def _ms() -> float:
    return time.perf_counter() * 1000


class _Clock:
    """Scheduler time in integer ms: wall time shifted so that 0 is when ``start`` was called."""

    def start(self) -> None:
        self.zero = _ms()

    def now(self) -> int:
        return int(_ms() - self.zero)


def _load(scheduler, entries: list[tuple[h.RetryRecord, int]]) -> float:
    """Schedule ``entries``; seconds taken."""
    began = time.perf_counter()
    if hasattr(scheduler, "schedule_many"):
        for start in range(0, len(entries), 10_000):
            scheduler.schedule_many(entries[start : start + 10_000])
    else:
        for record, due in entries:
            scheduler.schedule(record, due)
    return time.perf_counter() - began


def _drain(make, records: list[h.RetryRecord]) -> dict:
    scheduler = make(0)
    load_s = _load(scheduler, [(r, 1 + i % 1000) for i, r in enumerate(records)])  # 1000 due times
    began = time.perf_counter()
    finished = 0
    while claimed := scheduler.claim_due(1000):
        scheduler.done(claimed)
        finished += len(claimed)
    seconds = time.perf_counter() - began
    assert finished == len(records) and scheduler.pending() == 0, (finished, scheduler.pending())
    return {"load_per_s": len(records) / load_s, "drain_per_s": finished / seconds}


def _percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def _lateness(make, records: list[h.RetryRecord], paced: int, window_ms: int) -> dict:
    clock = _Clock()
    lead_ms = 500  # the paced records start falling due this long after the loop starts
    due = [lead_ms + (i * window_ms) // paced for i in range(paced)]  # by ORIGINAL_OFFSET
    entries = [(r, due[i]) for i, r in enumerate(records[:paced])]
    entries += [(r, HOUR_MS + i) for i, r in enumerate(records[paced:])]
    scheduler = make(0)
    _load(scheduler, entries)
    pending = scheduler.pending()
    late: list[float] = []
    clock.start()
    while len(late) < paced:
        now = clock.now()
        claimed = scheduler.claim_due(now)
        if claimed:
            early = [r for r in claimed if due[r.headers[h.ORIGINAL_OFFSET]] > now]
            assert not early, f"{len(early)} records claimed before their due time"
            scheduler.done(claimed)
            finished = _ms() - clock.zero
            late += [finished - due[r.headers[h.ORIGINAL_OFFSET]] for r in claimed]
            continue
        head = scheduler.next_due()
        wait = 1 if head is None else min(max(head - clock.now(), 0), 1)
        time.sleep(wait / 1000)
    late.sort()
    return {
        "pending": pending,
        "paced": paced,
        "offered_per_s": paced * 1000 / window_ms,
        "late_p50_ms": _percentile(late, 0.50),
        "late_p99_ms": _percentile(late, 0.99),
        "late_max_ms": late[-1],
    }


@contextmanager
def _redis_server(url: str | None):
    import redis

    if url is not None:
        yield redis.Redis.from_url(url)
        return
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("retry_bench: redis-server is not installed (or pass --redis-url)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp]
        process = subprocess.Popen([server, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"retry_bench: redis-server did not start on port {port}") from None
                    time.sleep(0.05)
            yield client
        finally:
            client.close()
            process.terminate()
            process.wait(timeout=10)


def run(
    counts: list[int],
    batch: int,
    paced: int,
    window_ms: int,
    redis_url: str | None,
    backends: tuple[str, ...] = ("wheel", "redis"),
) -> list[dict]:
    from minibroker.retry.redis_scheduler import RedisScheduler

    rows = []
    with _redis_server(redis_url) as client:
        keys = iter(range(10**9))

        def redis_scheduler(start_ms: int) -> RedisScheduler:
            key = f"retry-bench:{os.getpid()}:{next(keys)}"
            return RedisScheduler(client, key, batch=batch)

        def wheel_scheduler(start_ms: int) -> WheelScheduler:
            return BatchedWheel(start_ms, batch)

        for count in counts:
            records = _records(count)
            makers = {"wheel": wheel_scheduler, "redis": redis_scheduler}
            for name in backends:
                make = makers[name]
                gc.collect()
                row = {"backend": name, "pending": count, **_drain(make, records)}
                gc.collect()
                row.update(_lateness(make, records, min(paced, count), window_ms))
                rows.append(row)
                print(_format(row), file=sys.stderr, flush=True)
            client.flushdb()
    return rows


class BatchedWheel(WheelScheduler):
    """The wheel, handing out at most ``batch`` records per claim (as the service claims them)."""

    def __init__(self, start_ms: int, batch: int) -> None:
        super().__init__(start_ms)
        self.batch = batch
        self._due: deque = deque()

    def claim_due(self, now_ms: int) -> list:
        if len(self._due) < self.batch:
            self._due.extend(super().claim_due(now_ms))
        due = self._due
        return [due.popleft() for _ in range(min(self.batch, len(due)))]

    def pending(self) -> int:
        return super().pending() + len(self._due)


def _format(row: dict) -> str:
    return (
        f"{row['backend']:6} {row['pending']:>9,} pending: load {row['load_per_s']:>10,.0f}/s, "
        f"drain {row['drain_per_s']:>10,.0f} records/s; lateness at {row['offered_per_s']:,.0f}/s: "
        f"p50 {row['late_p50_ms']:.1f} ms, p99 {row['late_p99_ms']:.1f} ms, max {row['late_max_ms']:.1f} ms"
    )


def _ratios(rows: list[dict]) -> list[str]:
    lines = []
    for count in sorted({r["pending"] for r in rows}):
        pair = {r["backend"]: r for r in rows if r["pending"] == count}
        if len(pair) == 2:
            wheel, redis = pair["wheel"], pair["redis"]
            lines.append(
                f"{count:,} pending: wheel / redis = {wheel['drain_per_s'] / redis['drain_per_s']:.1f}x "
                f"records/s, {wheel['load_per_s'] / redis['load_per_s']:.1f}x load; "
                f"p99 lateness {wheel['late_p99_ms']:.1f} vs {redis['late_p99_ms']:.1f} ms"
            )
    return lines


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}") from None
    if not counts or any(not 1 <= c <= 10_000_000 for c in counts):
        raise argparse.ArgumentTypeError(f"expected counts in 1..10,000,000, got {text!r}")
    return counts


def _backends(text: str) -> tuple[str, ...]:
    names = tuple(text.split(","))
    if not names or any(n not in ("wheel", "redis") for n in names):
        raise argparse.ArgumentTypeError(f"expected backends among wheel, redis, got {text!r}")
    return names


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=_counts, default=[10_000, 1_000_000], help="pending records")
    parser.add_argument("--batch", type=_positive, default=1000, help="records per claim (default 1000)")
    parser.add_argument("--paced", type=_positive, default=10_000, help="records timed for lateness")
    parser.add_argument("--window-ms", type=_positive, default=2000, help="the paced records' spread")
    parser.add_argument("--backends", type=_backends, default=("wheel", "redis"), help="wheel,redis")
    parser.add_argument("--quick", action="store_true", help="2,000 pending, 1,000 paced (a smoke run)")
    parser.add_argument("--redis-url", help="use this Redis server instead of starting one")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the redis-server it started is stopped
    counts, paced = ([2_000], 1_000) if args.quick else (args.counts, args.paced)
    rows = run(counts, args.batch, paced, args.window_ms, args.redis_url, args.backends)
    if args.json:
        print(json.dumps({"rows": rows, "load_average": os.getloadavg()}, indent=2))
    else:
        for row in rows:
            print(_format(row))
        for line in _ratios(rows):
            print(line)
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
