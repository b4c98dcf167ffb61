"""Real Kafka producers against ``minibroker serve``: acks=all throughput on RF 3, and end-to-end latency.

Usage::

    python tools/wire_bench.py            # 50,000 records (kafka-python), 200,000 (confluent-kafka, mock)
    python tools/wire_bench.py --quick    # a tenth of that, and a shorter latency run
    python tools/wire_bench.py --json     # the same figures, machine-readable
    python tools/wire_bench.py --small-batches --clients confluent-kafka,confluent-kafka-mock
                                          # linger.ms 0, batch.size 16384: the server-bound workload

For each client library (kafka-python, confluent-kafka) a fresh server runs in a
process of its own (so the client and the emulated cluster do not share a GIL):
3 brokers, topic ``bench`` with 1 partition, replication factor 3,
``min.insync.replicas=2``, on loopback, in real time. Then:

throughput   one producer with acks=all sends ``--records`` records of ``--size`` bytes
             as fast as it can (the library's default batching: kafka-python
             batch_size 16384, linger_ms 0; librdkafka linger.ms 5) and flushes. Every
             produce request waits in broker 0's Produce purgatory until both
             followers have fetched it. records/s and MB/s are over the wall time from
             the first send to the end of the flush; requests/s counts the Produce
             requests the *server* decoded in that time (exact, not a client metric);
             server_cpu_ms_per_request is the server process's CPU time (user and
             system) over those requests, the figure a busy machine disturbs least.
latency      a producer sends ``--rate`` records/s for ``--seconds`` s to topic ``latency``
             (acks=all) while an assign()-based consumer of the same library polls it
             (fetch.min.bytes 1, max wait 500 ms). A record's end-to-end latency is the
             consumer's receive time minus the send time written in its value (one
             process, one monotonic clock): append, replication to both followers, the
             HW move that makes it visible, and the consumer's parked fetch completing.
             The ack latency is send -> the producer's delivery report (acks=all).

reference    the confluent-kafka producer and consumer again, against librdkafka's own mock
             cluster (``test.mock.num.brokers=3``, in the client's process): the mock
             acknowledges acks=all at once, without waiting for any ISR, so it is the
             cost of the protocol layer alone. Its requests/s come from librdkafka's
             statistics (Produce requests sent). The report ends with minibroker's
             figures divided by the mock's (records/s and e2e p99) and the load average.

The server's log must stay empty (no bad frames, no closed connections): the tool
fails otherwise.

``--linger-ms`` and ``--batch-size`` set every producer's batching (``--small-batches``: 0 and
16384). With ``linger.ms`` 0 a producer sends whatever it holds as soon as it can, many small
requests in flight on one connection; the broker answers them one at a time, so records/s is
the server's cost per request, not the client's. ``minibroker_over_mock`` in the JSON is the
headline: records/s and ack p99 against the mock, from the same run.

``--baseline REV --pairs N`` runs this tool (this tree's script, so both sides get the same
clients and options) against the server of commit REV and of this tree in N alternating pairs
and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import multiprocessing
import os
import platform
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool, package_root

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("results.[client].throughput.records_per_s", "higher"),
    Figure("results.[client].throughput.server_cpu_ms_per_request", "lower"),
    Figure("results.[client].latency.p99_ms", "lower"),
    Figure("results.[client].latency.ack_p99_ms", "lower"),
    Figure("minibroker_over_mock.records_per_s", "higher"),
    Figure("minibroker_over_mock.ack_p99_ms", "lower"),
]

#: the minibroker this tool serves: its own tree's, or the one a ``--baseline`` run names
ROOT = package_root(Path(__file__).resolve().parent.parent)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MOCK = "confluent-kafka-mock"
CLIENTS = ("kafka-python", "confluent-kafka", MOCK)
TIMEOUT_S = 120.0
#: the send time written in a latency run's probe records (sent until the consumer reads one)
PROBE = -1
#: the producers' ``linger.ms`` and ``batch.size`` (None: the library's default), from the command line
LINGER_MS: int | None = None
BATCH_SIZE: int | None = None


def batching() -> dict[str, int]:
    """librdkafka's ``linger.ms`` and ``batch.size`` as the command line set them."""
    return {k: v for k, v in (("linger.ms", LINGER_MS), ("batch.size", BATCH_SIZE)) if v is not None}


