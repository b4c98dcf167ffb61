"""Default message ids of the file wheel stay unique across restarts.

Under ``serve --data-dir`` the ``__delay_wheel`` topic is kept with the wheel's files, so its offsets go
on and the ids with them (a real ``serve`` process killed with SIGKILL, kafka-python on loopback). Where
the wheel's files are kept but the topic is new (its offsets start at 0 again), the wheel's incarnation
goes up and the ids carry it."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from minibroker.delayed_messages.wheel_ingest import ingest_label
from minibroker.delayed_messages.wheel_service import WheelGroup
from tests.retry.service_helpers import wait_until
from tests.server.conftest import WAIT_S
from tests.server.test_delay_serve import WHEEL_SCENARIO
from tests.server.test_serve_cli import start


def _send(ports, due_ms, values):
    producer = KafkaProducer(bootstrap_servers=[f"127.0.0.1:{p}" for p in ports], acks="all", linger_ms=0)
    try:
        headers = [
            ("delay.real.topic", b"orders"),
            ("delay.real.partition", b"0"),
            ("delay.due.ms", b"%d" % due_ms),
        ]
        for value in values:
            producer.send("__delay_wheel", value=value, headers=headers).get(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)


def _held(directory) -> int:
    """Messages of the first start in broker 0's copy (the ingest writes them a fetch after the send)."""
    return sum(
        path.read_bytes().count(b"first-") for path in (directory / "broker-0" / "wheel").glob("*.log")
    )


def _serve(scenario, data):
    """``serve`` of the wheel scenario on ``data``: the process and its ports."""
    process, ports, _ = start(str(scenario), "--port", "0", "--data-dir", str(data))
    return process, ports


def test_messages_sent_after_a_restart_on_the_kept_files_are_not_taken_for_repeats(tmp_path):
    scenario, data = tmp_path / "wheel.toml", tmp_path / "data"
    scenario.write_text(WHEEL_SCENARIO)
    due = int(time.time() * 1000) + 12_000  # one tick: every message below shares one slot
    first, ports = _serve(scenario, data)
    try:
        _send(ports, due, [b"first-%d" % i for i in range(20)])
        wait_until(lambda: _held(data) >= 20, "the wheel held the first 20 messages")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=WAIT_S)
    second, ports = _serve(scenario, data)
    try:
        _send(ports, due, [b"second-%d" % i for i in range(20)])  # the kept topic's offsets 20..39
        consumer = KafkaConsumer(bootstrap_servers=[f"127.0.0.1:{ports[0]}"], enable_auto_commit=False)
        consumer.assign([TopicPartition("orders", 0)])
        consumer.seek_to_beginning()
        got = []
        deadline = time.monotonic() + max(0, due / 1000 - time.time()) + WAIT_S  # due, then WAIT_S
        while len(got) < 40 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got += records
        consumer.close()
    finally:
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=WAIT_S)
    ids = {r.value: dict(r.headers)["delay.message.id"].decode() for r in got}
    assert len(got) == 40 and len(ids) == 40
    assert ids[b"first-3"] == "__delay_wheel-0@3"
    assert ids[b"second-3"] == "__delay_wheel-0@23"  # the topic was kept: the same incarnation
    assert all(r.timestamp >= due - 2 for r in got)  # none early
    assert not (data / "broker-0" / "wheel" / "incarnation").exists()


def test_kept_wheel_files_with_a_new_topic_start_the_next_incarnation(tmp_path):
    events = []
    group = SimpleNamespace(
        copies={0: None, 1: None},
        _directory=lambda broker: str(tmp_path / f"broker-{broker}"),
        _emit=lambda kind, **fields: events.append((kind, fields)),
    )
    for broker in (0, 1):
        (tmp_path / f"broker-{broker}").mkdir()
    assert WheelGroup._incarnation(group, new_topic=False) == 0
    assert WheelGroup._incarnation(group, new_topic=True) == 1
    assert WheelGroup._incarnation(group, new_topic=False) == 1  # a restart that kept the topic
    assert WheelGroup._incarnation(group, new_topic=True) == 2
    assert [(tmp_path / f"broker-{b}" / "incarnation").read_text() for b in (0, 1)] == ["2", "2"]
    assert [fields["ids"] for _, fields in events] == [
        "__delay_wheel-0.1@<offset>",
        "__delay_wheel-0.2@<offset>",
    ]
    assert (ingest_label(0), ingest_label(2)) == ("__delay_wheel-0", "__delay_wheel-0.2")
