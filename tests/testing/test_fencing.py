"""A served broker whose heartbeats stop reaching the controller is fenced and loses its leadership.

Real time on loopback with a short session (``broker.session.timeout.ms`` 1000, heartbeats every 200 ms);
waits are bounded by ``WAIT_S``.
"""

from __future__ import annotations

import time

from tests.testing.test_examples import wait_until

SESSION = {"broker.session.timeout.ms": 1000, "broker.heartbeat.interval.ms": 200}


def test_a_leader_whose_heartbeats_are_dropped_one_way_is_fenced_and_unfenced_after_the_heal(
    minibroker_factory,
):
    cluster = minibroker_factory(3, topics=["t:1:3"], config=SESSION)
    assert (cluster.partition("t", 0)["leader"], cluster.partition("t", 0)["leader_epoch"]) == (0, 0)
    cut = time.monotonic()
    cluster.drop_link(0, "controller", one_way=True)
    wait_until(lambda: cluster.partition("t", 0)["leader"] == 1, "broker 1 leading once broker 0 is fenced")
    # fenced at the last heartbeat's arrival + 1000 ms: 0.8 s to 1 s after the drop (no upper bound
    # in real time on a loaded machine)
    assert time.monotonic() - cut >= 0.79  # whole milliseconds: 1 ms of rounding
    view = cluster.partition("t", 0)
    assert (view["leader_epoch"], view["isr"]) == (1, [1, 2])
    cluster.heal_link(0, "controller", one_way=True)
    # unfenced by its next heartbeat, broker 0 catches up as a follower and rejoins the ISR
    wait_until(lambda: sorted(cluster.partition("t", 0)["isr"]) == [0, 1, 2], "broker 0 back in the ISR")
    assert cluster.partition("t", 0)["leader"] == 1