# --- the server, in a process of its own -----------------------------------------------------------
def _server(conn: Any) -> None:
    import trio

    trio.run(_server_main, conn)


async def _server_main(conn: Any) -> None:
    import trio

    from minibroker.scenario.model import ClusterSpec, Scenario, TopicSpecModel
    from minibroker.server import serve
    from minibroker.server.serve import for_serving, open_served

    topics = (TopicSpecModel("bench", 1, 3), TopicSpecModel("latency", 1, 3))
    cluster = ClusterSpec(3, config={"min.insync.replicas": 2})
    scenario = for_serving(Scenario("wire-bench", "", "", 0, None, cluster, (), topics, (), (), ()))
    problems: list[str] = []
    async with open_served(scenario, "127.0.0.1", 0, log=problems.append) as served:
        settle = getattr(serve, "freeze_startup_heap", None)  # what `minibroker serve` does once up
        if settle is not None:
            settle()
        conn.send(served.bootstrap_servers)
        while await trio.to_thread.run_sync(conn.recv) == "stats":
            produce = served.cluster.brokers[0].purgatory_totals().get("Produce", {})
            conn.send(
                {
                    "cpu_s": time.process_time(),
                    "requests": dict(served.server.state.requests),
                    "produce_purgatory": produce,
                    "problems": list(problems),
                }
            )


class Server:
    """``with Server() as server:`` a served cluster in a child process; ``stats()`` asks it for figures."""

    def __enter__(self) -> Server:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_server, args=(child,), daemon=True)
        self.process.start()
        if not self.conn.poll(30):
            raise RuntimeError("the server process did not start")
        self.bootstrap: str = self.conn.recv()
        return self

    def stats(self) -> dict[str, Any]:
        self.conn.send("stats")
        if not self.conn.poll(30):
            raise RuntimeError("the server process did not answer")
        return self.conn.recv()

    def __exit__(self, *exc: Any) -> None:
        self.conn.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


# --- clients -------------------------------------------------------------------------------------
class KafkaPython:
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        self.bootstrap = bootstrap
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            max_request_size=2**20,
            **{k: v for k, v in (("linger_ms", LINGER_MS), ("batch_size", BATCH_SIZE)) if v is not None},
        )

    def send(self, topic: str, value: bytes, acked: Callable[[], None] | None = None) -> None:
        future = self.producer.send(topic, value, partition=0)
        if acked is not None:
            future.add_callback(lambda _metadata: acked())

    def flush(self) -> None:
        self.producer.flush(timeout=TIMEOUT_S)

    def close(self) -> None:
        self.producer.close(timeout=TIMEOUT_S)

    def consume(self, topic: str, on_value: Callable[[bytes], None], stop: threading.Event) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_min_bytes=1,
            fetch_max_wait_ms=500,
        )
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        consumer.position(tp)
        self.ready.set()
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=100).values():
                for record in records:
                    on_value(record.value)
        consumer.close()


class Confluent:
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.errors: list[Any] = []
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "error_cb": self.errors.append} | batching()
        )

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)

    def send(self, topic: str, value: bytes, acked: Callable[[], None] | None = None) -> None:
        on_delivery = self._delivered
        if acked is not None:

            def on_delivery(error: Any, message: Any) -> None:
                self._delivered(error, message)
                if error is None:
                    acked()

        while True:
            try:
                self.producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.01)
        self.producer.poll(0)

    def flush(self) -> None:
        if self.producer.flush(TIMEOUT_S):
            raise RuntimeError("confluent-kafka: messages left undelivered")
        if self.errors:
            raise RuntimeError(f"confluent-kafka: {self.errors[:3]}")

    def close(self) -> None:
        self.flush()

    def consume(self, topic: str, on_value: Callable[[bytes], None], stop: threading.Event) -> None:
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "wire-bench",
                "enable.auto.commit": False,
                "fetch.min.bytes": 1,
                "fetch.wait.max.ms": 500,
            }
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        self.ready.set()
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                on_value(message.value())
        consumer.close()


