"""``serve --data-dir`` killed with SIGKILL at random moments while real Kafka clients run.

Each cycle starts ``python -m minibroker serve --data-dir D --brokers 3 --topic t:3:3`` on the same
ports, checks what the restart recovered, runs an idempotent kafka-python producer (acks=all) and a
consumer of group ``g`` committing its positions, and SIGKILLs the process after a random time
(sometimes while it is still starting and recovering). After every restart:

- every record acknowledged so far is read back at its acknowledged offset, exactly once;
- group ``g``'s committed offset of each partition is at least its last acknowledged commit, and is
  one of the offsets it tried to commit.

Only the serve processes this test starts are killed (``Popen.kill`` on their own handle).
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from tests.server.conftest import WAIT_S

KILLS = 20
SEED = 20_260_413
PARTITIONS = [TopicPartition("t", p) for p in range(3)]
LISTENING = re.compile(r"broker (\d+) listening on 127\.0\.0\.1:(\d+)")
#: the producer sleeps this long after every 10 records (at most 100 records a second)
RECORD_PACE_S = 0.1


def free_base_port(rng: random.Random) -> int:
    """A port P with P, P+1, P+2 free on loopback now."""
    for _ in range(200):
        base = rng.randrange(20_000, 60_000)
        sockets = []
        try:
            for port in range(base, base + 3):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError("no three consecutive free ports")


class Serve:
    """One ``serve`` process of this test."""

    def __init__(self, data_dir, port: int) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "minibroker",
                "serve",
                "--data-dir",
                str(data_dir),
                "--brokers",
                "3",
                "--topic",
                "t:3:3",
                "--port",
                str(port),
                "--config",
                "min.insync.replicas=2",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def wait_listening(self) -> list[str]:
        lines = []
        deadline = time.monotonic() + 3 * WAIT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            assert line, f"serve ended: {self.process.wait()} {self.process.stderr.read()}"
            lines.append(line.strip())
            if line.startswith("state:"):
                break
        assert [LISTENING.fullmatch(line) is not None for line in lines[:3]] == [True] * 3, lines
        return lines

    def kill(self) -> str:
        self.process.kill()  # SIGKILL
        _, err = self.process.communicate(timeout=WAIT_S)
        return err


def read_everything(
    bootstrap: list[str], acked: dict[bytes, tuple[int, int]]
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition of ``t`` up to its high watermark, once that covers ``acked``.

    A restarted leader's high watermark starts from its checkpoint (written every few seconds) and
    rises to the log end once the followers have fetched, as in Kafka.
    """
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=5000)
    needed = {
        tp: 1 + max((o for p, o in acked.values() if p == tp.partition), default=-1) for tp in PARTITIONS
    }
    try:
        consumer.assign(PARTITIONS)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 2 * WAIT_S
        ends = consumer.end_offsets(PARTITIONS)
        while any(ends[tp] < needed[tp] for tp in PARTITIONS):
            assert time.monotonic() < deadline, ("high watermarks below acknowledged offsets", ends, needed)
            time.sleep(0.05)
            ends = consumer.end_offsets(PARTITIONS)
        got: dict[int, list[tuple[int, bytes]]] = {tp.partition: [] for tp in PARTITIONS}
        deadline = time.monotonic() + 2 * WAIT_S
        while any(consumer.position(tp) < ends[tp] for tp in PARTITIONS):
            assert time.monotonic() < deadline, ({tp: consumer.position(tp) for tp in PARTITIONS}, ends)
            for tp, records in consumer.poll(200).items():
                got[tp.partition] += [(r.offset, r.value) for r in records]
        return got
    finally:
        consumer.close()


