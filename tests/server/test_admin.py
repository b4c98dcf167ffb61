"""The admin APIs driven by both Python admin clients against a served cluster on loopback.

kafka-python's KafkaAdminClient and confluent-kafka's AdminClient each create, grow, describe,
alter and delete topics, describe the cluster, elect preferred leaders and delete records, and the
tests assert the exact error codes and the effect on the cluster (read through the testing handle)
and on real producers and consumers. Real time: every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import ElectionType, KafkaError, KafkaException
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP
from kafka import errors as kp_errors
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from minibroker.testing import MiniCluster
from tests.server.conftest import WAIT_S


@pytest.fixture
def cluster():
    with MiniCluster(3, ["t:1:3"]) as served:
        yield served


def first(cluster: MiniCluster) -> str:
    """Broker 0's address alone: the tests that crash broker 2 must not bootstrap from it."""
    return cluster.bootstrap_servers.split(",")[0]


def kp_admin(cluster: MiniCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=first(cluster), request_timeout_ms=10_000)


def ck_admin(cluster: MiniCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": first(cluster)})


def ck_error(future) -> int:
    """The Kafka error code a confluent-kafka future failed with (0 when it succeeded)."""
    try:
        future.result(WAIT_S)
    except KafkaException as failed:
        return failed.args[0].code()
    return 0


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def crash_out_of_isr(cluster: MiniCluster, broker: int) -> None:
    """Crash ``broker`` and wait until the controller has taken it out of t-0's ISR."""
    cluster.crash(broker)
    wait_for(lambda: broker not in cluster.partition("t", 0)["isr"], f"broker {broker} to leave the ISR")


def kp_produce(cluster: MiniCluster, topic: str, count: int, **settings) -> None:
    producer = KafkaProducer(bootstrap_servers=first(cluster), acks="all", **settings)
    try:
        for i in range(count):
            producer.send(topic, b"v%d" % i, partition=0).get(WAIT_S)
    finally:
        producer.close()


# --- CreateTopics, CreatePartitions, DeleteTopics ------------------------------------------------
def test_kafka_python_creates_grows_and_deletes_topics_with_kafka_errors(cluster):
    admin = kp_admin(cluster)
    try:
        answer = admin.create_topics(
            {
                "a": {"num_partitions": 2, "replication_factor": 3, "configs": {"min.insync.replicas": "2"}},
                "manual": {"assignments": {0: [2, 1], 1: [1, 0]}},
                "zero": {"num_partitions": 0, "replication_factor": 1},
                "wide": {"num_partitions": 1, "replication_factor": 4},
                "odd": {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.mss": "1"}},
                "t": {"num_partitions": 1, "replication_factor": 1},
            },
            raise_errors=False,
        )
        codes = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert codes == {"a": 0, "manual": 0, "zero": 37, "wide": 38, "odd": 40, "t": 36}
        created = {t["name"]: t for t in answer["topics"]}
        assert (created["a"]["num_partitions"], created["a"]["replication_factor"]) == (2, 3)
        assert created["a"]["configs"]["min.insync.replicas"]["value"] == "2"
        assert cluster.partition("manual", 0)["leader"] == 2
        assert [r["broker"] for r in cluster.partition("manual", 1)["replicas"]] == [1, 0]
        validated = admin.create_topics(
            {"dry": {"num_partitions": 1, "replication_factor": 1}}, validate_only=True
        )
        assert validated["topics"][0]["error_code"] == 0 and "dry" not in admin.list_topics()
        assert validated["topics"][0]["configs"]["cleanup.policy"]["value"] == "delete"  # as it would be

        grown = admin.create_partitions({"a": 4, "t": 1}, raise_errors=False)
        assert {r.name: r.error_code for r in grown.results} == {"a": 0, "t": 37}
        assert cluster.partition("a", 3)["leader"] == 0  # placed like the first ones: (3 + i) % 3

        deleted = admin.delete_topics(["a", "nope"], raise_errors=False)
        assert {t["name"]: t["error_code"] for t in deleted["topics"]} == {"a": 0, "nope": 3}
        assert "a" not in admin.list_topics()
    finally:
        admin.close()


def test_confluent_kafka_creates_grows_and_deletes_topics_with_kafka_errors(cluster):
    admin = ck_admin(cluster)
    futures = admin.create_topics(
        [
            NewTopic("a", 2, 3, config={"cleanup.policy": "compact"}),
            NewTopic("manual", 2, replica_assignment=[[1, 2], [2, 0]]),
            NewTopic("wide", 1, 4),
            NewTopic("odd", 1, 1, config={"min.insync.replicas": "zero"}),
            NewTopic("t", 1, 1),
        ]
    )
    assert {name: ck_error(f) for name, f in futures.items()} == {
        "a": 0,
        "manual": 0,
        "wide": 38,
        "odd": 40,
        "t": 36,
    }
    assert cluster.partition("manual", 1)["leader"] == 2
    assert ck_error(admin.create_topics([NewTopic("dry", 1, 1)], validate_only=True)["dry"]) == 0
    assert "dry" not in admin.list_topics(timeout=WAIT_S).topics

    grown = admin.create_partitions([NewPartitions("a", 3), NewPartitions("t", 1)])
    assert {name: ck_error(f) for name, f in grown.items()} == {"a": 0, "t": 37}
    assert len(admin.list_topics("a", timeout=WAIT_S).topics["a"].partitions) == 3

    deleted = admin.delete_topics(["a", "nope"])
    assert {name: ck_error(f) for name, f in deleted.items()} == {"a": 0, "nope": 3}
    assert "a" not in admin.list_topics(timeout=WAIT_S).topics


# --- DescribeConfigs and IncrementalAlterConfigs: min.insync.replicas at run time ---------------
def test_kafka_python_raises_min_insync_replicas_and_acks_all_gets_not_enough_replicas(cluster):
    crash_out_of_isr(cluster, 2)  # first: the admin client then never learns of broker 2
    admin = kp_admin(cluster)
    try:
        assert cluster.partition("t", 0)["isr"] == [0, 1]
        kp_produce(cluster, "t", 1, retries=0)  # min.insync.replicas 1: fine
        altered = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "t", {"min.insync.replicas": "3"})]
        )
        assert altered == {"topic": {"t": "OK"}}
        assert cluster.requests().get("IncrementalAlterConfigs", 0) >= 1  # not the old AlterConfigs
        described = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "t")])
        entry = described["topic"]["t"]["min.insync.replicas"]
        assert (entry["value"], entry["config_source"]) == ("3", "DYNAMIC_TOPIC_CONFIG")
        with pytest.raises(kp_errors.NotEnoughReplicasError):
            kp_produce(cluster, "t", 1, retries=0)
        # back to the broker's setting (DELETE), then the broker's own setting raised instead
        admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "t", {"min.insync.replicas": ("DELETE", None)})]
        )
        kp_produce(cluster, "t", 1, retries=0)
        admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "0", {"min.insync.replicas": "3"})])
        broker = admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "0")])
        entry = broker["broker"]["0"]["min.insync.replicas"]
        assert (entry["value"], entry["config_source"]) == ("3", "DYNAMIC_BROKER_CONFIG")
        with pytest.raises(kp_errors.NotEnoughReplicasError):
            kp_produce(cluster, "t", 1, retries=0)
        bad = admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, "t", {"min.insync.replicas": "none"})],
            raise_on_unknown=False,
        )
        assert bad["topic"]["t"].startswith("[Error 40] InvalidConfigurationError: min.insync.replicas")
    finally:
        admin.close()