class ConfluentMock(Confluent):
    """The same producer against librdkafka's own mock cluster (``test.mock.num.brokers=3``), in-process.

    The mock answers acks=all at once (it keeps no ISR), so it is the reference for the protocol layer's
    cost. There is no server to ask for request counts: they come from librdkafka's statistics (the
    Produce requests its brokers' connections sent), and the consumer of the latency run bootstraps from
    the mock brokers' addresses named there.
    """

    name = MOCK

    def __init__(self) -> None:
        from confluent_kafka import Producer

        self.errors = []
        self._stats: list[dict[str, Any]] = []
        self.producer = Producer(
            {
                "test.mock.num.brokers": 3,
                "acks": "all",
                "error_cb": self.errors.append,
                "statistics.interval.ms": 200,
                "stats_cb": lambda text: self._stats.append(json.loads(text)),
                "log_level": 3,  # the mock's "Mock cluster enabled" notice is not a problem
            }
            | batching()
        )
        self.bootstrap = ""

    def fresh_stats(self) -> dict[str, Any]:
        """librdkafka's next statistics (the ones after this call), to count requests exactly."""
        seen = len(self._stats)
        deadline = time.monotonic() + 10
        while len(self._stats) == seen:
            if time.monotonic() > deadline:
                raise RuntimeError("confluent-kafka (mock): no statistics within 10 s")
            self.producer.poll(0.05)
        return self._stats[-1]

    def produce_requests(self) -> int:
        return sum(b["req"].get("Produce", 0) for b in self.fresh_stats()["brokers"].values())

    def warmed_up(self) -> None:
        brokers = self.fresh_stats()["brokers"].values()
        self.bootstrap = ",".join(sorted(b["nodename"] for b in brokers if b.get("nodeid", -1) >= 0))


def make_client(name: str, bootstrap: str) -> KafkaPython | Confluent:
    if name == MOCK:
        client: KafkaPython | Confluent = ConfluentMock()
    else:
        client = KafkaPython(bootstrap) if name == "kafka-python" else Confluent(bootstrap)
    client.ready = threading.Event()
    return client


# --- measurements --------------------------------------------------------------------------------
def throughput(
    server: Server | None, client: KafkaPython | Confluent, records: int, size: int
) -> dict[str, Any]:
    value = os.urandom(size)
    client.send("bench", value)  # metadata, connections, producer id: before the clock starts
    client.flush()

    def produce_requests() -> tuple[int, float]:
        """Produce requests so far, and the server process's CPU seconds (0 for the mock)."""
        if server is None:
            return client.produce_requests(), 0.0  # the mock: librdkafka's own count
        stats = server.stats()
        return stats["requests"].get("Produce", 0), stats.get("cpu_s", 0.0)

    if server is None:
        client.warmed_up()
    before, cpu_before = produce_requests()
    start = time.perf_counter()
    for _ in range(records):
        client.send("bench", value)
    client.flush()
    seconds = time.perf_counter() - start
    after, cpu_after = produce_requests()
    requests = after - before
    cpu = {}
    if server is not None:  # the server's work per request: steadier than records/s on a busy machine
        cpu = {"server_cpu_ms_per_request": round((cpu_after - cpu_before) * 1000 / max(1, requests), 4)}
    return {
        "records": records,
        "record_bytes": size,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
        "mb_per_s": round(records * size / seconds / 1e6, 2),
        "produce_requests": requests,
        "requests_per_s": round(requests / seconds),
        "records_per_request": round(records / max(1, requests), 1),
    } | cpu


