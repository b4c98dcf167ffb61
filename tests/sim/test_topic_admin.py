"""Admin operations on the cluster (no wire): Kafka's checks, exact error codes and their effect."""

from __future__ import annotations

import pytest
import trio

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.sim import TopicSpec, open_cluster
from minibroker.sim.dynamic_configs import (
    APPEND,
    BROKER,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    SET,
    STATIC_BROKER_CONFIG,
    SUBTRACT,
    TOPIC,
    alter_configs,
    describe_configs,
)
from minibroker.sim.topic_admin import (
    UNCLEAN,
    AdminError,
    create_partitions,
    create_topic,
    delete_topic,
    elect_leader,
)

TP = TopicPartition("t", 0)


def refused(call, *args, **kwargs) -> Errors:
    with pytest.raises(AdminError) as raised:
        call(*args, **kwargs)
    return raised.value.error


def config(cluster, kind, name, key):
    (entry,) = describe_configs(cluster, kind, name, [key])
    return entry.value, entry.source


async def test_create_topic_checks_in_kafkas_order(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], {"num.partitions": 2}) as cluster:
        assert refused(create_topic, cluster, "bad name") is Errors.INVALID_TOPIC_EXCEPTION
        assert refused(create_topic, cluster, "t", 1, 1) is Errors.TOPIC_ALREADY_EXISTS
        assert refused(create_topic, cluster, "a", 0, 1) is Errors.INVALID_PARTITIONS
        assert refused(create_topic, cluster, "a", 1, 0) is Errors.INVALID_REPLICATION_FACTOR
        assert refused(create_topic, cluster, "a", 1, 4) is Errors.INVALID_REPLICATION_FACTOR
        assert refused(create_topic, cluster, "a", 1, -1, {0: [0]}) is Errors.INVALID_REQUEST
        assert refused(create_topic, cluster, "a", -1, -1, {0: [0, 0]}) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert refused(create_topic, cluster, "a", -1, -1, {0: [3]}) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert refused(create_topic, cluster, "a", -1, -1, {1: [0]}) is Errors.INVALID_REPLICA_ASSIGNMENT
        assert (
            refused(create_topic, cluster, "a", -1, -1, {0: [0], 1: [1, 2]})
            is Errors.INVALID_REPLICA_ASSIGNMENT
        )
        assert (
            refused(create_topic, cluster, "a", 1, 1, configs={"retention.ms": "soon"})
            is Errors.INVALID_CONFIG
        )
        assert refused(create_topic, cluster, "a", 1, 1, configs={"x": "1"}) is Errors.INVALID_CONFIG
        spec = create_topic(cluster, "a", validate_only=True)
        assert (spec.partitions, spec.replication_factor) == (2, 1) and "a" not in cluster.topics
        create_topic(cluster, "a", configs={"cleanup.policy": "compact, delete"})
        assert cluster.topics["a"].configs == {"cleanup.policy": "compact,delete"}
        assert [cluster.leader_of(TopicPartition("a", p)) for p in (0, 1)] == [0, 1]


async def test_deleted_topic_leaves_no_log_behind_even_on_a_crashed_broker(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)]) as cluster:
        producer = cluster.producer("p", acks=-1)
        await producer.send_and_wait("t", 0, count=5)
        await cluster.clock.sleep_until(10)
        cluster.crash(2)
        delete_topic(cluster, "t")
        assert "t" not in cluster.topics and TP not in cluster.controller.state
        assert all(TP not in broker.logs for broker in cluster.brokers)
        assert refused(delete_topic, cluster, "t") is Errors.UNKNOWN_TOPIC_OR_PARTITION
        create_topic(cluster, "t", 1, 3)
        await cluster.restart(2)
        await cluster.clock.sleep_until(2000)
        view = cluster.snapshot().partition("t-0")
        assert [r.log_end_offset for r in view.replicas] == [0, 0, 0]


