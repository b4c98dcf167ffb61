"""Real clients' consume-transform-produce loops through a broker crash, each input processed exactly once.

Each client reads ``in-<name>`` (two partitions, READ_COMMITTED) as a consumer group and, per
transaction, writes ``out-<value>`` to the same partition of ``out-<name>`` and the consumed
positions to the group (``send_offsets_to_transaction``), then commits. In the middle of the loop,
after a transaction's records are written and before its commit, a broker crashes: the leader of
an output partition (confluent-kafka) or of the transactional id's ``__transaction_state``
partition, its coordinator (kafka-python, kafkajs). It restarts two transactions later. A
transaction that fails is aborted and its inputs read again from the committed offsets. At the end
a READ_COMMITTED reader of the output sees each input's output exactly once, and the group's
committed offsets are the inputs' ends.

One served cluster of three brokers (``min.insync.replicas`` 2) for the module; each client has
its own topics, group and transactional id, and every crashed broker is restarted before its test
ends.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC, partition_for
from tests.server.conftest import WAIT_S, ServedThread, scenario
from tests.server.test_transactions import _consume

NAMES = ("ck", "kp", "js")
#: inputs per client (12 on each input partition) and records per transaction
INPUTS = 24
CHUNK = 4
#: the transaction (1-based) after whose writes a broker crashes; it restarts two transactions later
CRASH_ROUND = 2
#: a whole loop's bound (each finishes in a few seconds)
LOOP_S = 60.0
KAFKAJS = "kafkajs@2.2.4"


def _topics() -> str:
    return "\n\n[[topics]]\n".join(
        f'name = "{kind}-{name}"\npartitions = 2\nreplication_factor = 3'
        for name in NAMES
        for kind in ("in", "out")
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ServedThread]:
    # groups form at their first join (Kafka waits group.initial.rebalance.delay.ms, 3 s, for more members)
    config = '"min.insync.replicas" = 2, "group.initial.rebalance.delay.ms" = 0'
    served = ServedThread(scenario(3, config, _topics())).start()
    try:
        yield served
    finally:
        served.stop()


def _seed(server: ServedThread, name: str) -> list[bytes]:
    """Write the inputs, half to each partition of ``in-<name>``; return them."""
    from confluent_kafka import Producer

    inputs = [b"%s-%02d" % (name.encode(), i) for i in range(INPUTS)]
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for i, value in enumerate(inputs):
        producer.produce(f"in-{name}", value=value, partition=i % 2)
    assert producer.flush(WAIT_S) == 0
    return inputs


class Crasher:
    """Crashes a broker chosen when the loop reaches the crash point; restarts it two rounds later."""

    def __init__(self, server: ServedThread, choose: Callable[[], int]) -> None:
        self.server = server
        self.choose = choose
        self.crashed: int | None = None
        #: the broker holding the role when the crashed one restarts
        self.successor: int | None = None

    def at_round(self, round_: int) -> None:
        if round_ == CRASH_ROUND:
            self.crashed = self.choose()
            self.server.call(self.server.cluster.crash, self.crashed)
        elif round_ == CRASH_ROUND + 2:
            self.restart()

    def restart(self) -> None:
        if self.crashed is not None:
            if self.successor is None:
                self.successor = self.choose()
            self.server.call_async(self.server.cluster.restart, self.crashed)


def _leader(server: ServedThread, topic: str, partition: int) -> Callable[[], int]:
    return lambda: server.call(server.cluster.leader_of, TopicPartition(topic, partition))


def _coordinator(server: ServedThread, transactional_id: str) -> Callable[[], int]:
    tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, 50))
    return lambda: server.call(server.cluster.leader_of, tp)


def _exactly_once(server: ServedThread, name: str, inputs: list[bytes]) -> None:
    """Every input's output once in ``out-<name>`` (READ_COMMITTED), the group's offsets at the ends."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Partition

    outputs = _consume(server.bootstrap, "read_committed", [(f"out-{name}", 0), (f"out-{name}", 1)])
    assert outputs == sorted(b"out-" + value for value in inputs)
    reader = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"g-{name}"})
    try:
        committed = reader.committed([Partition(f"in-{name}", p) for p in (0, 1)], WAIT_S)
    finally:
        reader.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, INPUTS // 2), (1, INPUTS // 2)]


def test_confluent_kafka_transform_loop_survives_a_crash_of_an_output_leader(server):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition as Partition

    name = "ck"
    inputs = _seed(server, name)
    crasher = Crasher(server, _leader(server, f"out-{name}", 0))
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": f"g-{name}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([f"in-{name}"])
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"tx-{name}"})
    producer.init_transactions(WAIT_S)

    def rewind() -> None:
        for tp in consumer.committed(consumer.assignment(), WAIT_S):
            consumer.seek(
                Partition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            )

    done, rounds, aborted = 0, 0, 0
    deadline = time.monotonic() + LOOP_S
    try:
        while done < INPUTS:
            assert time.monotonic() < deadline, f"{done} of {INPUTS} inputs committed"
            batch = [m for m in consumer.consume(CHUNK, 0.5) if not m.error()]
            if not batch:
                continue
            producer.begin_transaction()
            for message in batch:
                producer.produce(
                    f"out-{name}",
                    key=message.value(),
                    value=b"out-" + message.value(),
                    partition=message.partition(),
                )
            rounds += 1
            crasher.at_round(rounds)
            try:
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), WAIT_S
                )
                producer.commit_transaction(WAIT_S)
            except KafkaException as failure:
                if not failure.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(WAIT_S)
                aborted += 1
                rewind()
                continue
            done += len(batch)
    finally:
        crasher.restart()
        consumer.close()
    assert crasher.successor not in (None, crasher.crashed) and rounds > CRASH_ROUND
    _exactly_once(server, name, inputs)


