"""MiniCluster's actions take effect before they return; read-outs are exact; bad input is one line.

Real time on loopback: waits are bounded by ``WAIT_S`` and finish far sooner; the one timing assertion
states its tolerance.
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from minibroker.broker.config import ConfigError
from minibroker.testing import MiniCluster, mini_cluster
from tests.server.conftest import RawClient
from tests.server.test_idempotence import idempotent_batch
from tests.testing.test_examples import wait_until


def produce(
    cluster: MiniCluster, broker: int, partitions: list[int], timeout_ms: int = 5000, topic="t"
) -> list[int]:
    """Error codes of one acks=all Produce of a one-record batch to each of ``partitions`` of ``topic``."""
    port = int(cluster.bootstrap_servers.split(",")[broker].rsplit(":", 1)[1])
    client = RawClient(port)
    raw = idempotent_batch(-1, [b"x"], pid=-1, epoch=-1)
    parts = [ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=raw) for p in partitions]
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=timeout_ms,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=parts)],
    )
    answer = client.request(request, ProduceResponse, 9)
    client.close()
    return [p.error_code for p in answer.responses[0].partition_responses]


@pytest.fixture
def cluster(minibroker_factory) -> MiniCluster:
    # lagging replicas leave the ISR after 400 ms; a fetch lost on a dropped link is retried after 1 s
    config = {"replica.lag.time.max.ms": 400, "replica.socket.timeout.ms": 1000}
    return minibroker_factory(3, topics=["t:2:3"], config=config)


def leo(cluster: MiniCluster, partition: int = 0) -> list[int]:
    return [r["log_end_offset"] for r in cluster.partition("t", partition)["replicas"]]


def test_pushed_errors_fail_whole_requests_then_one_partition_and_nothing_is_appended(cluster):
    cluster.push_errors("produce", ["NOT_ENOUGH_REPLICAS", 6], broker=0)
    assert cluster.pending_errors(0) == {"produce *": 2}
    assert produce(cluster, 0, [0]) == [19]
    assert produce(cluster, 0, [0]) == [6]
    assert produce(cluster, 0, [0]) == [0]
    cluster.push_errors(0, "KAFKA_STORAGE_ERROR", broker=1, topic="t", partition=1)
    assert cluster.pending_errors(1) == {"produce t-1": 1}
    assert [produce(cluster, 1, [1]), produce(cluster, 1, [1])] == [[56], [0]]
    assert cluster.pending_errors(0) == cluster.pending_errors(1) == {}
    wait_until(lambda: leo(cluster, 0) == [1, 1, 1] and leo(cluster, 1) == [1, 1, 1], "replication")


def test_move_leader_pause_and_resume_a_fetcher_shutdown_and_restart(cluster):
    assert (cluster.partition("t", 0)["leader"], cluster.partition("t", 0)["leader_epoch"]) == (0, 0)
    cluster.move_leader("t", 0, 2)
    assert (cluster.partition("t", 0)["leader"], cluster.partition("t", 0)["leader_epoch"]) == (2, 1)
    wait_until(lambda: produce(cluster, 2, [0]) == [0], "broker 2 leading t-0")
    assert produce(cluster, 0, [0]) == [6]  # the old leader answers NOT_LEADER_OR_FOLLOWER
    cluster.pause_fetcher(1)
    # a paused follower leaves the ISR once it lags (Kafka: behind the leader's LEO for the lag time), so
    # this acks=all produce completes when the ISR has shrunk to the two others
    assert produce(cluster, 2, [0]) == [0]
    assert sorted(cluster.partition("t", 0)["isr"]) == [0, 2]
    cluster.resume_fetcher(1)
    wait_until(lambda: sorted(cluster.partition("t", 0)["isr"]) == [0, 1, 2], "broker 1 back in the ISR")
    cluster.shutdown(2)
    view = cluster.partition("t", 0)
    assert (view["leader"], view["replicas"][2]["alive"]) == (0, False)
    cluster.restart(2)
    assert cluster.partition("t", 0)["replicas"][2]["alive"] is True


def test_a_dropped_link_holds_acks_all_until_it_heals_and_min_isr_changes_at_run_time(minibroker_factory):
    # the ISR may shrink 2 s after the drop at the earliest: the 500 ms produce below expires first even
    # on a loaded machine (with the fixture's 400 ms the two raced)
    config = {"replica.lag.time.max.ms": 2000, "replica.socket.timeout.ms": 1000}
    cluster = minibroker_factory(3, topics=["t:2:3"], config=config)
    cluster.drop_link(0, 1)
    cluster.drop_link(0, 2)
    # the followers cannot fetch: the acks=all produce waits in the purgatory and expires (500 ms)
    assert produce(cluster, 0, [0], timeout_ms=500) == [7]
    assert cluster.purgatories(0)["Produce"]["expirations"] == 1
    wait_until(lambda: cluster.partition("t", 0)["isr"] == [0], "the ISR shrinking to the leader")
    cluster.set_config({"min.insync.replicas": 2})
    assert produce(cluster, 0, [0]) == [19]  # NOT_ENOUGH_REPLICAS: the new setting took effect
    cluster.heal_link(0, 1)
    cluster.heal_link(0, 2)
    wait_until(lambda: sorted(cluster.partition("t", 0)["isr"]) == [0, 1, 2], "the ISR growing back")
    assert produce(cluster, 0, [0]) == [0]
    assert cluster.purgatories(0)["Produce"]["completions"] >= 1


def test_client_latency_and_requests_per_api_key(cluster):
    client = RawClient(int(cluster.bootstrap_servers.split(",")[1].rsplit(":", 1)[1]))
    for _ in range(2):
        client.request(ApiVersionsRequest(), ApiVersionsResponse, 3)
    client.close()
    assert cluster.requests(1) == {"ApiVersions": 2}
    cluster.set_client_latency(0, 300)
    started = time.monotonic()
    assert produce(cluster, 0, [0]) == [0]
    # the produce crossed the client link twice at 300 ms each (real time: at least 0.6 s, no upper bound)
    assert time.monotonic() - started >= 0.6
    assert cluster.requests(0) == {"Produce": 1}
    assert cluster.requests() == {"ApiVersions": 2, "Produce": 1}


def test_bad_input_is_one_line_and_changes_nothing(cluster):
    cases = [
        (lambda: cluster.crash(7), "broker 7: expected a broker id 0..2"),
        (lambda: cluster.set_client_latency(0, -1), "latency -1: expected whole milliseconds 0..3600000"),
        (lambda: cluster.push_errors("UpdateFeatures", [6], broker=0), "api 'UpdateFeatures': errors can be"),
        (lambda: cluster.push_errors("fetch", ["NOPE"], broker=0), "error 'NOPE': expected one of"),
        (lambda: cluster.push_errors("fetch", [6], broker=0, topic="t"), "topic and partition: give both"),
        (lambda: cluster.partition("u", 0), "partition 'u' 0: no such topic partition"),
        (lambda: cluster.move_leader("t", 1, 9), "broker 9: expected a broker id 0..2"),
        (lambda: cluster.set_config({}), "settings {}: expected a non-empty mapping"),
    ]
    for action, message in cases:
        with pytest.raises(ValueError) as raised:
            action()
        assert str(raised.value).startswith(message), str(raised.value)
    cluster.pause_fetcher(1)
    assert produce(cluster, 0, [0]) == [0]  # completes once broker 1 has left the ISR
    with pytest.raises(ConfigError) as raised:
        cluster.move_leader("t", 0, 1)
    assert str(raised.value) == "cannot move t-0's leader to broker 1: broker 1 is not in t-0's ISR [0, 2]"
    with pytest.raises(ConfigError):
        cluster.set_config({"min.insync.replicas": "many"})
    assert cluster.pending_errors(0) == {}


def test_the_context_manager_starts_and_stops_and_bad_settings_fail_before_starting():
    with mini_cluster(1, ["solo"]) as cluster:
        assert cluster.partition("solo", 0)["isr"] == [0]
        assert cluster.bootstrap_servers.startswith("127.0.0.1:")
    with pytest.raises(ValueError, match=r"^topic 'bad name': "):
        MiniCluster(3, ["bad name"])
    with pytest.raises(ValueError, match=r"^brokers 0: expected 1..64$"):
        MiniCluster(0)
    with pytest.raises(ValueError, match=r"^a topic is named twice: a, a$"):
        MiniCluster(1, ["a", "a:2"])
    with pytest.raises(ValueError) as too_big:
        MiniCluster(1, ["t:100000"])
    assert str(too_big.value) == (
        "MiniCluster: 100,050 partition replicas in all, internal topics included (the largest: "
        "t 100,000 x 1 (topics), __consumer_offsets 50 x 1 (offsets.topic.num.partitions)); "
        "expected at most 100,000"
    )
    with pytest.raises(ConfigError, match=r"min\.insync\.replicas"):
        MiniCluster(3, config={"min.insync.replicas": "x"})
