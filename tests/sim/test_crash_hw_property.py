"""Hypothesis, in virtual time: after any one broker crash (or controlled shutdown), acks=all produces on
every partition whose leader survives and whose ISR still meets min.insync.replicas complete within the
ISR-shrink bound (KIP-841: a fenced or shutting-down follower holds back no HW).

The bound. Let L be the link latency, F the time the controller removes the broker from the ISRs (the
crash plus ``crash_detection_ms``, or the shutdown itself) and s the time a produce is sent. The shrink
and the fencing reach the leader at F + L, and the HW rises then if the remaining ISR has the records;
the answer travels L more. The produce reaches the leader at s + L; a follower fetch answered just before
(with an earlier record) comes back by s + 2L, the next one brings the records by s + 4L and the one
after reports them at s + 5L; the answer travels L more. So the produce completes with NONE by

    max(s + 6L, F + 2L) + 2 ms

(the 2 ms cover, at L = 0, the fetcher's 1 ms pause after a round that brought nothing).
Were the crashed broker, still "caught up", to hold the HW, those produces would wait for its restart or
expire after ``request.timeout.ms``.

Bounded for CI: at most 5 brokers, 5 partitions, 60 examples, each a few virtual seconds.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec, open_cluster

SLACK_MS = 2


@st.composite
def outages(draw):
    brokers = draw(st.integers(3, 5))
    replication = draw(st.integers(2, brokers))
    return {
        "brokers": brokers,
        "partitions": draw(st.integers(1, 5)),
        "replication": replication,
        "min_isr": draw(st.integers(1, replication)),
        "latency": draw(st.integers(0, 5)),
        "detection": draw(st.integers(0, 300)),
        "victim": draw(st.integers(0, brokers - 1)),
        "shutdown": draw(st.booleans()),
        "crash_at": draw(st.integers(50, 1000)),
        # produce times relative to the crash, one list per partition
        "offsets": draw(st.lists(st.lists(st.integers(-40, 400), max_size=3), min_size=5, max_size=5)),
    }


async def run_outage(o: dict) -> list[tuple[str, int, str, int | None, int]]:
    """Every produce on a qualifying partition: (partition, sent, error, completed, bound)."""
    spec = TopicSpec("t", o["partitions"], o["replication"])
    config = {"min.insync.replicas": o["min_isr"]}
    checked = []
    async with open_cluster(
        o["brokers"], [spec], config, latency_ms=o["latency"], crash_detection_ms=o["detection"]
    ) as cluster:
        producer = cluster.producer("p", acks=-1)
        victim, crash_at, latency = o["victim"], o["crash_at"], o["latency"]
        fenced_at = crash_at if o["shutdown"] else crash_at + o["detection"]
        plan = sorted((crash_at + offset, p) for p in range(o["partitions"]) for offset in o["offsets"][p])
        sent = []
        crashed = False
        for at, p in plan:
            if not crashed and at >= crash_at:
                await cluster.clock.sleep_until(crash_at)
                (cluster.shutdown if o["shutdown"] else cluster.crash)(victim)
                crashed = True
            await cluster.clock.sleep_until(at)
            sent.append((p, at, producer.send("t", p)))
        end = max([fenced_at, *(at for at, _ in plan)]) + 4 * latency + 1000
        await cluster.clock.sleep_until(end)
        for p, at, request in sent:
            state = cluster.controller.state[TopicPartition("t", p)]
            survivors = [b for b in state.replicas if b != victim]
            if state.replicas[0] == victim or len(survivors) < min(o["min_isr"], len(state.replicas)):
                continue  # failed over, or under min ISR: other rules apply
            bound = max(at + 6 * latency, fenced_at + 2 * latency) + SLACK_MS
            checked.append((f"t-{p}", at, request.errors.get(f"t-{p}"), request.completed_ms, bound))
    return checked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outages())
def test_acks_all_produces_complete_within_the_isr_shrink_bound_after_a_crash(outage):
    checked = trio.run(run_outage, outage, clock=trio.testing.MockClock(autojump_threshold=0))
    late = [
        (tp, sent, error, completed, bound)
        for tp, sent, error, completed, bound in checked
        if error != "NONE" or completed is None or completed > bound
    ]
    assert not late, late