def test_kafka_python_transform_loop_survives_a_crash_of_the_transaction_coordinator(server):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka.errors import KafkaError

    name = "kp"
    inputs = _seed(server, name)
    crasher = Crasher(server, _coordinator(server, f"tx-{name}"))
    consumer = KafkaConsumer(
        f"in-{name}",
        bootstrap_servers=server.bootstrap,
        group_id=f"g-{name}",
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id=f"tx-{name}")
    producer.init_transactions()

    def rewind() -> None:
        for tp in consumer.assignment():
            offset = consumer.committed(tp)
            if offset is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, offset)

    done, rounds = 0, 0
    deadline = time.monotonic() + LOOP_S
    try:
        while done < INPUTS:
            assert time.monotonic() < deadline, f"{done} of {INPUTS} inputs committed"
            polled = consumer.poll(timeout_ms=500, max_records=CHUNK)
            batch = [record for records in polled.values() for record in records]
            if not batch:
                continue
            producer.begin_transaction()
            for record in batch:
                producer.send(
                    f"out-{name}", key=record.value, value=b"out-" + record.value, partition=record.partition
                )
            rounds += 1
            crasher.at_round(rounds)
            positions = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()}
            try:
                producer.send_offsets_to_transaction(positions, consumer.group_metadata())
                producer.commit_transaction()
            except KafkaError:
                producer.abort_transaction()
                rewind()
                continue
            done += len(batch)
    finally:
        crasher.restart()
        producer.close(timeout=WAIT_S)
        consumer.close()
    assert crasher.successor not in (None, crasher.crashed) and rounds > CRASH_ROUND
    _exactly_once(server, name, inputs)


@pytest.fixture(scope="module")
def kafkajs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose node_modules holds kafkajs, installed with npm once per cache."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run kafkajs")
    cache = getattr(request.config, "cache", None)
    where = cache.mkdir("kafkajs-2.2.4") if cache is not None else tmp_path_factory.mktemp("kafkajs")
    if not (where / "node_modules" / "kafkajs" / "package.json").exists():
        try:
            installed = subprocess.run(
                [
                    "npm",
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--fetch-retry-mintimeout=2000",
                    "--fetch-retry-maxtimeout=10000",
                    "--prefix",
                    str(where),
                    KAFKAJS,
                ],
                capture_output=True,
                text=True,
                timeout=180,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm could not install {KAFKAJS} within 180 s (is the npm registry reachable?)")
        if installed.returncode != 0:
            said = [line for line in installed.stderr.splitlines() if "complete log" not in line]
            reason = "; ".join(line.strip() for line in said[:2]) or f"exit {installed.returncode}"
            pytest.skip(f"npm could not install {KAFKAJS} (is the npm registry reachable?): {reason}")
    return where


def _lines(stream, into: queue.Queue | list) -> None:
    """Put the lines of ``stream`` in ``into`` as they arrive (a queue gets None at the end), on a thread."""
    put = into.put if isinstance(into, queue.Queue) else into.append

    def read() -> None:
        for line in stream:
            put(line.rstrip("\n"))
        if isinstance(into, queue.Queue):
            into.put(None)

    threading.Thread(target=read, daemon=True).start()


def test_kafkajs_transform_loop_survives_a_crash_of_the_transaction_coordinator(server, kafkajs):
    name = "js"
    inputs = _seed(server, name)
    crasher = Crasher(server, _coordinator(server, f"tx-{name}"))
    script = Path(__file__).with_name("kafkajs_transform.js")
    arguments = [server.bootstrap, f"in-{name}", f"out-{name}", f"g-{name}", f"tx-{name}", str(INPUTS)]
    process = subprocess.Popen(
        ["node", str(script), *arguments, str(CRASH_ROUND)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NODE_PATH": str(kafkajs / "node_modules")},
    )
    out: queue.Queue = queue.Queue()
    errors: list[str] = []
    _lines(process.stdout, out)
    _lines(process.stderr, errors)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + LOOP_S
        while not (seen and (seen[-1] is None or seen[-1].startswith("done"))):
            try:
                seen.append(out.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                last = "\n".join(errors[-40:])
                raise AssertionError(f"kafkajs did not finish within {LOOP_S:g} s: {seen}\n{last}") from None
            if seen[-1] == "crash":
                crasher.at_round(CRASH_ROUND)
                process.stdin.write("go\n")
                process.stdin.flush()
            elif seen[-1] == f"committed {CRASH_ROUND + 2}":
                crasher.restart()
        assert process.wait(WAIT_S) == 0, "\n".join(errors[-40:])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        crasher.restart()
    assert seen[:2] == ["committed 1", "crash"] and seen[-1].startswith("done"), seen
    assert crasher.successor not in (None, crasher.crashed)
    _exactly_once(server, name, inputs)
