"""Benchmark the delayed-message designs: delay levels, the file wheel, and the in-memory SystemTimer.

Usage::

    python tools/delay_bench.py              # every design at 1,000,000 and 100,000 messages
    python tools/delay_bench.py --quick      # 20,000 / 2,000 / 2,000 (a CI smoke run, seconds)
    python tools/delay_bench.py --designs wheel --counts 100000,1000000 --json
    python tools/delay_bench.py --serve --rate 5000 --seconds 10   # real time, through minibroker serve

Workload: N messages sent at virtual time 0, delays uniform in [1 s, 2 h] (``random.Random(--seed)``),
each with a 16-byte value; everything runs in virtual integer-ms time (nothing sleeps).

- ``timer``: every message is a task on Kafka's SystemTimer (tick 1 ms, 20 buckets), held in memory
  until it fires; the harness jumps the clock to ``next_expiration()`` until all have fired.
- ``wheel``: the file wheel (7200 slots x 1000 ms, window 60 slots) on real files in a temporary
  directory: each message is one append (one flushed write), then every tick fires in turn: its slot
  file is read, rolled messages re-appended, the due ones "forwarded" (counted) and marked done, the
  files deleted. No cluster: the wheel alone.
- ``wheel-one-slot``: the same, with every delay moved into the last second of the two hours, so
  every message lands in one slot: firing streams that slot's file (1 MiB blocks, batches of 100),
  so its memory does not grow with the slot.
- ``levels``: the whole design on the emulated cluster (one broker, replication 1, acks=1): each
  message is a ``Producer.send(..., delay_ms=...)`` to its level topic, the DelayService fetches,
  holds (at most ``delay.service.max.held.per.partition`` = 10,000 per level), forwards and commits.
  Its memory includes what the emulated broker keeps in memory where Kafka keeps it on disk: the
  level topics' and the real topic's logs (every record, encoded). The harness clears the cluster's
  request table (the scenario runner's record of every request) as it goes.

``--serve`` measures real time instead, for each of ``--designs wheel,levels`` (default both), each in a
fresh ``minibroker serve`` subprocess (three brokers, ``orders`` with replication 3): the wheel with
``delay.wheel.tick.ms`` = ``--tick-ms`` (100), the levels with one level of ``--delay-ms`` (2000, so no
rounding) and ``delay.service.poll.ms`` = ``--tick-ms``. One confluent-kafka producer (acks=all,
``linger.ms`` 5, batching) first sends ``--hold`` messages (20,000) due in an hour and waits until the
server is idle: the server's RSS after them minus before, divided by their count, is
``bytes_per_held_message``, and the share of a CPU it uses in the next 2 s with them held (ticks, polls:
what holding costs while nothing is due) is ``idle_cpu_percent_while_held``; the RSS after the run
(idle, past a purge interval) minus the RSS with them held, divided by the messages sent, is
``bytes_per_delivered_message`` (``orders`` keeps every delivered record, on each of its 3 replicas),
and ``delay_topic_offsets`` are the delay topic's log start and end offsets then (``__delay_wheel`` or
the level's: what the purge of committed records left). Then it sends ``--rate`` messages per second for
``--seconds`` to ``__delay_wheel`` (with ``delay.due.ms``) or to the level's topic, each delayed
``--delay-ms``, while a confluent-kafka consumer in a thread of the same process reads ``orders``.
Lateness is receive time minus (send time + delay), both on that process's monotonic clock; it reports
p50 / p99 / max, messages sent and delivered per second, duplicates, the server's CPU per message and
the 1-minute load average before and after (on a shared machine the wall-clock figures depend on it).

In virtual time, lateness is delivery time minus send time plus the delay asked for (for the levels: the
rounding up to the level included). CPU is ``time.process_time`` of the send-and-deliver work divided by
N. Peak memory is the child process's peak RSS during the work (``VmHWM``, reset just before it through
``/proc/self/clear_refs``) minus its RSS then (after every design's imports and the preallocated
lateness array), in KiB: what holding and delivering N messages added. Each (design, N) runs in a fresh
subprocess.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("[design,count].lateness_p50_ms", "lower"),
    Figure("[design,count].lateness_p99_ms", "lower"),
    Figure("[design,count].cpu_us_per_message", "lower"),
    Figure("[design,count].peak_kib", "lower"),
    Figure("[design,count].server_cpu_us_per_message", "lower"),
    Figure("[design,count].bytes_per_held_message", "lower"),
    Figure("[design,count].delivered_per_s", "higher"),
]

DELAY_MIN_MS = 1_000
DELAY_MAX_MS = 7_200_000
VALUE = bytes(16)


def _status_kib(field: str) -> int:
    """``VmRSS`` or ``VmHWM`` (peak RSS) of this process, in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Make the peak RSS (VmHWM) start again from the current RSS (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _delays(count: int, seed: int) -> array:
    rng = random.Random(seed)
    return array("q", (rng.randint(DELAY_MIN_MS, DELAY_MAX_MS) for _ in range(count)))


def run_timer(delays: array, lateness: array) -> int:
    from minibroker.timer import SystemTimer, TimerTask

    class Message(TimerTask):
        __slots__ = ("due", "index", "value")

    now = 0
    fired = 0

    def fire(task: Message) -> None:
        nonlocal fired
        fired += 1
        lateness[task.index] = now - task.due

    timer = SystemTimer(executor=fire)
    for i, delay in enumerate(delays):
        task = Message(delay)
        task.due, task.index, task.value = delay, i, VALUE
        timer.add(task)
    while (expiration := timer.next_expiration()) is not None:
        now = expiration
        timer.advance_clock(now)
    return fired


def one_slot(delays: array) -> array:
    """The ``wheel-one-slot`` workload: every delay in the last second of the two hours, so every
    message is in one slot (the busiest slot possible)."""
    return array("q", (DELAY_MAX_MS - (d % 1000) for d in delays))


def run_wheel(delays: array, lateness: array) -> int:
    from minibroker.delayed_messages.file_wheel import FileWheel
    from minibroker.delayed_messages.headers import DelayedMessage

    forwarded = 0
    with tempfile.TemporaryDirectory(prefix="delay-bench-") as directory:
        wheel = FileWheel(directory, 7200, 1000, 60)
        wheel.start(0)
        for i, delay in enumerate(delays):
            wheel.append([DelayedMessage(str(i), "orders", 0, delay, 0, None, VALUE)])
        for tick in wheel.due_ticks(DELAY_MAX_MS + 1000):
            firing = wheel.fire(tick)
            now = tick * 1000
            while batch := firing.next_batch():
                forwarded += len(batch)
                for message in batch:
                    lateness[int(message.message_id)] = now - message.due_ms
                firing.checkpoint()
            firing.complete()
        wheel.close()
    return forwarded


def run_levels(delays: array, lateness: array) -> int:
    import trio
    import trio.testing

    from minibroker.delayed_messages import DelayConfig, DelayServices, DelayStats
    from minibroker.sim import TopicSpec, open_cluster

    class Recorder(DelayStats):
        def delivered(self, message_id: str, partition: str, level_ms: int, due_ms: int, at_ms: int) -> None:
            self.delivered_count += 1
            i = int(message_id.rpartition("-")[2])
            lateness[i] = at_ms - delays[i]  # sent at 0

    async def main() -> int:
        async with open_cluster(1, [TopicSpec("orders")]) as cluster, trio.open_nursery() as nursery:
            config = DelayConfig.from_kafka({"delay.topic.replication.factor": 1})
            services = DelayServices(cluster, config)
            services.stats = Recorder(keep_deliveries=False)
            await services.start(nursery)
            producer = cluster.producer("app", acks=1)
            for i, delay in enumerate(delays):
                producer.send("orders", 0, 1, len(VALUE), delay_ms=delay)
                if i % 1000 == 999:
                    await trio.testing.wait_all_tasks_blocked()
                    cluster.requests.clear()  # the scenario runner's request table, not the design's
            while services.stats.delivered_count < len(delays):
                await trio.sleep(1)
                cluster.requests.clear()
            nursery.cancel_scope.cancel()
        return services.stats.delivered_count

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


DESIGNS = {"timer": run_timer, "wheel": run_wheel, "wheel-one-slot": run_wheel, "levels": run_levels}


def _import_everything() -> None:
    """Every design's modules, loaded before the baseline so no design's figure counts imports."""
    import kafka.partitioner.default
    import kafka.record.default_records
    import kafka.record.memory_records  # noqa: F401
    import trio.testing  # noqa: F401

    import minibroker.delayed_messages
    import minibroker.delayed_messages.file_wheel
    import minibroker.sim
    import minibroker.timer  # noqa: F401


def child(design: str, count: int, seed: int) -> dict:
    _import_everything()
    delays = _delays(count, seed)
    if design == "wheel-one-slot":
        delays = one_slot(delays)
    lateness = array("q", bytes(8 * count))
    _reset_peak()
    base = _status_kib("VmRSS")
    start = time.process_time()
    delivered = DESIGNS[design](delays, lateness)
    cpu = time.process_time() - start
    peak = _status_kib("VmHWM")
    ordered = sorted(lateness)
    return {
        "design": design,
        "count": count,
        "delivered": delivered,
        "lateness_p50_ms": ordered[count // 2],
        "lateness_p99_ms": ordered[min(count - 1, count * 99 // 100)],
        "lateness_max_ms": ordered[-1],
        "cpu_us_per_message": round(cpu / count * 1e6, 2),
        "peak_kib": max(0, peak - base),
    }


SERVE_SCENARIO = """
[cluster]
brokers = 3
[[topics]]
name = "orders"
replication_factor = 3
"""

SERVE_DESIGNS = {
    "wheel": """
[delay_wheel]
"delay.wheel.tick.ms" = {tick}
"delay.wheel.slots" = 36000
""",
    "levels": """
[delay_service]
"delay.levels" = ["{delay}ms", "{hold}ms"]
"delay.service.poll.ms" = {tick}
""",
}

#: the delay of the messages the memory figure holds (none is due during a run)
HOLD_DELAY_MS = 3_600_000


def _level_topic(delay_ms: int) -> str:
    """The level topic of a ``delay_ms`` level: ``__delay_`` and the largest unit that divides it."""
    for unit, ms in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if delay_ms % ms == 0:
            return f"__delay_{delay_ms // ms}{unit}"
    return f"__delay_{delay_ms}ms"


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def _wait_idle(pid: int, quiet_s: float = 1.0, limit_s: float = 60.0) -> None:
    """Wait until process ``pid`` uses under 5% of a CPU for ``quiet_s``: it took in what it was sent."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = _cpu_seconds(pid)
        time.sleep(quiet_s)
        if _cpu_seconds(pid) - before < 0.05 * quiet_s:
            return


class _Sender:
    """A confluent-kafka producer (acks=all, batching) sending delayed messages by the header contract."""

    def __init__(self, bootstrap: str, design: str, delay_ms: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": False}
        )
        self.design = design
        self.delay_ms = delay_ms
        self.acked = 0
        self.failed = 0

    def _done(self, error, message) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed += 1

    def send(self, value: bytes, delay_ms: int) -> None:
        headers = [("delay.real.topic", b"orders")]
        if self.design == "wheel":
            topic = "__delay_wheel"
            headers.append(("delay.due.ms", b"%d" % (time.time() * 1000 + delay_ms)))
        else:
            topic = _level_topic(delay_ms)
        while True:
            try:
                self.producer.produce(topic, value=value, headers=headers, on_delivery=self._done)
                return
            except BufferError:
                self.producer.poll(0.005)


def serve_run(design: str, rate: int, seconds: float, delay_ms: int, tick_ms: int, hold: int) -> dict:
    """confluent-kafka through ``minibroker serve`` with one design, in real time (the module docstring)."""
    from confluent_kafka import Consumer, TopicPartition

    count = max(1, round(rate * seconds))
    with tempfile.TemporaryDirectory(prefix="delay-bench-serve-") as directory:
        path = os.path.join(directory, "delay.toml")
        with open(path, "w") as f:
            scenario = SERVE_DESIGNS[design].format(tick=tick_ms, delay=delay_ms, hold=HOLD_DELAY_MS)
            f.write(SERVE_SCENARIO + scenario)
        server = subprocess.Popen(
            [sys.executable, "-m", "minibroker", "serve", path, "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))},
        )
        try:
            assert server.stdout is not None
            bootstrap = ",".join(server.stdout.readline().split()[-1] for _ in range(3))
            sender = _Sender(bootstrap, design, delay_ms)
            # memory: ``hold`` messages held an hour, the server's RSS before and after they are taken in
            sender.send(b"warm-up", HOLD_DELAY_MS)
            sender.producer.flush(30)
            _wait_idle(server.pid)
            rss_before = _rss_kib(server.pid)
            for i in range(hold):
                sender.send(b"held-%d" % i, HOLD_DELAY_MS)
                if i % 1000 == 999:
                    sender.producer.poll(0)
            sender.producer.flush(60)
            _wait_idle(server.pid)
            rss_held = _rss_kib(server.pid)
            idle_cpu_s = _cpu_seconds(server.pid)
            time.sleep(2)
            idle_cpu_s = _cpu_seconds(server.pid) - idle_cpu_s  # ticks (and polls) with ``hold`` held

            sent_at = array("d", bytes(8 * count))
            arrived_at = array("d", bytes(8 * count))
            received = 0
            duplicates = 0
            consumer = Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "delay-bench", "fetch.wait.max.ms": 10}
            )
            consumer.assign([TopicPartition("orders", 0, 0)])

            def consume() -> None:  # beside the producer, so arrivals are seen when they come
                nonlocal received, duplicates
                deadline = time.monotonic() + seconds + delay_ms / 1000 + 60
                while received < count and time.monotonic() < deadline:
                    for record in consumer.consume(1000, 0.05):
                        now = time.monotonic()
                        if record.error() is not None or not record.value().isdigit():
                            continue
                        i = int(record.value())
                        if arrived_at[i]:
                            duplicates += 1
                            continue
                        arrived_at[i] = now
                        received += 1

            reader = threading.Thread(target=consume)
            reader.start()
            ready_cpu_s = _cpu_seconds(server.pid)
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            for i in range(count):
                pause = start + i / rate - time.monotonic()
                if pause > 0.002:
                    time.sleep(pause)
                sent_at[i] = time.monotonic()
                sender.send(b"%d" % i, delay_ms)
                if i % 100 == 99:
                    sender.producer.poll(0)
            sender.producer.flush(60)
            sending_s = time.monotonic() - start
            reader.join()
            cpu_s = _cpu_seconds(server.pid) - ready_cpu_s
            time.sleep(2)  # past a purge interval of the delay topics (1 s by default)
            _wait_idle(server.pid)
            rss_end = _rss_kib(server.pid)
            queue = "__delay_wheel" if design == "wheel" else _level_topic(delay_ms)
            low, high = consumer.get_watermark_offsets(TopicPartition(queue, 0), timeout=10)
            consumer.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    late = sorted(
        round((arrived_at[i] - sent_at[i]) * 1000 - delay_ms, 1) for i in range(count) if arrived_at[i]
    )
    firsts = [arrived_at[i] for i in range(count) if arrived_at[i]]
    spread = max(firsts) - min(firsts) if len(firsts) > 1 else 0.0
    return {
        "design": design,
        "rate": rate,
        "count": count,
        "delay_ms": delay_ms,
        "tick_ms": tick_ms,
        "sent_per_s": round(count / sending_s),
        "acked": sender.acked - hold - 1,
        "delivered": len(late),
        "duplicates": duplicates,
        "delivered_per_s": round(len(late) / spread) if spread else None,
        "lateness_p50_ms": late[len(late) // 2] if late else None,
        "lateness_p99_ms": late[min(len(late) - 1, len(late) * 99 // 100)] if late else None,
        "lateness_max_ms": late[-1] if late else None,
        "server_cpu_us_per_message": round(cpu_s / count * 1e6),
        "held": hold,
        "bytes_per_held_message": round((rss_held - rss_before) * 1024 / hold) if hold else None,
        "idle_cpu_percent_while_held": round(idle_cpu_s / 2 * 100, 1),
        "bytes_per_delivered_message": round((rss_end - rss_held) * 1024 / count),
        "delay_topic_offsets": [low, high],
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (Linux ``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected counts like 100000,1000000, got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise argparse.ArgumentTypeError(f"expected counts >= 1, got {text!r}")
    return counts


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _designs(text: str) -> list[str]:
    names = [part for part in text.split(",") if part]
    bad = [n for n in names if n not in DESIGNS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"expected designs among {', '.join(DESIGNS)}, got {text!r}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="delay_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=_designs, default=list(DESIGNS))
    parser.add_argument("--counts", type=_counts, default=None, help="N for every design")
    parser.add_argument("--levels-count", type=_counts, default=None, help="N for levels (default: --counts)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help="real time: confluent-kafka through serve")
    parser.add_argument("--rate", type=_positive, default=5000, help="--serve: messages sent per second")
    parser.add_argument("--seconds", type=_positive, default=10, help="--serve: how long to send")
    parser.add_argument("--delay-ms", type=_positive, default=2000, help="--serve: every message's delay")
    parser.add_argument("--tick-ms", type=_positive, default=100, help="--serve: the wheel's tick")
    parser.add_argument("--hold", type=_counts, default=[20_000], help="--serve: messages held for memory")
    parser.add_argument("--child", nargs=2, metavar=("DESIGN", "COUNT"), help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.seed)))
        return 0
    if args.serve:
        designs = [d for d in args.designs if d in SERVE_DESIGNS] if args.designs != list(DESIGNS) else None
        if designs == []:
            parser.error(f"--serve: expected designs among {', '.join(SERVE_DESIGNS)}")
        rows = [
            serve_run(design, args.rate, args.seconds, args.delay_ms, args.tick_ms, args.hold[0])
            for design in designs or list(SERVE_DESIGNS)
        ]
        print(json.dumps(rows, indent=2))
        return 0
    counts = args.counts or ([20_000, 2_000] if args.quick else [1_000_000, 100_000])
    levels = args.levels_count or ([2_000] if args.quick else counts)
    rows = []
    for design in args.designs:
        for count in levels if design == "levels" else counts:
            command = [sys.executable, __file__, "--child", design, str(count), "--seed", str(args.seed)]
            env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                print(f"delay_bench.py: {design} at {count} failed: {done.stderr.strip()}", file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = ("design", "messages", "p50 ms", "p99 ms", "max ms", "CPU µs/msg", "peak KiB")
    widths = (10, 9, 9, 9, 11, 10)
    print(f"{header[0]:14} " + " ".join(f"{h:>{w}}" for h, w in zip(header[1:], widths, strict=True)))
    for r in rows:
        print(
            f"{r['design']:14} {r['count']:>10,} {r['lateness_p50_ms']:>9,} {r['lateness_p99_ms']:>9,} "
            f"{r['lateness_max_ms']:>9,} {r['cpu_us_per_message']:>11} {r['peak_kib']:>9,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
