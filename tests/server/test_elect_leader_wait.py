"""ElectLeaders over the wire waits in the asked broker's ElectLeader purgatory.

The admin clients send ElectLeaders to the controller Metadata names (broker 0 here), which answers
once broker 0's metadata shows the elected leader: after the latency of its link from the controller,
or REQUEST_TIMED_OUT at the request's timeout while that link drops the controller's messages. Real
time on loopback; every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import time

from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from minibroker.testing import MiniCluster
from tests.server.conftest import WAIT_S


def test_an_election_is_answered_when_the_leader_reaches_the_asked_broker_or_times_out():
    with MiniCluster(3, ["t:1:3"]) as cluster:
        first = cluster.bootstrap_servers.split(",")[0]
        assert cluster.partition("t", 0)["replicas"][0]["broker"] == 0  # the preferred replica
        cluster.move_leader("t", 0, 1)
        cluster.set_link_latency(0, "controller", 300)
        admin = AdminClient({"bootstrap.servers": first})
        started = time.monotonic()
        (error,) = admin.elect_leaders(ElectionType.PREFERRED, [CkTP("t", 0)]).result(WAIT_S).values()
        took = time.monotonic() - started
        assert error is None and took >= 0.3  # broker 0 hears of its leadership 300 ms after the election
        assert cluster.purgatories(0)["ElectLeader"]["completions"] == 1
        cluster.set_link_latency(0, "controller", 0)
        cluster.move_leader("t", 0, 1)
        cluster.drop_link("controller", 0, one_way=True)
        kp = KafkaAdminClient(bootstrap_servers=first, request_timeout_ms=10_000)
        try:
            started = time.monotonic()
            answer = kp.elect_leaders(0, {"t": [0]}, timeout_ms=1000, raise_errors=False)
            took = time.monotonic() - started
        finally:
            kp.close()
        codes = [p.error_code for r in answer.replica_election_results for p in r.partition_result]
        assert codes == [7] and took >= 1.0  # REQUEST_TIMED_OUT: broker 0 never saw the new leader
        assert cluster.purgatories(0)["ElectLeader"]["expirations"] == 1
        assert cluster.partition("t", 0)["leader"] == 0  # the election itself took place
