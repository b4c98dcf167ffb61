"""``minibroker serve`` as a user runs it: listener lines, a bounded run, Ctrl-C, one-line errors, steps."""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from tests.server.conftest import WAIT_S

SERVE = [sys.executable, "-m", "minibroker", "serve"]
LISTENING = re.compile(r"broker (\d+) listening on 127\.0\.0\.1:(\d+)")
#: how long a start may take to print its listener lines: importing, recovering a data dir and binding
#: take well under a second on an idle machine, tens of seconds on a loaded 2-core CI runner
STARTUP_S = 60.0


def start(*args: str) -> tuple[subprocess.Popen, list[int], float]:
    """Start ``serve``; return the process, the ports it printed, and when the last line came."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [*SERVE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    ports = []
    deadline = time.monotonic() + STARTUP_S
    while len(ports) < 3 and time.monotonic() < deadline:
        line = process.stdout.readline()
        match = LISTENING.fullmatch(line.strip())
        if not line:  # stdout closed: the process is ending, and its status and stderr say why
            process.wait(timeout=WAIT_S)
        assert match, (line, process.poll(), process.stderr.read() if process.poll() is not None else "")
        assert int(match.group(1)) == len(ports)
        ports.append(int(match.group(2)))
    return process, ports, time.monotonic()


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=WAIT_S)
    return process.returncode, out, err


def test_a_bounded_run_prints_one_line_per_listener_and_exits_0():
    process, ports, _ = start("--port", "0", "--duration", "1", "--topic", "t:2:3")
    assert len(set(ports)) == 3
    # read here: communicate() reads the pipe itself, past what readline() has buffered
    state = process.stdout.readline()
    assert (
        state
        == "state: in memory only; topics, records and committed offsets are lost when this process ends\n"
    )
    code, out, err = finish(process)
    assert (code, out, err) == (0, "", "minibroker serve: stopped after 1 s\n")


def test_ctrl_c_ends_in_one_line_and_exit_130():
    process, _, _ = start("--port", "0")
    process.send_signal(signal.SIGINT)
    code, _, err = finish(process)
    assert (code, err) == (130, "minibroker: interrupted\n")


def test_a_port_in_use_is_one_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([*SERVE, "--port", str(port), "--duration", "1"], capture_output=True, text=True)
    assert out.returncode == 2
    assert re.fullmatch(
        rf"minibroker: serve: cannot listen on 127\.0\.0\.1:{port}: .*Address already in use\n", out.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--topic", "bad name"],
            "minibroker: serve: --topic 'bad name': expected NAME[:PARTITIONS[:RF]] "
            "(topic name 'bad name' is not 1-249 characters of [a-zA-Z0-9._-])",
        ),
        (
            ["--topic", "t:1:4"],
            "minibroker: serve: --topic 't:1:4': replication factor 4 is more than the 3 brokers",
        ),
        (
            ["--config", "min.insync.replica=2"],
            "minibroker: serve: --config: unknown setting 'min.insync.replica'; ",
        ),
        (["--tui"], "minibroker: serve: --tui draws on a terminal, and stdout is not one"),
        (["--config", "nonsense"], "minibroker: serve: --config 'nonsense': expected KEY=VALUE"),
        (
            ["--port", "70000"],
            "minibroker serve: error: argument --port: expected a port 0..65535, got 70000",
        ),
        (["--port", "65534"], "minibroker: serve: --port 65534: broker 2 would need a port > 65535"),
        (
            ["--duration", "0"],
            "minibroker serve: error: argument --duration: expected a positive number of seconds",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, message):
    out = subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=WAIT_S)
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(message), out.stderr


def test_scenario_steps_play_in_real_time_against_real_clients(tmp_path):
    """broker 2's fetcher is paused from 0 to 2000 ms: an acks=all produce sent meanwhile completes after."""
    from kafka import KafkaProducer

    path = tmp_path / "paused.toml"
    path.write_text(
        textwrap.dedent(
            """
            [cluster]
            brokers = 3
            config = { "min.insync.replicas" = 2 }

            [[topics]]
            name = "t"
            replication_factor = 3

            [[steps]]
            at = 0
            action = "pause"
            broker = 2

            [[steps]]
            at = 2000
            action = "resume"
            broker = 2
            """
        )
    )
    process, ports, listening = start(str(path), "--port", "0", "--duration", "6")
    try:
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=WAIT_S) as garbage:
            garbage.sendall(struct.pack(">i", -1))
            assert garbage.recv(10) == b""
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{ports[0]}", acks="all")
        sent = time.monotonic()
        offset = producer.send("t", b"waits for broker 2", partition=0).get(timeout=WAIT_S).offset
        done = time.monotonic()
        producer.close(timeout=WAIT_S)
    finally:
        process.send_signal(signal.SIGINT)
        code, _, err = finish(process)
    assert offset == 0
    assert done - listening >= 1.5, (sent - listening, done - listening)  # the step at 2000 ms, less start-up
    assert done - sent < 5
    lines = err.splitlines()
    assert re.fullmatch(
        r"minibroker serve: broker 0: 127\.0\.0\.1:\d+: invalid frame size -1; closing", lines[0]
    )
    assert (code, lines[1:]) == (130, ["minibroker: interrupted"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--brokers", "100000", "--duration", "2"],
            "minibroker serve: error: argument --brokers: expected a number of brokers 1..1000, got 100000",
        ),
        (
            ["--topic", "t:1000000:3"],
            "minibroker: serve: --topic 't:1000000:3': expected at most 100,000 partitions, got 1,000,000",
        ),
        (
            ["--topic", "t:40000:3"],
            "minibroker: serve: 120,150 partition replicas in all, internal topics included (the largest: "
            "t 40,000 x 3 (topics), __consumer_offsets 50 x 3 (offsets.topic.num.partitions)); "
            "expected at most 100,000",
        ),
        (
            ["--config", "offsets.topic.num.partitions=2000000"],
            "minibroker: serve: --config.offsets.topic.num.partitions: expected a number from 1 to 100000, "
            "got 2000000",
        ),
        (
            ["--config", "offsets.topic.num.partitions=40000"],
            "minibroker: serve: 120,000 partition replicas in all, internal topics included (the largest: "
            "__consumer_offsets 40,000 x 3 (offsets.topic.num.partitions)); expected at most 100,000",
        ),
        (
            ["--port", "65000", "--brokers", "1000"],
            "minibroker: serve: --port 65000: broker 999 would need a port > 65535",
        ),
        (["--topic", "a", "--topic", "a:2"], "minibroker: serve: a topic is named twice: a, a"),
        (
            ["--port", "9" * 5000],
            "minibroker serve: error: argument --port: expected a port, got '9999999999999999999999999999999"
            "999999999'... (5,000 characters)",
        ),
    ],
)
def test_serve_flags_past_the_run_size_budget_are_one_line_in_process(args, message, capsys):
    """Refused before anything listens (in-process: the flags are checked before the cluster starts)."""
    from minibroker.cli import main

    try:
        code = main(["serve", *args])
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(message), err