def test_confluent_kafka_raises_min_insync_replicas_and_acks_all_gets_not_enough_replicas(cluster):
    crash_out_of_isr(cluster, 2)
    admin = ck_admin(cluster)
    topic = ConfigResource(ResourceType.TOPIC, "t")
    (described,) = admin.describe_configs([topic]).values()
    entry = described.result(WAIT_S)["min.insync.replicas"]
    assert (entry.value, entry.source) == ("1", 5)  # DEFAULT_CONFIG: the broker's default
    raise_it = ConfigResource(
        ResourceType.TOPIC,
        "t",
        incremental_configs=[
            ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert [ck_error(f) for f in admin.incremental_alter_configs([raise_it]).values()] == [0]
    (described,) = admin.describe_configs([topic]).values()
    entry = described.result(WAIT_S)["min.insync.replicas"]
    assert (entry.value, entry.source) == ("3", 1)  # DYNAMIC_TOPIC_CONFIG
    errors: list = []
    producer = CkProducer({"bootstrap.servers": first(cluster), "acks": "all", "retries": 0})
    producer.produce("t", b"v", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT_S)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    wrong = ConfigResource(
        ResourceType.TOPIC,
        "t",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    assert [ck_error(f) for f in admin.incremental_alter_configs([wrong]).values()] == [40]


# --- DescribeCluster and ElectLeaders ----------------------------------------------------------
def test_kafka_python_describes_the_cluster_and_elects_the_preferred_leader(cluster):
    admin = kp_admin(cluster)
    try:
        described = admin.describe_cluster()
        assert (described["cluster_id"], described["controller_id"]) == ("minibroker", 0)
        assert [b["broker_id"] for b in described["brokers"]] == [0, 1, 2]
        cluster.move_leader("t", 0, 1)
        assert cluster.partition("t", 0)["leader"] == 1
        answer = admin.elect_leaders(0, {"t": [0]})
        assert [
            (p.partition_id, p.error_code)
            for r in answer.replica_election_results
            for p in r.partition_result
        ] == [(0, 0)]
        wait_for(lambda: cluster.partition("t", 0)["leader"] == 0, "broker 0 to lead again")
        again = admin.elect_leaders(0, {"t": [0]}, raise_errors=False)
        assert [p.error_code for r in again.replica_election_results for p in r.partition_result] == [84]
    finally:
        admin.close()


def test_confluent_kafka_describes_the_cluster_and_elects_the_preferred_leader(cluster):
    admin = ck_admin(cluster)
    created = admin.create_topics([NewTopic("p", 1, replica_assignment=[[2, 0, 1]])])
    assert [ck_error(f) for f in created.values()] == [0]
    crash_out_of_isr(cluster, 2)  # broker 0 leads p-0 now; the preferred replica 2 is down
    described = admin.describe_cluster().result(WAIT_S)
    assert (described.cluster_id, described.controller.id) == ("minibroker", 0)
    assert sorted(node.id for node in described.nodes) == [0, 1]
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CkTP("p", 0), CkTP("t", 0)]).result(WAIT_S)
    assert {tp.topic: e.code() for tp, e in elected.items()} == {
        "p": KafkaError.PREFERRED_LEADER_NOT_AVAILABLE,
        "t": KafkaError.ELECTION_NOT_NEEDED,
    }


# --- DeleteRecords: the low watermark and a consumer from offset 0 -------------------------------
def test_kafka_python_deletes_records_and_a_consumer_from_zero_is_out_of_range(cluster):
    admin = kp_admin(cluster)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="none", enable_auto_commit=False
    )
    try:
        kp_produce(cluster, "t", 10)
        answer = admin.delete_records({KpTP("t", 0): 4})
        assert answer[KpTP("t", 0)]["low_watermark"] == 4 and answer[KpTP("t", 0)]["error_code"] == 0
        assert [r["log_start_offset"] for r in cluster.partition("t", 0)["replicas"]] == [4, 4, 4]
        assert cluster.purgatories(0)["DeleteRecords"]["completions"] == 1
        to_hw = admin.delete_records({KpTP("t", 0): -1})
        assert to_hw[KpTP("t", 0)]["low_watermark"] == 10
        with pytest.raises(kp_errors.OffsetOutOfRangeError):
            admin.delete_records({KpTP("t", 0): 11})
        consumer.assign([KpTP("t", 0)])
        consumer.seek(KpTP("t", 0), 0)
        with pytest.raises(kp_errors.OffsetOutOfRangeError):
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
        assert consumer.beginning_offsets([KpTP("t", 0)]) == {KpTP("t", 0): 10}
    finally:
        consumer.close()
        admin.close()


def test_confluent_kafka_delete_records_waits_for_a_paused_follower_then_the_consumer_starts_there(
    cluster,
):
    admin = ck_admin(cluster)
    producer = CkProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce("t", b"v%d" % i, partition=0)
    assert producer.flush(WAIT_S) == 0
    cluster.pause_fetcher(2)  # broker 2 never reports the new log start: the low watermark stays 0
    (held,) = admin.delete_records([CkTP("t", 0, 6)], operation_timeout=1.0).values()
    assert ck_error(held) == KafkaError.REQUEST_TIMED_OUT
    assert cluster.purgatories(0)["DeleteRecords"]["expirations"] == 1
    cluster.resume_fetcher(2)
    (done,) = admin.delete_records([CkTP("t", 0, 6)], operation_timeout=10.0).values()
    deleted = done.result(WAIT_S)
    assert deleted.low_watermark == 6
    consumer = CkConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([CkTP("t", 0, 0)])  # offset 0 is gone: reset to the earliest, 6
        message = None
        deadline = time.monotonic() + WAIT_S
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
        assert message is not None and message.error() is None
        assert (message.offset(), message.value()) == (6, b"v6")
    finally:
        consumer.close()
