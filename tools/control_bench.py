"""The control API under a slowloris crowd: does ``serve``'s Kafka listener notice?

Usage::

    python tools/control_bench.py                 # 1,000 hostile connections, 7 round trips per phase
    python tools/control_bench.py --json          # the same figures, machine-readable
    python tools/control_bench.py --connections 200 --round-trips 3

It starts ``minibroker serve --brokers 3 --topic rt:1:3 --control 0`` in a process of its own
and measures, in three phases:

idle      the Kafka round trip with nothing on the control port;
hostile   the same while ``--connections`` connections to the control port each send the
          first bytes of a request head and hold (a slowloris crowd): the server serves 64
          of them until its read timeout and answers the rest 503 at once;
after     the same once every one of them hung up at the same moment.

A round trip is one record produced by kafka-python with acks=all (replicated to both
followers before it is acknowledged) and read back by a kafka-python consumer already
polling the partition: the send until the record is in the consumer's hands. Each phase
reports the median of ``--round-trips`` round trips and, read from /proc, the serve
process's threads, open file descriptors and resident memory (the most seen during the
phase), and the serve process's CPU time per round trip (which, unlike the round trip, does
not depend on what else the machine runs). The hostile phase starts once serve has dealt
with every connection of the crowd (64 held, the rest answered 503: one stderr line each);
the after phase starts at the hang-up, and ``settled`` is read once serve logged the last
held connection's end. ``ratio`` is the hostile median over the idle median. The serve
process's stderr must hold no traceback: the tool fails otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_baseline import Figure, add_arguments, check, compare_tool  # noqa: E402

from minibroker.server.control_http import MAX_CONNECTIONS  # noqa: E402

#: compared with ``--baseline REV``: this tree ÷ REV
FIGURES = [
    Figure("ratio", "lower"),
    Figure("idle.round_trip_ms", "lower"),
    Figure("hostile.round_trip_ms", "lower"),
    Figure("hostile.fds", "lower"),
    Figure("hostile.rss_kib", "lower"),
]

#: the first bytes of a request head, never finished
PARTIAL_HEAD = b"POST /v1/crash HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"
TIMEOUT_S = 60.0
#: round trips made before the idle phase and not counted
WARM_UP = 5


def process_figures(pid: int) -> dict[str, int]:
    """The serve process's threads, open file descriptors and resident memory (KiB), from /proc."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = {line.split(":")[0]: line.split(":")[1].split() for line in status}
    ticks = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]  # utime, stime
    return {
        "cpu_ms": sum(int(t) for t in ticks) * 1000 // os.sysconf("SC_CLK_TCK"),
        "threads": int(fields["Threads"][0]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "rss_kib": int(fields["VmRSS"][0]),
    }


def raise_file_limit(wanted: int) -> int:
    """Raise this process's soft limit of open files toward ``wanted`` (within the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Serve:
    """``minibroker serve`` with a control port, in a process of its own; stderr kept in a file."""

    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (read and closed by stop)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--brokers", "3"]
        command += ["--topic", "rt:1:3", "--config", "min.insync.replicas=2", "--control", "0"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env
        )
        assert self.process.stdout is not None
        lines = [self.process.stdout.readline() for _ in range(4)]
        if not lines[3].startswith("control API on http://"):
            raise RuntimeError(f"serve did not start: {lines} {self.stop()}")
        self.bootstrap = ",".join(line.split()[-1] for line in lines[:3])
        host, port = lines[3].split()[3].removeprefix("http://").removesuffix("/v1/").rsplit(":", 1)
        self.control = (host, int(port))

    def figures(self) -> dict[str, int]:
        return process_figures(self.process.pid)

    def wait_for_lines(self, count: int, seconds: float = 15.0) -> int:
        """Until serve wrote ``count`` stderr lines (one per hostile connection it is done with), or
        ``seconds`` passed; the lines written."""
        deadline = time.monotonic() + seconds
        while (written := self.log().count("\n")) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return written

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self) -> str:
        """Stop serve; its stderr."""
        self.process.terminate()
        self.process.wait(TIMEOUT_S)
        log = self.log()
        self.stderr.close()
        return log


class RoundTrip:
    """A kafka-python producer (acks=all) and a consumer of the same partition, kept connected."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            fetch_max_wait_ms=500,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.tp = TopicPartition("rt", 0)
        self.consumer.assign([self.tp])
        self.sent = 0
        for _ in range(WARM_UP):  # connections, metadata, the first fetch position, the fetchers' rhythm
            self.once()

    def once(self) -> float:
        """Seconds from the send to the record in the consumer's hands."""
        value = b"%d" % self.sent
        self.sent += 1
        start = time.monotonic()
        self.producer.send("rt", value).get(TIMEOUT_S)
        while True:
            records = self.consumer.poll(timeout_ms=1000).get(self.tp, [])
            if any(r.value == value for r in records):
                return time.monotonic() - start
            if time.monotonic() - start > TIMEOUT_S:
                raise RuntimeError("a produced record was not read back")

    def close(self) -> None:
        self.producer.close(5)
        self.consumer.close()


def phase(serve: Serve, trip: RoundTrip, round_trips: int) -> dict[str, Any]:
    times, first = [], serve.figures()
    peak = dict(first)
    for _ in range(round_trips):
        times.append(trip.once())
        now = serve.figures()
        peak = {key: max(peak[key], now[key]) for key in peak}
    return {
        "round_trip_ms": round(statistics.median(times) * 1000, 2),
        "round_trips_ms": [round(t * 1000, 2) for t in times],
        "serve_cpu_ms_per_round_trip": round((peak.pop("cpu_ms") - first["cpu_ms"]) / round_trips, 1),
        **peak,
    }


def hostile(address: tuple[str, int], connections: int) -> list[socket.socket]:
    """``connections`` sockets to the control port, each with a request head begun and left unfinished."""
    crowd = []
    for _ in range(connections):
        sock = socket.create_connection(address, timeout=TIMEOUT_S)
        sock.sendall(PARTIAL_HEAD)
        crowd.append(sock)
    return crowd


def _by_status(log: str) -> dict[str, int]:
    """serve's stderr lines counted by the control API's answer (``other``: any other line)."""
    counts: dict[str, int] = {}
    for line in log.splitlines():
        match = re.match(r"minibroker serve: control API: (\d{3}) ", line)
        key = match.group(1) if match else "other"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def run(connections: int, round_trips: int) -> dict[str, Any]:
    limit = raise_file_limit(connections + 256)
    if limit < connections + 64:
        raise RuntimeError(
            f"{connections} connections need {connections + 64} open files; the limit is {limit}"
        )
    serve = Serve()
    try:
        trip = RoundTrip(serve.bootstrap)
        try:
            idle = phase(serve, trip, round_trips)
            start = time.monotonic()
            cpu = serve.figures()["cpu_ms"]
            crowd = hostile(serve.control, connections)
            opened_s = time.monotonic() - start
            refused = connections - MAX_CONNECTIONS
            serve.wait_for_lines(refused)  # every connection accepted: served (held) or refused
            settled_s = time.monotonic() - start
            connect_cpu_ms = serve.figures()["cpu_ms"] - cpu
            under = phase(serve, trip, round_trips)
            for sock in crowd:
                sock.close()
            after = phase(serve, trip, round_trips)
            serve.wait_for_lines(connections)
            after.update(settled=serve.figures())
        finally:
            trip.close()
    finally:
        log = serve.stop()
    if "Traceback" in log:
        raise RuntimeError(f"a traceback reached serve's stderr:\n{log}")
    return {
        "connections": connections,
        "round_trips": round_trips,
        "connect_s": round(opened_s, 2),
        "settle_s": round(settled_s, 2),
        "connect_serve_cpu_ms": connect_cpu_ms,
        "idle": idle,
        "hostile": under,
        "after": after,
        "ratio": round(under["round_trip_ms"] / idle["round_trip_ms"], 2),
        "stderr_lines": len(log.splitlines()),
        "stderr_lines_by_status": _by_status(log),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000, help="hostile connections (default 1000)")
    parser.add_argument("--round-trips", type=int, default=7, help="round trips per phase (default 7)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.connections < 1 or args.round_trips < 1:
        parser.error("--connections and --round-trips must be at least 1")
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    report = run(args.connections, args.round_trips)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{report['connections']} hostile connections to the control port (opened in {report['connect_s']} s)"
    )
    for name in ("idle", "hostile", "after"):
        p = report[name]
        print(
            f"{name:8} round trip {p['round_trip_ms']:8.2f} ms   threads {p['threads']:3}   "
            f"fds {p['fds']:4}   RSS {p['rss_kib'] / 1024:6.1f} MiB"
        )
    print(f"hostile / idle round trip: {report['ratio']}x; serve wrote {report['stderr_lines']} stderr lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
