"""Hypothesis over random produce / fetch / fault sequences on the emulated cluster.

Properties:
- every delayed operation completes at most once, and exactly once unless its
  broker crashed while it waited (its purgatory is gone);
- every client request ends exactly once;
- when a leader acknowledges an acks=-1 produce with NONE, every member of the
  partition's ISR holds the records.
"""

from __future__ import annotations

from collections import Counter

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec, open_cluster
from minibroker.trace import RecordingTracer

TP = TopicPartition("t", 0)
BROKER = st.integers(0, 2)
ACTIONS = st.one_of(
    st.tuples(st.just("produce"), st.sampled_from([-1, -1, 1, 0]), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.sampled_from([1, 300]), st.sampled_from([0, 100, 500])),
    st.tuples(st.just("pause"), BROKER),
    st.tuples(st.just("resume"), BROKER),
    st.tuples(st.just("crash"), BROKER),
    st.tuples(st.just("restart"), BROKER),
    st.tuples(st.just("shutdown"), BROKER),
    st.tuples(st.just("latency"), BROKER, BROKER, st.integers(0, 30)),
    st.tuples(st.just("drop"), BROKER, BROKER),
    st.tuples(st.just("heal"), BROKER, BROKER),
)
STEPS = st.lists(st.tuples(st.integers(0, 400), ACTIONS), min_size=1, max_size=25)


class Checker:
    """A trace sink that checks acknowledgements the moment they happen."""

    def __init__(self) -> None:
        self.cluster = None
        self.acks: dict[str, int] = {}
        self.required: dict[str, int] = {}
        self.created: dict[str, tuple[int, int]] = {}
        self.completed: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.crashes: list[tuple[int, int]] = []
        self.acknowledged = 0
        self.end_ms = 0

    def __call__(self, event: dict) -> None:
        kind = event["kind"]
        if kind == "produce.request":
            self.acks[event["op"]] = event["acks"]
        elif kind == "append":
            self.required[event["op"]] = event["offset"] + event["count"]
        elif kind == "op.create":
            self.created[event["op"]] = (event["broker"], event["seq"], event["time_ms"] + event["delay_ms"])
        elif kind == "op.complete":
            self.completed[event["op"]] += 1
        elif kind.startswith("client.") and kind.endswith(".done"):
            self.done[event["op"]] += 1
        elif kind == "fault" and event["fault"] in ("crash", "shutdown"):
            self.crashes.append((event["broker"], event["seq"]))
        elif kind == "produce.response" and event["error"] == "NONE" and self.acks.get(event["op"]) == -1:
            self._check_acknowledged(event)

    def _check_acknowledged(self, event: dict) -> None:
        leader = self.cluster.brokers[event["broker"]].replica_manager
        partition = leader.partitions[TP]
        required = self.required[event["op"]]
        for member in partition.isr:
            log = self.cluster.brokers[member].logs[TP]
            assert log.log_end_offset >= required, (event, member, log.log_end_offset, partition.isr)
        self.acknowledged += 1


async def scenario(steps) -> Checker:
    checker = Checker()
    tracer = RecordingTracer(lambda: 0, [checker])
    config = {"replica.lag.time.max.ms": 600, "min.insync.replicas": 2}
    async with open_cluster(3, [TopicSpec("t", 1, 3)], config, tracer=tracer, latency_ms=1) as cluster:
        tracer.clock = cluster.now
        checker.cluster = cluster
        producer = cluster.producer("p", request_timeout_ms=1500)
        producers = {
            acks: cluster.producer(f"p{acks}", acks=acks, request_timeout_ms=1500) for acks in (-1, 0, 1)
        }
        del producer
        consumers = []
        for delay, action in steps:
            await cluster.clock.sleep_until(cluster.now() + delay)
            name, *args = action
            if name == "produce":
                producers[args[0]].send("t", 0, count=args[1], size=100 * args[1])
            elif name == "fetch":
                consumer = cluster.consumer(
                    f"c{len(consumers)}", fetch_min_bytes=args[0], fetch_max_wait_ms=args[1]
                )
                consumer.assign([TP])
                consumer.fetch()
                consumers.append(consumer)
            elif name == "pause":
                cluster.pause_fetcher(args[0])
            elif name == "resume":
                cluster.resume_fetcher(args[0])
            elif name == "crash":
                cluster.crash(args[0])
            elif name == "restart":
                await cluster.restart(args[0])
            elif name == "shutdown":
                cluster.shutdown(args[0])
            elif name == "latency":
                cluster.set_latency(args[0], args[1], args[2])
            elif name == "drop" and args[0] != args[1]:
                cluster.drop_link(args[0], args[1])
            elif name == "heal":
                cluster.heal_link(args[0], args[1])
        await cluster.clock.sleep_until(cluster.now() + 5000)
        await trio.testing.wait_all_tasks_blocked()  # let everything due at this instant run
        assert all(request.completed for request in cluster.requests), [
            r for r in cluster.requests if not r.completed
        ]
        assert set(checker.done) == {request.id for request in cluster.requests}
        checker.end_ms = cluster.now()
    return checker


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_random_produce_fetch_and_faults(steps):
    checker = trio.run(scenario, steps, clock=trio.testing.MockClock(autojump_threshold=0))
    assert all(count == 1 for count in checker.done.values()), checker.done
    assert all(count == 1 for count in checker.completed.values()), checker.completed
    for op, (broker, created_seq, expires_ms) in checker.created.items():
        if checker.completed[op] == 0:
            lost = any(b == broker and seq > created_seq for b, seq in checker.crashes)
            waiting = expires_ms > checker.end_ms  # still within its timeout when the run ended
            assert lost or waiting, f"operation {op} on broker {broker} never completed"
