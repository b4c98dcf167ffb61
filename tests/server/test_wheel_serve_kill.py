"""The file wheel under ``serve --data-dir``, killed with SIGKILL at seeded random moments.

Each cycle starts ``python -m minibroker serve WHEEL_SCENARIO --data-dir D`` on the same three ports,
sends delayed messages with kafka-python into ``__delay_wheel`` (acks=all, no retries, so every record
is written at most once and keeps its default id; headers ``delay.real.topic = orders``,
``delay.real.partition = 0``, ``delay.due.ms`` 0.2-3 s ahead, a unique value each) and SIGKILLs the
process (``Popen.kill`` on its own handle) a random time later: sometimes while it is still starting and
recovering, mostly while messages are being sent, written to the wheel and fired. After a last start,
once the last due time and a few ticks have passed, ``orders`` is read from the beginning:

- the wheel started every time: each start printed its listening lines on the same ports, was still
  running when killed, and wrote no traceback to stderr (only one-line ``minibroker...`` notes, such as
  docs/delay.md's ``minibroker: delay wheel: <path>: ..., removed``);
- every acknowledged message was delivered, with the ``delay.due.ms`` it was sent with;
- none early: docs/delay.md promises a message is never early (tick *k* holds the messages due in
  ((k-1)·tick, k·tick] and fires at k·tick) and the delivered record is stamped with the time it was
  forwarded, so its timestamp is at least its due time. Tolerance: 2 ms, for ``serve``'s one rounded
  reading of the wall clock that maps cluster time to epoch ms;
- duplicates only as docs/delay.md promises (at-least-once: the batches in flight at a kill can be
  forwarded twice): at most ``delay.wheel.forward.batch`` x ``delay.wheel.forward.in.flight`` (500)
  extra deliveries per kill, every copy with the same ``delay.message.id``.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from tests.server.conftest import WAIT_S
from tests.server.test_delay_serve import WHEEL_SCENARIO
from tests.server.test_serve_cli import start
from tests.server.test_serve_kill import free_base_port

SEED = 20_261_128
KILLS = 10
#: ``delay.wheel.forward.batch`` x ``delay.wheel.forward.in.flight``, the defaults: what one kill can
#: have in flight, so forward twice
FORWARD_BATCH = 100 * 5
TICK_MS = 100
EARLY_TOLERANCE_MS = 2
#: every due time lies this far ahead of its send
DUE_AHEAD_MS = (200, 3_000)


def _send_until(producer, deadline: float, rng: random.Random, sent: list) -> None:
    """Send delayed messages without waiting for each until ``deadline`` (monotonic)."""
    while time.monotonic() < deadline:
        value = b"m%d" % len(sent)
        due = int(time.time() * 1000) + rng.randrange(*DUE_AHEAD_MS)
        headers = [
            ("delay.real.topic", b"orders"),
            ("delay.real.partition", b"0"),
            ("delay.due.ms", b"%d" % due),
        ]
        try:
            future = producer.send("__delay_wheel", value=value, headers=headers)
        except KafkaError:
            future = None
        sent.append((value, due, future))
        time.sleep(0.005)


def _acknowledged(sent: list) -> dict[bytes, int]:
    """value -> due ms of every send the cluster acknowledged (the others may or may not be delivered)."""
    acked = {}
    for value, due, future in sent:
        if future is not None and future.is_done and future.succeeded():
            acked[value] = due
    return acked


def _read_orders(ports: list[int], acked: dict[bytes, int], deadline: float) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=[f"127.0.0.1:{p}" for p in ports], enable_auto_commit=False, request_timeout_ms=5000
    )
    try:
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek_to_beginning()
        got = []
        while time.monotonic() < deadline and not set(acked) <= {r.value for r in got}:
            for records in consumer.poll(timeout_ms=100).values():
                got += records
        # a duplicate forwarded just after the last awaited record is read too
        for records in consumer.poll(timeout_ms=500).values():
            got += records
        return got
    finally:
        consumer.close()


def test_the_file_wheel_under_serve_delivers_every_acknowledged_message_across_sigkills(tmp_path):
    rng = random.Random(SEED)
    scenario, data = tmp_path / "wheel.toml", tmp_path / "data"
    scenario.write_text(WHEEL_SCENARIO)
    port = free_base_port(rng)
    args = (str(scenario), "--port", str(port), "--data-dir", str(data))
    started = time.monotonic()
    sent: list = []
    kills = early_kills = 0
    errors: list[str] = []
    process = producer = None
    try:
        while kills < KILLS:
            if sent and rng.random() < 0.2:  # a kill while the process starts and recovers its files
                process, ports, _ = start(*args)
                time.sleep(rng.uniform(0.0, 0.3))
                early_kills += 1
            else:
                process, ports, _ = start(*args)
                producer = KafkaProducer(
                    bootstrap_servers=[f"127.0.0.1:{p}" for p in ports],
                    acks="all",
                    retries=0,
                    enable_idempotence=False,
                    linger_ms=0,
                    request_timeout_ms=1500,
                    delivery_timeout_ms=1500,  # what the kill cut off fails soon: close() ends
                    max_block_ms=2000,
                )
                _send_until(producer, time.monotonic() + rng.uniform(0.2, 1.5), rng, sent)
            assert ports == [port, port + 1, port + 2]
            assert process.poll() is None, process.communicate(timeout=WAIT_S)
            process.kill()  # SIGKILL
            _, err = process.communicate(timeout=WAIT_S)
            errors += err.splitlines()
            kills += 1
            if producer is not None:
                with contextlib.suppress(KafkaError):  # its unanswered sends fail: never acknowledged
                    producer.close(timeout=4)
                producer = None
        process, ports, _ = start(*args)
        assert ports == [port, port + 1, port + 2]
        acked = _acknowledged(sent)
        last_due = max(acked.values())
        time.sleep(max(0.0, last_due / 1000 - time.time()) + 3 * TICK_MS / 1000)
        got = _read_orders(ports, acked, time.monotonic() + WAIT_S)
        assert process.poll() is None
    finally:
        if producer is not None:
            with contextlib.suppress(KafkaError):
                producer.close(timeout=4)
        if process is not None and process.poll() is None:
            process.kill()
            errors += process.communicate(timeout=WAIT_S)[1].splitlines()
    elapsed = time.monotonic() - started

    # one-line notes only (a recovered segment tail, say), never a traceback
    assert [line for line in errors if "Traceback" in line or not line.startswith("minibroker")] == [], errors
    delivered = Counter(r.value for r in got)
    missing = sorted(set(acked) - set(delivered))
    assert missing == [], f"{len(missing)} of {len(acked)} acknowledged not delivered: {missing[:20]}"
    for record in got:
        headers = dict(record.headers)
        due = int(headers["delay.due.ms"])
        if record.value in acked:
            assert due == acked[record.value], record
        assert record.timestamp >= due - EARLY_TOLERANCE_MS, (record.value, record.timestamp, due)
    ids = {}
    for record in got:
        ids.setdefault(record.value, set()).add(dict(record.headers)["delay.message.id"])
    assert all(len(i) == 1 for i in ids.values()), {v: i for v, i in ids.items() if len(i) > 1}
    extra = sum(n - 1 for n in delivered.values())
    assert extra <= kills * FORWARD_BATCH
    print(
        f"{kills} kills ({early_kills} while starting), {len(sent)} sent, {len(acked)} acknowledged, "
        f"{len(delivered)} delivered, {extra} extra deliveries, {elapsed:.0f} s"
    )
