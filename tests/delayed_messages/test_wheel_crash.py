"""kill -9 of a real process writing to or firing the file wheel, then a restart.

No acknowledged message is lost; a kill during forwarding sends at most the message in flight
twice. The kill lands wherever the child happens to be when the parent has read enough lines.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

WORKER = [sys.executable, "-m", "tests.delayed_messages.wheel_worker"]
ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


def spawn(*args):
    return subprocess.Popen([*WORKER, *map(str, args)], stdout=subprocess.PIPE, text=True, env=ENV)


def read_until_killed(process, prefix, count):
    """Read ``count`` lines starting with ``prefix``, then SIGKILL the child; every line read."""
    lines = []
    seen = 0
    for line in process.stdout:
        lines.append(line.strip())
        seen += line.startswith(prefix)
        if seen >= count:
            process.send_signal(signal.SIGKILL)
            break
    lines += [line.strip() for line in process.stdout]
    process.wait(timeout=30)
    return lines


def finish(directory, out):
    command = [*WORKER, "run", directory, out]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_kill_during_writes_loses_no_acknowledged_message(tmp_path):
    directory, out = str(tmp_path / "wheel"), str(tmp_path / "out")
    lines = read_until_killed(spawn("write", directory, 100_000), "ack ", 1_500)
    acked = {line.split()[1] for line in lines if line.startswith("ack ")}
    assert len(acked) >= 1_500
    report = finish(directory, out)
    assert report[-1] == "finished"
    delivered = Counter(Path(out).read_text().split())
    assert acked <= set(delivered)
    assert max(delivered.values()) == 1
    # a torn last append (not acknowledged) is reported with its file and offset, and skipped
    for line in report:
        if line.startswith("damage "):
            assert ".firing: damaged record at byte " in line


def test_kills_during_forwarding_send_at_most_the_message_in_flight_twice(tmp_path):
    directory, out = str(tmp_path / "wheel"), str(tmp_path / "out")
    writer = subprocess.run([*WORKER, "write", directory, "2000"], capture_output=True, text=True, env=ENV)
    acked = {line.split()[1] for line in writer.stdout.splitlines() if line.startswith("ack ")}
    assert len(acked) == 2_000
    kills = 0
    for target in (300, 700, 400):
        read_until_killed(spawn("run", directory, out), "fwd ", target)
        kills += 1
    assert finish(directory, out)[-1] == "finished"
    delivered = Counter(Path(out).read_text().split())
    assert set(delivered) == acked
    twice = [m for m, n in delivered.items() if n > 1]
    assert len(twice) <= kills and all(delivered[m] == 2 for m in twice)
    assert os.listdir(directory) == ["pointer"]


def test_random_kills_during_delayed_traffic_lose_nothing_send_nothing_early(tmp_path):
    """Ten kill -9 at seeded random moments while messages are appended, fired, forwarded and rolled
    (delays up to 3.5 s on a 2 s wheel); each restart opens the wheel and goes on where the acks
    stopped. Then every acknowledged message was forwarded, none before its due tick, none more than
    twice, and no more twice-forwarded ones than kills (the forward batch is one message)."""
    from tests.delayed_messages.wheel_worker import TICK_MS, due_ms, sent_ms

    rng = random.Random(20_261_128)
    directory, out = str(tmp_path / "wheel"), str(tmp_path / "out")
    total, kills, first = 3_000, 10, 0
    acked: set[str] = set()
    repairs = []
    for _ in range(kills):
        lines = read_until_killed(
            spawn("traffic", directory, out, first, total - first), "", rng.randint(20, 500)
        )
        # the wheel started (after a line for each leftover of the last kill it repaired)
        assert _after_repairs(lines)[0] == "open", lines[:3]
        acked |= {line.split()[1] for line in lines if line.startswith("ack ")}
        repairs += [line for line in lines if line.startswith("repair ")]
        first = 1 + max((int(m[1:]) for m in acked), default=-1)
        assert first < total, "the kills came too late to land in the traffic"
    report = finish_traffic(directory, out, first, total - first, sent_ms(total) + 3_500 + TICK_MS)
    assert _after_repairs(report)[0] == "open" and report[-1] == "finished"
    acked |= {line.split()[1] for line in report if line.startswith("ack ")}
    assert len(acked) == total
    forwarded = [line.split() for line in Path(out).read_text().splitlines()]
    counts = Counter(message for message, _ in forwarded)
    assert set(counts) == acked  # every acknowledged message, nothing else
    assert all(int(tick) * TICK_MS >= due_ms(int(m[1:])) for m, tick in forwarded)  # never early
    twice = [m for m, n in counts.items() if n > 1]
    assert max(counts.values()) <= 2 and len(twice) <= kills, twice
    print(f"{kills} kills, {len(twice)} forwarded twice, repairs: {repairs}")


def finish_traffic(directory, out, first, count, end_ms):
    command = [*WORKER, "traffic", directory, out, str(first), str(count), str(end_ms)]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _after_repairs(lines: list[str]) -> list[str]:
    """A worker's lines without the ``repair`` notes the wheel prints while it opens."""
    return [line for line in lines if not line.startswith("repair ")]