def latency(client: KafkaPython | Confluent, rate: int, seconds: float) -> dict[str, Any]:
    samples: list[float] = []
    stop = threading.Event()

    probed = threading.Event()
    acks: list[float] = []

    def on_ack(sent: int) -> None:
        acks.append((time.monotonic_ns() - sent) / 1e6)

    def on_value(value: bytes) -> None:
        (sent,) = struct.unpack_from(">q", value)
        if sent == PROBE:
            probed.set()
        else:
            samples.append((time.monotonic_ns() - sent) / 1e6)

    consumer = threading.Thread(target=client.consume, args=("latency", on_value, stop), daemon=True)
    consumer.start()
    if not client.ready.wait(30):
        raise RuntimeError(f"{client.name}: the consumer did not start")
    deadline = time.monotonic() + 30
    while not probed.is_set():  # the consumer reads from the log's end: wait until it reads at all
        if time.monotonic() > deadline:
            raise RuntimeError(f"{client.name}: the consumer read nothing within 30 s")
        client.send("latency", struct.pack(">q", PROBE) + bytes(92))
        client.flush()
        probed.wait(0.2)
    time.sleep(0.5)  # let its next fetch park
    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        due = start + i / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        sent = time.monotonic_ns()
        client.send("latency", struct.pack(">q", sent) + bytes(92), functools.partial(on_ack, sent))
    client.flush()
    deadline = time.monotonic() + 30
    while len(samples) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    consumer.join(30)
    if len(samples) < total:
        raise RuntimeError(f"{client.name}: the consumer got {len(samples)} of {total} records")
    ordered = sorted(samples)
    acked = sorted(acks)
    if len(acked) != total:
        raise RuntimeError(f"{client.name}: {len(acked)} of {total} records were acknowledged")

    def pct(p: float, values: list[float] = ordered) -> float:
        return round(values[min(len(values) - 1, int(p / 100 * len(values)))], 2)

    return {
        "records": total,
        "rate": rate,
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": round(ordered[-1], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
        "ack_p50_ms": pct(50, acked),
        "ack_p99_ms": pct(99, acked),
    }


def run_mock(records: int, size: int, rate: int, seconds: float) -> dict[str, Any]:
    client = make_client(MOCK, "")
    try:
        result = {"client": MOCK, "throughput": throughput(None, client, records, size)}
        result["latency"] = latency(client, rate, seconds)
    finally:
        client.close()
        del client
        gc.collect()
    return result


def run(name: str, records: int, size: int, rate: int, seconds: float) -> dict[str, Any]:
    if name == MOCK:
        return run_mock(records, size, rate, seconds)
    with Server() as server:
        client = make_client(name, server.bootstrap)
        try:
            result = {"client": name, "throughput": throughput(server, client, records, size)}
            result["latency"] = latency(client, rate, seconds)
        finally:
            client.close()
            del client  # librdkafka closes its connections when its handle goes: before the server stops
            gc.collect()
        stats = server.stats()
    if stats["problems"]:
        raise RuntimeError(f"{name}: the server logged problems: {stats['problems'][:3]}")
    result["server_requests"] = stats["requests"]
    result["produce_purgatory"] = stats["produce_purgatory"]
    return result


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {
        package: version(package) for package in ("kafka-python", "confluent-kafka", "trio", "crc32c")
    } | {"python": platform.python_version(), "librdkafka": _librdkafka()}