class Load:
    """One idempotent producer (acks=all) and one consumer of group ``g`` committing, each in a thread,
    running across every kill and restart of the server as an application's clients would."""

    def __init__(self, bootstrap: list[str]) -> None:
        self.bootstrap = bootstrap
        self.lock = threading.Lock()
        self.acked: dict[bytes, tuple[int, int]] = {}  # value -> (partition, offset)
        self.commits: dict[int, int] = {}  # partition -> last acknowledged committed offset
        self.tried: dict[int, set[int]] = {}  # partition -> every offset a commit was sent with
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.produce), threading.Thread(target=self.consume)]
        for thread in self.threads:
            thread.start()

    def snapshot(self) -> tuple[dict[bytes, tuple[int, int]], dict[int, int], dict[int, set[int]]]:
        with self.lock:
            return dict(self.acked), dict(self.commits), {p: set(o) for p, o in self.tried.items()}

    def produce(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            request_timeout_ms=3000,
            max_block_ms=3000,
        )

        def acknowledged(value: bytes, metadata) -> None:
            with self.lock:
                self.acked[value] = (metadata.partition, metadata.offset)

        i = 0
        try:
            while not self.stopping.is_set():
                value = f"r{i}".encode()
                try:
                    future = producer.send("t", value=value, partition=i % 3)
                except KafkaError:
                    continue
                future.add_callback(lambda metadata, value=value: acknowledged(value, metadata))
                i += 1
                if i % 10 == 0:
                    time.sleep(RECORD_PACE_S)
        finally:
            with contextlib.suppress(KafkaError):
                producer.close(timeout=WAIT_S)

    def consume(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id="g",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=3000,
        )
        try:
            consumer.assign(PARTITIONS)
            while not self.stopping.is_set():
                try:
                    consumer.poll(100)
                    positions = {tp.partition: consumer.position(tp) for tp in PARTITIONS}
                    with self.lock:
                        for p, offset in positions.items():
                            self.tried.setdefault(p, set()).add(offset)
                    consumer.commit()
                except KafkaError:
                    time.sleep(0.1)
                    continue
                with self.lock:
                    for p, offset in positions.items():
                        self.commits[p] = max(self.commits.get(p, 0), offset)
        finally:
            consumer.close(autocommit=False)

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        for thread in self.threads:
            thread.join(4 * WAIT_S)
            assert not thread.is_alive()


def test_serve_with_a_data_dir_survives_sigkill_at_random_moments(tmp_path):
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    port = free_base_port(rng)
    bootstrap = [f"127.0.0.1:{p}" for p in range(port, port + 3)]
    started = time.monotonic()
    kills = early_kills = 0
    notes: list[str] = []
    load: Load | None = None
    serve = None
    try:
        while True:
            serve = Serve(data_dir, port)
            if load is not None and kills < KILLS and rng.random() < 0.15:
                time.sleep(rng.uniform(0.0, 1.0))  # a kill while the process starts and recovers
                notes += serve.kill().splitlines()
                kills += 1
                early_kills += 1
                continue
            serve.wait_listening()
            check_recovered(bootstrap, load)
            if kills == KILLS:
                break
            if load is None:
                load = Load(bootstrap)
            time.sleep(rng.uniform(0.3, 1.5))
            notes += serve.kill().splitlines()
            kills += 1
        # the clients stop against the last server; then everything they were told is checked once more
        load.stop()
        check_recovered(bootstrap, load)
    finally:
        if load is not None:
            load.stop()
        if serve is not None and serve.process.poll() is None:
            notes += serve.kill().splitlines()
    elapsed = time.monotonic() - started
    assert kills == KILLS and len(load.acked) > 1000 and load.commits
    # a SIGKILL leaves no torn write behind (each batch is one write): nothing needed recovering
    assert [n for n in notes if "truncated" in n] == [], notes
    print(f"{kills} kills ({early_kills} while starting), {len(load.acked)} records checked, {elapsed:.0f} s")
    assert elapsed < 180


def check_recovered(bootstrap: list[str], load: Load | None) -> None:
    """Every record ``load`` was acknowledged is read back once at its offset; the group's commits held."""
    acked, commits, _ = load.snapshot() if load is not None else ({}, {}, {})
    logs = read_everything(bootstrap, acked)
    seen = Counter(value for records in logs.values() for _, value in records)
    for value, (partition, offset) in acked.items():
        assert seen[value] == 1, (value, seen[value])
        assert (offset, value) in logs[partition], (value, partition, offset)
    reader = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False, request_timeout_ms=5000
    )
    try:
        committed = {tp.partition: reader.committed(tp) for tp in PARTITIONS}
    finally:
        reader.close(autocommit=False)
    tried = load.snapshot()[2] if load is not None else {}  # taken after: it includes any commit read
    for p, last in commits.items():
        assert committed[p] is not None and committed[p] >= last, (p, committed, commits)
        assert committed[p] in tried[p], (p, committed[p])


def test_without_a_data_dir_the_banner_and_help_say_state_is_in_memory_only():
    process = subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--duration", "0.5"],
        capture_output=True,
        text=True,
        timeout=6 * WAIT_S,
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.splitlines()[3] == (
        "state: in memory only; topics, records and committed offsets are lost when this process ends"
    )
    helped = subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    words = " ".join(helped.stdout.split())
    assert (
        "Without --data-dir the cluster's state (topics, records, committed offsets) is in memory only"
        in words
    )
    assert "and is lost when the process ends" in words
