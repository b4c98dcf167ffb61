"""Properties of delay levels on the emulated cluster (Hypothesis, autojump clock).

Every accepted delayed message reaches its real partition at least once, never before its
due time; without faults exactly once and late by at most its rounding (level - delay), as the
service holds it long before it is due. A crash of the broker that leads the levels at any
moment loses nothing and forwards at most the uncommitted rounds (forward.rounds x max.in.flight) twice.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.runtime import deterministic_scheduling
from minibroker.sim import TopicSpec
from tests.delayed_messages.helpers import delayed_cluster, play

LEVELS = ["1s", "5s", "10s", "30s"]
MAX_IN_FLIGHT = 3
ROUNDS = 2
SENDS = st.lists(
    st.tuples(
        st.integers(0, 3_000),  # send time
        st.integers(1, 30_000),  # delay
        st.integers(0, 1),  # real partition
        st.integers(1, 3),  # records
    ),
    min_size=1,
    max_size=12,
)
FAULT = st.one_of(st.none(), st.tuples(st.integers(0, 40_000), st.booleans()))


async def scenario(sends, fault):
    settings_ = {
        "delay.levels": LEVELS,
        "delay.service.max.in.flight": MAX_IN_FLIGHT,
        "delay.service.forward.rounds": ROUNDS,
    }
    topics = [TopicSpec("orders", 2, 2, assignment=((1, 2), (2, 1)))]  # real topic off broker 0
    async with delayed_cluster(3, topics, settings_) as (cluster, services):
        sent = await play(cluster, sends, fault, 2_000, 80_000)
        levels = services.config.levels
        accepted = {i: (at, delay, levels.level_for(delay)) for i, (at, delay) in sent.items()}
        return accepted, services.stats.by_id(), fault is not None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SENDS, FAULT, st.integers(0, 2**16))
def test_every_accepted_message_is_delivered_at_least_once_never_early(sends, fault, seed):
    with deterministic_scheduling(seed):
        accepted, delivered, faulty = trio.run(
            scenario, sends, fault, clock=trio.testing.MockClock(autojump_threshold=0)
        )
    duplicates = 0
    for message_id, (sent, delay, level) in accepted.items():
        deliveries = delivered.get(message_id, [])
        assert deliveries, f"{message_id} (sent {sent}, delay {delay}) was never delivered"
        duplicates += len(deliveries) - 1
        for d in deliveries:
            assert d.due_ms == sent + level
            assert d.delivered_ms >= sent + delay  # never before the delay asked for
            if not faulty:
                assert d.delivered_ms - (sent + delay) <= level - delay  # the rounding, nothing more
    assert duplicates <= (ROUNDS * MAX_IN_FLIGHT if faulty else 0)