def _librdkafka() -> str:
    import confluent_kafka

    return confluent_kafka.libversion()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the records, a 1 s latency run")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--records", type=int, help="records per throughput run (default: per client)")
    parser.add_argument("--size", type=int, default=100, help="bytes per record value (default 100)")
    parser.add_argument("--rate", type=int, default=500, help="records/s in the latency run (default 500)")
    parser.add_argument("--seconds", type=float, help="length of the latency run (default 3, --quick 1)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated: " + ", ".join(CLIENTS))
    parser.add_argument(
        "--linger-ms", type=int, help="the producers' linger.ms / linger_ms (default: the library's)"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="the producers' batch.size / batch_size in bytes (default: the library's)",
    )
    parser.add_argument(
        "--small-batches",
        action="store_true",
        help="the server-bound workload: --linger-ms 0 --batch-size 16384 unless given",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.small_batches:
        args.linger_ms = 0 if args.linger_ms is None else args.linger_ms
        args.batch_size = 16384 if args.batch_size is None else args.batch_size
    if args.linger_ms is not None and args.linger_ms < 0:
        parser.error(f"--linger-ms: expected a non-negative integer, got {args.linger_ms}")
    if args.batch_size is not None and args.batch_size < 1:
        parser.error(f"--batch-size: expected a positive integer, got {args.batch_size}")
    names = [n.strip() for n in args.clients.split(",") if n.strip()]
    unknown = [n for n in names if n not in CLIENTS]
    if unknown or not names:
        parser.error(f"--clients: expected some of {', '.join(CLIENTS)}, got {args.clients!r}")
    commit = check(parser, args)
    if commit is not None:
        # one workload on both sides: this tool's clients and options, each tree's server
        return compare_tool(
            __file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline, same_tool=True
        )
    global LINGER_MS, BATCH_SIZE
    LINGER_MS, BATCH_SIZE = args.linger_ms, args.batch_size
    scale = 10 if args.quick else 1
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    results = []
    for name in names:
        records = args.records or (50_000 if name == "kafka-python" else 200_000) // scale
        results.append(run(name, records, args.size, args.rate, seconds))
    report = {
        "setup": "3 brokers, 1 partition, replication factor 3, min.insync.replicas 2, acks=all, loopback",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": versions(),
        "batching": {"linger_ms": args.linger_ms, "batch_size": args.batch_size},
        "results": results,
    }
    by_client = {r["client"]: r for r in results}
    if "confluent-kafka" in by_client and MOCK in by_client:
        ours, mock = by_client["confluent-kafka"], by_client[MOCK]
        report["minibroker_over_mock"] = {
            "records_per_s": round(
                ours["throughput"]["records_per_s"] / mock["throughput"]["records_per_s"], 2
            ),
            "p99_ms": round(ours["latency"]["p99_ms"] / mock["latency"]["p99_ms"], 2),
            "ack_p99_ms": round(ours["latency"]["ack_p99_ms"] / mock["latency"]["ack_p99_ms"], 2),
        }
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print(
        f"# {report['setup']}; {os.cpu_count()} CPUs; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items())
    )
    print(
        f"{'client':<16}{'records':>9}{'bytes':>7}{'records/s':>11}{'MB/s':>7}{'requests/s':>12}"
        f"{'rec/req':>9}{'e2e p50':>9}{'p90':>8}{'p99':>8}{'max':>8}{'ack p50':>9}{'p99':>8}  (ms)"
    )
    for result in results:
        t, lat = result["throughput"], result["latency"]
        print(
            f"{result['client']:<16}{t['records']:>9,}{t['record_bytes']:>7}{t['records_per_s']:>11,}"
            f"{t['mb_per_s']:>7}{t['requests_per_s']:>12,}{t['records_per_request']:>9}"
            f"{lat['p50_ms']:>9}{lat['p90_ms']:>8}{lat['p99_ms']:>8}{lat['max_ms']:>8}"
            f"{lat['ack_p50_ms']:>9}{lat['ack_p99_ms']:>8}"
        )
    ratio = report.get("minibroker_over_mock")
    if ratio is not None:
        print(
            "confluent-kafka against minibroker / against librdkafka's mock: "
            f"records/s x{ratio['records_per_s']}, e2e p99 x{ratio['p99_ms']}, ack p99 x{ratio['ack_p99_ms']}"
        )
    print("load average (1, 5, 15 min) at the end: " + ", ".join(map(str, report["load_average"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
