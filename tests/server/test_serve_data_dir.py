"""``minibroker serve --data-dir DIR`` / ``--keep-data``: where the file wheel's files live, and that the
default temporary directory is gone at exit. A real ``serve`` process and kafka-python on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.server.conftest import WAIT_S
from tests.server.test_delay_serve import WHEEL_SCENARIO
from tests.server.test_serve_cli import start

WHEEL = WHEEL_SCENARIO  # tick 100 ms, 600 slots, three copies


def send_due_in_an_hour(ports: list[int]) -> None:
    """One record into the wheel, due long after the server stops (so it stays in its slot file)."""
    producer = KafkaProducer(bootstrap_servers=[f"127.0.0.1:{p}" for p in ports], acks="all")
    due = int(time.time() * 1000) + 3_600_000
    headers = [("delay.real.topic", b"orders"), ("delay.due.ms", str(due).encode())]
    producer.send("__delay_wheel", value=b"kept", headers=headers).get(timeout=WAIT_S)
    producer.close()


def wheel_files(directory) -> dict[str, list[str]]:
    brokers = sorted(b for b in os.listdir(directory) if b.startswith("broker-"))
    return {b: sorted(os.listdir(os.path.join(directory, b, "wheel"))) for b in brokers}


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 130, err
    return err


def wait_for_slot_logs(directory) -> dict[str, list[str]]:
    """The wheel's files once every copy holds a slot log (the ingest reads the topic a fetch later)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        files = wheel_files(directory)
        if all(any(n.endswith(".log") for n in names) for names in files.values()):
            return files
        time.sleep(0.05)
    raise AssertionError(f"no slot log in every copy: {wheel_files(directory)}")


def test_data_dir_holds_the_wheel_files_and_keeps_them(tmp_path):
    path = tmp_path / "wheel.toml"
    path.write_text(WHEEL)
    data = tmp_path / "data"
    process, ports, _ = start(str(path), "--port", "0", "--data-dir", str(data))
    try:
        send_due_in_an_hour(ports)
        files = wait_for_slot_logs(data)
    finally:
        stop(process)
    assert sorted(files) == ["broker-0", "broker-1", "broker-2"]
    slot = [n for n in files["broker-0"] if n.endswith(".log")]
    assert len(slot) == 1 and files["broker-1"] == files["broker-0"] == ["pointer", *slot]
    assert b"kept" in (data / "broker-0" / "wheel" / slot[0]).read_bytes()  # still there after exit


def test_the_default_directory_is_temporary_and_keep_data_keeps_it(tmp_path):
    path = tmp_path / "wheel.toml"
    path.write_text(WHEEL)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    os.environ["TMPDIR"] = str(tmp)  # start() passes the environment on; tempfile in the child uses it
    try:
        process, ports, _ = start(str(path), "--port", "0")
        send_due_in_an_hour(ports)
        (made,) = os.listdir(tmp)
        assert made.startswith("minibroker-wheel-")
        wait_for_slot_logs(tmp / made)
        stop(process)
        assert os.listdir(tmp) == []  # removed at exit, slot file and all
        process, ports, _ = start(str(path), "--port", "0", "--keep-data")
        send_due_in_an_hour(ports)
        err = stop(process)
    finally:
        del os.environ["TMPDIR"]
    (kept,) = os.listdir(tmp)
    assert f"file wheel data kept in {tmp / kept}\n" in err
    assert wheel_files(tmp / kept)["broker-0"][0] == "pointer"


