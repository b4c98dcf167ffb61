"""Properties of the file wheel on the emulated cluster (Hypothesis, autojump clock, real files).

Every accepted message is delivered at least once, never before its due time; without faults
exactly once and less than one tick late. A crash of the active forwarder's broker at any
moment (and its restart) loses nothing and forwards at most one batch twice.
"""

from __future__ import annotations

import tempfile

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.runtime import deterministic_scheduling
from minibroker.sim import TopicSpec
from tests.delayed_messages.helpers import play, wheel_cluster

TICK = 100
BATCH = 4
SENDS = st.lists(
    st.tuples(st.integers(0, 3_000), st.integers(1, 6_000), st.integers(1, 3)), min_size=1, max_size=12
)
FAULT = st.one_of(st.none(), st.tuples(st.integers(0, 8_000), st.booleans()))


async def scenario(sends, fault, data_dir):
    wheel = {"delay.wheel.slots": 20, "delay.wheel.tick.ms": TICK, "delay.wheel.forward.batch": BATCH}
    topics = [TopicSpec("orders", 1, 2, assignment=((2, 1),))]
    async with wheel_cluster(3, topics, data_dir, wheel) as (cluster, group, _):
        cluster.set_latency("delay-wheel-0", 2, 7)
        accepted = await play(cluster, [(at, d, 0, n) for at, d, n in sends], fault, 1_000, 30_000)
        return accepted, group.stats.by_id(), fault is not None


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SENDS, FAULT, st.integers(0, 2**16))
def test_every_accepted_message_is_delivered_never_early_and_within_a_tick(sends, fault, seed):
    with tempfile.TemporaryDirectory() as data_dir, deterministic_scheduling(seed):
        accepted, delivered, faulty = trio.run(
            scenario, sends, fault, data_dir, clock=trio.testing.MockClock(autojump_threshold=0)
        )
    duplicates = 0
    for message_id, (sent, delay) in accepted.items():
        deliveries = delivered.get(message_id, [])
        assert deliveries, f"{message_id} (sent {sent}, delay {delay}) was never delivered"
        duplicates += len(deliveries) - 1
        for d in deliveries:
            assert d.due_ms == sent + delay
            assert d.delivered_ms >= d.due_ms
            if not faulty:
                # the tick's rounding plus the forward's round trip (2 x 7 ms) per batch before it
                assert d.delivered_ms - d.due_ms < TICK + 14 * (len(accepted) // BATCH + 1)
    assert duplicates <= (BATCH if faulty else 0)
