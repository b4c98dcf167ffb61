"""Configs of every resource type through both admin clients: legacy and incremental alters, sources."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from minibroker.broker.topic_configs import TOPIC_CONFIGS
from minibroker.common.errors import Errors
from minibroker.sim.dynamic_configs import (
    BROKER_LOGGER,
    CLIENT_METRICS,
    GROUP,
    TOPIC,
    describe_configs,
    replace_configs,
)
from minibroker.sim.topic_admin import AdminError
from tests.server.conftest import WAIT_S, scenario


@pytest.fixture
def server(serve):
    return serve(scenario(brokers=1, topics='name = "t"\npartitions = 1\nreplication_factor = 1'))


def test_confluent_kafka_legacy_and_incremental_alters_of_any_kafka_topic_config(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = ConfigResource(ResourceType.TOPIC, "t")
    incremental = ConfigResource(
        ResourceType.TOPIC,
        "t",
        incremental_configs=[
            ConfigEntry("flush.ms", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0.25", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([incremental])[incremental].result(WAIT_S)
    assert server.call(lambda: server.cluster.topics["t"].configs) == {
        "flush.ms": "1000",
        "min.cleanable.dirty.ratio": "0.25",
    }
    described = admin.describe_configs([topic])[topic].result(WAIT_S)
    assert set(described) == set(TOPIC_CONFIGS)
    assert (described["flush.ms"].value, described["flush.ms"].source) == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
    assert (described["segment.jitter.ms"].value, described["segment.jitter.ms"].source) == ("0", 5)
    # the legacy AlterConfigs replaces the whole set: flush.ms and the ratio go back to their defaults
    legacy = ConfigResource(ResourceType.TOPIC, "t", set_config={"retention.ms": "1000"})
    admin.alter_configs([legacy])[legacy].result(WAIT_S)
    assert server.call(lambda: server.cluster.topics["t"].configs) == {"retention.ms": "1000"}
    bad = ConfigResource(ResourceType.TOPIC, "t", set_config={"retention.mss": "1"})
    with pytest.raises(Exception) as refused:
        admin.alter_configs([bad])[bad].result(WAIT_S)
    assert refused.value.args[0].code() == Errors.INVALID_CONFIG


def test_kafka_python_describes_group_broker_logger_and_client_metrics_configs(server):
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        resources = [
            KpConfigResource(ConfigResourceType.GROUP, "g"),
            KpConfigResource(ConfigResourceType.BROKER_LOGGER, "0"),
            KpConfigResource(ConfigResourceType.CLIENT_METRICS, "sub"),
        ]
        answers = admin.describe_configs(resources, config_filter="all")
        group = {name: (c["value"], c["config_source"]) for name, c in answers["group"]["g"].items()}
        assert group["consumer.session.timeout.ms"] == ("45000", "DEFAULT_CONFIG")
        assert len(group) == 7 and group["share.auto.offset.reset"] == ("latest", "DEFAULT_CONFIG")
        assert {name: c["value"] for name, c in answers["broker_logger"]["0"].items()} == {"root": "INFO"}
        assert answers["client_metrics"] == {"sub": {}}
    finally:
        admin.close()


def test_group_logger_and_client_metrics_configs_are_stored_with_kafka_sources_and_errors(server):
    cluster = server.cluster

    def run():
        replace_configs(cluster, GROUP, "g", [("consumer.session.timeout.ms", "50000")])
        replace_configs(cluster, CLIENT_METRICS, "sub", [("metrics", "a,b"), ("interval.ms", "1000")])
        group = {e.name: (e.value, e.source) for e in describe_configs(cluster, GROUP, "g")}
        metrics = [(e.name, e.value, e.source) for e in describe_configs(cluster, CLIENT_METRICS, "sub")]
        errors = []
        for resource_type, name, pairs in (
            (GROUP, "g", [("consumer.session.timeout.ms", "1")]),
            (GROUP, "", []),
            (GROUP, "g", [("nope", "1")]),
            (BROKER_LOGGER, "0", [("kafka", "DEBUG")]),
            (TOPIC, "t", [("retention.ms", None)]),
        ):
            try:
                replace_configs(cluster, resource_type, name, pairs)
            except AdminError as refused:
                errors.append((refused.error, str(refused)))
        return group, metrics, errors

    group, metrics, errors = server.call(run)
    assert group["consumer.session.timeout.ms"] == ("50000", 8)  # GROUP_CONFIG
    assert group["consumer.heartbeat.interval.ms"] == ("5000", 5)
    assert metrics == [("interval.ms", "1000", 7), ("metrics", "a,b", 7)]
    assert errors == [
        (Errors.INVALID_CONFIG, "consumer.session.timeout.ms: expected a number in 45000..60000, got '1'"),
        (Errors.INVALID_REQUEST, "Group name must not be empty"),
        (Errors.INVALID_CONFIG, "Unknown group config name: nope"),
        (Errors.INVALID_REQUEST, "Unknown resource type 8"),
        (Errors.INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ]


def test_synonyms_list_where_a_value_may_come_from_most_specific_first(server):
    from minibroker.sim.dynamic_configs import BROKER, alter_configs

    cluster = server.cluster

    def run():
        alter_configs(cluster, TOPIC, "t", [("min.insync.replicas", 0, "1")])
        alter_configs(cluster, BROKER, "", [("min.insync.replicas", 0, "2")])
        (topic,) = describe_configs(cluster, TOPIC, "t", ["min.insync.replicas"])
        (broker,) = describe_configs(cluster, BROKER, "0", ["min.insync.replicas"])
        (flush,) = describe_configs(cluster, TOPIC, "t", ["segment.jitter.ms"])
        return topic.synonyms, broker.synonyms, flush.synonyms

    topic, broker, jitter = server.call(run)
    assert topic == (
        ("min.insync.replicas", "1", 1),
        ("min.insync.replicas", "2", 3),
        ("min.insync.replicas", "1", 5),
    )
    assert broker == (("min.insync.replicas", "2", 3), ("min.insync.replicas", "1", 5))
    assert jitter == (("log.roll.jitter.ms", "0", 5),)
