"""Running ``minibroker retry-service`` processes against a MiniCluster (minibroker serve, in-process, on
loopback), with kafka-python as the application: it writes retry-topic records and reads the topic."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from minibroker.retry import headers as h

ROOT = Path(__file__).resolve().parents[2]
#: the broker settings that let a killed member's partitions move on within seconds; the initial
#: rebalance delay stays Kafka's 3000 ms: with 0, kafka-python 3.0.12's group leader can compute its
#: assignment before its metadata names the subscribed topics and then keep an empty assignment
#: (see tests/server/test_groups.py), which is what an occasional "read nothing in 90 s" here was
GROUP_CONFIG = {"group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 3000}
#: generous: 2 cores shared by several test runs
WAIT_S = 90.0


def topics(partitions: int = 2, attempts: int = 3) -> list[str]:
    names = [f"orders:{partitions}:1", "orders-dlt:1:1"]
    return names + [f"orders-retry-{n}:{partitions}:1" for n in range(1, attempts)]


def write_config(
    path: Path, backend: str = "", attempts: int = 3, extra: str = "", group_id: str = "retry-test"
) -> Path:
    path.write_text(
        f'group_id = "{group_id}"\nsession_timeout_ms = 2000\npoll_ms = 50\n{extra}\n'
        f"{backend}\n[topics.orders]\nattempts = {attempts}\ndelay_ms = 500\n"
    )
    return path


def redis_backend(client, claim_batch: int = 100, key: str = "svc") -> str:
    port = client.connection_pool.connection_kwargs["port"]
    return (
        f'[backend]\nkind = "redis"\nurl = "redis://127.0.0.1:{port}/0"\nkey = "{key}"\n'
        f"claim_batch = {claim_batch}\nlease_ms = 2000\n"
    )


class Service:
    """A ``minibroker retry-service`` process; its stderr lines are collected by a thread as they come."""

    def __init__(self, bootstrap: str, config: Path | str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = ["retry-service", "--bootstrap", bootstrap, "--config", str(config)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "minibroker", *args], env=env, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))

    def wait_line(self, wanted, what: str, timeout_s: float = WAIT_S) -> str:
        """Block until the service writes a line for which ``wanted(line)`` holds; that line."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"never {what}: {self.log}") from None
            if wanted(line):
                return line

    def wait_assigned(self, timeout_s: float = WAIT_S) -> str:
        """Block until the service says it was assigned partitions (not none); that line."""
        return self.wait_line(
            lambda line: line.startswith("retry-service: assigned") and not line.endswith(": none"),
            "assigned partitions",
            timeout_s,
        )

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def terminate(self) -> tuple[int, list[str]]:
        """SIGTERM; the exit status and every line it wrote."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=WAIT_S)
        self._reader.join(WAIT_S)
        return code, self.log

    def stop(self) -> None:
        """End it if it still runs (SIGTERM, then SIGKILL); print its lines (shown when a test failed)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(WAIT_S)
        print("retry-service stderr:", *self.log, sep="\n")


def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    """Poll ``predicate`` every 20 ms until it holds (AssertionError naming ``what`` after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def produce_retries(
    bootstrap: str, count: int, due_ms: int, partitions: int = 2, attempt: int = 1, first: int = 0
) -> None:
    """``count`` records failed on delivery ``attempt``, keyed ``k<i>`` for i from ``first``, due at
    ``due_ms``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for i in range(first, first + count):
            fields = {
                h.ORIGINAL_TOPIC: "orders",
                h.ORIGINAL_PARTITION: i % partitions,
                h.ORIGINAL_OFFSET: i,
                h.ORIGINAL_TIMESTAMP: 1000 + i,
                h.ATTEMPT: attempt,
                h.ERROR: "TimeoutError: downstream",
                h.DUE: due_ms,
            }
            record = h.RetryRecord(f"k{i}".encode(), f"v{i}".encode(), 1000 + i, fields, (("app", b"x"),))
            producer.send(
                f"orders-retry-{attempt}",
                key=record.key,
                value=record.value,
                headers=record.encode_headers(),
                partition=i % partitions,
                timestamp_ms=record.timestamp,
            )
        producer.flush(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)


class Reader:
    """Reads every partition of ``topic`` from its start (assign, no group); notes each arrival's time."""

    def __init__(self, bootstrap: str, topic: str = "orders") -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        parts = self.consumer.partitions_for_topic(topic)
        assert parts, f"no partitions of {topic} in the metadata"
        self.consumer.assign([TopicPartition(topic, p) for p in sorted(parts)])
        #: (arrival ms, partition, key, parsed record)
        self.arrivals: list[tuple[int, int, bytes, h.RetryRecord]] = []

    def poll(self, timeout_ms: int = 20) -> None:
        for tp, records in self.consumer.poll(timeout_ms=timeout_ms).items():
            arrived = now_ms()
            for r in records:
                parsed = h.parse(r.key, r.value, r.timestamp, r.headers)
                self.arrivals.append((arrived, tp.partition, r.key, parsed))

    def until(self, predicate, timeout_s: float = WAIT_S, service: Service | None = None) -> None:
        """Poll until ``predicate(self)``; on a timeout, the message quotes ``service``'s last lines (a
        one-line failure summary then still says whether the service was assigned, failed or idle)."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            if time.monotonic() > deadline:
                said = f"; the service's last lines: {service.log[-4:]}" if service is not None else ""
                raise AssertionError(f"timed out with {len(self.arrivals)} records read{said}")
            self.poll()

    def keys(self) -> list[bytes]:
        return [key for _, _, key, _ in self.arrivals]

    def close(self) -> None:
        self.consumer.close()