def serve_once(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--duration", "0.5", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_data_dir_without_a_wheel_keeps_the_cluster_and_says_so(tmp_path):
    data = tmp_path / "data"
    done = serve_once("--data-dir", str(data), "--topic", "t:2:3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[3] == (
        f"state: kept in {data} and recovered on the next start (docs/serve.md#persistence)"
    )
    assert sorted(os.listdir(data)) == ["broker-0", "broker-1", "broker-2", "cluster.json"]
    assert sorted(os.listdir(data / "broker-1")) == [
        "replication-offset-checkpoint",
        "t-0",
        "t-1",
    ]


def test_a_data_dir_of_another_broker_count_or_topic_layout_is_refused_in_one_line(tmp_path):
    data = tmp_path / "data"
    assert serve_once("--data-dir", str(data), "--topic", "t:2:3").returncode == 0
    more = serve_once("--data-dir", str(data), "--brokers", "4")
    assert (more.returncode, more.stderr) == (
        2,
        f"minibroker: serve: --data-dir '{data}' holds a cluster of 3 brokers, not 4: start it with 3 "
        "brokers or use another directory\n",
    )
    other = serve_once("--data-dir", str(data), "--topic", "t:3:3")
    assert (other.returncode, other.stderr) == (
        2,
        f"minibroker: serve: --data-dir '{data}' holds topic 't' with 2 partitions and replication factor 3, "
        "not 3 and 3\n",
    )
    same = serve_once("--data-dir", str(data), "--topic", "t:2:3", "--topic", "u")
    assert same.returncode == 0, same.stderr


def test_a_data_dir_that_is_a_file_or_holds_garbage_is_refused_in_one_line(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("x")
    done = serve_once("--data-dir", str(regular))
    assert (done.returncode, done.stderr) == (
        2,
        f"minibroker: serve: --data-dir '{regular}' is a file; expected a directory\n",
    )
    stranger = tmp_path / "home"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    done = serve_once("--data-dir", str(stranger))
    assert (done.returncode, done.stderr) == (
        2,
        f"minibroker: serve: --data-dir '{stranger}' holds notes.txt: expected an empty directory or one "
        "written by minibroker serve --data-dir\n",
    )
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "cluster.json").write_bytes(b"\x00\xffnot json")
    done = serve_once("--data-dir", str(garbled))
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"minibroker: serve: --data-dir: {garbled / 'cluster.json'}: not minibroker"
    )
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_corrupt_segment_tail_is_cut_with_one_line_and_the_rest_is_served(tmp_path):
    data = tmp_path / "data"
    process, ports, _ = start("--port", "0", "--data-dir", str(data), "--topic", "t:1:1")
    try:
        producer = KafkaProducer(bootstrap_servers=[f"127.0.0.1:{p}" for p in ports], acks="all")
        offsets = [producer.send("t", value=b"v%d" % i).get(timeout=WAIT_S).offset for i in range(3)]
        producer.close()
    finally:
        stop(process)
    assert offsets == [0, 1, 2]
    segment = data / "broker-0" / "t-0" / "00000000000000000000.log"
    whole = segment.read_bytes()
    segment.write_bytes(whole + b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x01\x00torn")
    process, ports, _ = start("--port", "0", "--data-dir", str(data))
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=[f"127.0.0.1:{p}" for p in ports], consumer_timeout_ms=3000
        )
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek_to_beginning()
        values = [record.value for record in consumer]
        consumer.close()
    finally:
        err = stop(process)
    assert values == [b"v0", b"v1", b"v2"]
    assert segment.read_bytes() == whole
    assert err.splitlines()[0] == (
        "minibroker serve: broker-0/t-0/00000000000000000000.log: 16 bytes, less than a batch header; "
        f"truncated to the last valid batch (position {len(whole)}, 16 bytes dropped)"
    )


def test_delay_levels_of_another_layout_than_the_data_dir_holds_are_refused_in_one_line(tmp_path):
    data, levels = tmp_path / "data", tmp_path / "levels.toml"
    text = (
        '[cluster]\nbrokers = 1\n\n[[topics]]\nname = "orders"\n\n'
        '[delay_service]\n"delay.topic.partitions" = 1\n'
    )
    levels.write_text(text)
    assert serve_once(str(levels), "--data-dir", str(data)).returncode == 0
    levels.write_text(text.replace('"delay.topic.partitions" = 1', '"delay.topic.partitions" = 2'))
    other = serve_once(str(levels), "--data-dir", str(data))
    assert other.returncode == 2, other.stderr
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
    assert other.stderr.startswith("minibroker: serve: topic '__delay_")
    assert "the data dir holds 1 partitions with replication factor 1" in other.stderr