async def test_create_partitions_grows_only(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 2)]) as cluster:
        assert refused(create_partitions, cluster, "t", 1) is Errors.INVALID_PARTITIONS
        assert refused(create_partitions, cluster, "nope", 2) is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert refused(create_partitions, cluster, "t", 2, [[0]]) is Errors.INVALID_REPLICA_ASSIGNMENT
        create_partitions(cluster, "t", 3, validate_only=True)
        assert cluster.topics["t"].partitions == 1
        create_partitions(cluster, "t", 3, [[2, 0], [0, 1]])
        assert cluster.topics["t"].assignment == ((0, 1), (2, 0), (0, 1))
        assert cluster.controller.state[TopicPartition("t", 1)].replicas == (2, 0)


async def test_preferred_and_unclean_elections(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)]) as cluster:
        assert refused(elect_leader, cluster, TP) is Errors.ELECTION_NOT_NEEDED
        cluster.move_leader(TP, 1)
        await cluster.clock.sleep_until(10)
        elect_leader(cluster, TP)
        await cluster.clock.sleep_until(20)
        assert cluster.leader_of(TP) == 0
        cluster.crash(0)
        await cluster.clock.sleep_until(30)
        assert refused(elect_leader, cluster, TP) is Errors.PREFERRED_LEADER_NOT_AVAILABLE
        assert refused(elect_leader, cluster, TP, UNCLEAN) is Errors.ELECTION_NOT_NEEDED
        assert refused(elect_leader, cluster, TopicPartition("t", 5)) is Errors.UNKNOWN_TOPIC_OR_PARTITION


async def test_topic_configs_fall_back_to_the_broker_and_take_effect(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], {"min.insync.replicas": 2}) as cluster:
        assert config(cluster, TOPIC, "t", "min.insync.replicas") == ("2", STATIC_BROKER_CONFIG)
        assert config(cluster, TOPIC, "t", "retention.ms") == ("604800000", DEFAULT_CONFIG)
        alter_configs(cluster, TOPIC, "t", [("min.insync.replicas", SET, "3")])
        assert config(cluster, TOPIC, "t", "min.insync.replicas") == ("3", DYNAMIC_TOPIC_CONFIG)
        leader = cluster.brokers[0].replica_manager.partitions[TP]
        assert leader.min_insync_replicas == 3
        alter_configs(cluster, TOPIC, "t", [("cleanup.policy", APPEND, "compact")])
        alter_configs(cluster, TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")])
        assert cluster.topics["t"].configs["cleanup.policy"] == "compact"
        bad = [("min.insync.replicas", APPEND, "1")]
        assert refused(alter_configs, cluster, TOPIC, "t", bad) is Errors.INVALID_CONFIG
        twice = [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]
        assert refused(alter_configs, cluster, TOPIC, "t", twice) is Errors.INVALID_REQUEST
        alter_configs(cluster, TOPIC, "t", [("min.insync.replicas", DELETE, None)])
        assert leader.min_insync_replicas == 2
        assert refused(describe_configs, cluster, TOPIC, "nope") is Errors.UNKNOWN_TOPIC_OR_PARTITION


async def test_broker_configs_per_broker_default_and_back_to_static(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)], {"min.insync.replicas": 2}) as cluster:
        alter_configs(cluster, BROKER, "", [("min.insync.replicas", SET, "3")])
        assert config(cluster, BROKER, "1", "min.insync.replicas") == ("3", DYNAMIC_DEFAULT_BROKER_CONFIG)
        alter_configs(cluster, BROKER, "1", [("min.insync.replicas", SET, "1")])
        assert config(cluster, BROKER, "1", "min.insync.replicas") == ("1", DYNAMIC_BROKER_CONFIG)
        assert config(cluster, BROKER, "0", "min.insync.replicas") == ("3", DYNAMIC_DEFAULT_BROKER_CONFIG)
        alter_configs(cluster, BROKER, "", [("min.insync.replicas", DELETE, None)])
        alter_configs(cluster, BROKER, "1", [("min.insync.replicas", DELETE, None)])
        assert [b.config.min_insync_replicas for b in cluster.brokers] == [2, 2, 2]
        assert config(cluster, BROKER, "0", "min.insync.replicas") == ("2", STATIC_BROKER_CONFIG)
        assert config(cluster, BROKER, "0", "replica.lag.time.max.ms") == ("30000", DEFAULT_CONFIG)
        bad = [("min.insync.replicas", SET, "0")]
        assert refused(alter_configs, cluster, BROKER, "0", bad) is Errors.INVALID_CONFIG
        assert refused(alter_configs, cluster, BROKER, "7", []) is Errors.INVALID_REQUEST
        alter_configs(cluster, BROKER, "0", [("min.insync.replicas", SET, "3")], validate_only=True)
        assert cluster.brokers[0].config.min_insync_replicas == 2


async def test_topics_past_the_clusters_partition_replicas_are_a_policy_violation(autojump_clock):
    settings = {"minibroker.partition.replicas.max": 20}
    async with open_cluster(3, [TopicSpec("t", 2, 3)], settings) as cluster:  # 6 replicas
        with pytest.raises(AdminError) as raised:
            create_topic(cluster, "big", 1_000_000, 3)
        assert raised.value.error is Errors.POLICY_VIOLATION
        assert str(raised.value) == (
            "The cluster would hold 3,000,006 partition replicas, more than "
            "minibroker.partition.replicas.max (20)."
        )
        assert "big" not in cluster.topics
        create_topic(cluster, "fits", 7, 2)  # 20 in all
        assert refused(create_partitions, cluster, "t", 3) is Errors.POLICY_VIOLATION
        assert cluster.topics["t"].partitions == 2
        cluster.ensure_offsets_topic()  # internal topics are bounded by their own settings
        assert cluster.topics["__consumer_offsets"].partitions == 50


async def test_remote_storage_needs_the_brokers_switch_and_starts_copying_once_set(autojump_clock):
    async with open_cluster(1, [TopicSpec("t", 1, 1)]) as cluster:
        tiered = {"remote.storage.enable": "true"}
        assert refused(create_topic, cluster, "a", 1, 1, configs=tiered) is Errors.INVALID_CONFIG
        assert refused(alter_configs, cluster, TOPIC, "t", [("remote.storage.enable", SET, "true")]) is (
            Errors.INVALID_CONFIG
        )
    base = {"remote.log.storage.system.enable": True, "minibroker.remote.storage.copy.latency.ms": 0}
    async with open_cluster(1, [TopicSpec("t", 1, 1, configs={"segment.bytes": "100"})], base) as cluster:
        compacted = {**tiered, "cleanup.policy": "compact"}
        assert refused(create_topic, cluster, "a", 1, 1, configs=compacted) is Errors.INVALID_CONFIG
        producer = cluster.producer("p")
        for _ in range(3):  # three 100-byte batches: three segments, two closed
            await producer.send_and_wait("t", 0, 1, 100)
        manager = cluster.brokers[0].replica_manager
        assert manager.remote_log_manager.storage.highest_offset(TP) == -1
        alter_configs(cluster, TOPIC, "t", [("remote.storage.enable", SET, "true")])
        await trio.sleep(0.001)  # the copy task's first run: at once
        assert manager.remote_log_manager.storage.highest_offset(TP) == 1


async def test_a_broker_config_minibroker_does_not_model_is_stored_and_described(autojump_clock):
    async with open_cluster(3, [TopicSpec("t", 1, 3)]) as cluster:
        key = "sasl.kerberos.min.time.before.relogin"
        alter_configs(cluster, BROKER, "0", [(key, SET, "58000")])
        assert config(cluster, BROKER, "0", key) == ("58000", DYNAMIC_BROKER_CONFIG)
        assert describe_configs(cluster, BROKER, "1", [key]) == []
        alter_configs(cluster, BROKER, "", [(key, SET, "60000")])
        assert config(cluster, BROKER, "1", key) == ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG)
        alter_configs(cluster, BROKER, "0", [(key, DELETE, None)])
        assert config(cluster, BROKER, "0", key) == ("60000", DYNAMIC_DEFAULT_BROKER_CONFIG)
