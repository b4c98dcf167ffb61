"""The sections that describe the cluster: ``[cluster]``, ``[[topics]]`` and ``[[links]]``."""

from __future__ import annotations

from typing import Any

from minibroker.broker.config import BrokerConfig
from minibroker.broker.topic_configs import TopicConfigError, check_remote_storage, check_topic_config
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.limits import MAX_BROKERS, MAX_PARTITION_REPLICAS
from minibroker.scenario.loader.scope import Scope, between, is_broker, kafka, unique
from minibroker.scenario.model import ClusterSpec, LinkSpec, TopicSpecModel


def read_cluster(root: Table, scope: Scope) -> None:
    """``[cluster]``: brokers, their Kafka settings (all, and per broker id), latencies."""
    table = root.table("cluster")
    brokers = table.int("brokers", 3, 1, maximum=MAX_BROKERS)
    config = kafka(table, "config", BrokerConfig.from_kafka)
    overrides: dict[int, dict[str, Any]] = {}
    per_broker = table.table("broker")
    for key in list(per_broker.data):
        if not key.isdigit() or int(key) >= brokers:
            raise per_broker.error(key, f"expected a broker id 0..{brokers - 1}, got {describe(key)}")
        overrides[int(key)] = kafka(
            per_broker, key, lambda values, where: BrokerConfig.from_kafka({**config, **values}, where)
        )
    scope.cluster = ClusterSpec(
        brokers,
        config,
        overrides,
        table.ms("latency_ms", 0),
        table.ms("isr_commit_delay_ms", 0),
        table.ms("crash_detection_ms", 0),
    )
    table.finish()


def read_topics(root: Table, scope: Scope) -> None:
    """``[[topics]]``: names (unique), partition counts, replication factors, assignments."""
    cluster = scope.cluster
    tiered = any(
        settings.get("remote.log.storage.system.enable", False)
        for settings in (cluster.config, *cluster.broker_overrides.values())
    )
    scope.topics = scope.items(root, "topics", lambda table, _: _topic(table, cluster.brokers, tiered))
    if len(scope.topics) < len(root.array("topics")):
        return  # a topic with a problem: names are checked once they all load
    unique([t.name for t in scope.topics], "topics", "name", scope.ctx)
    replicas = sum(t.partitions * t.replication_factor for t in scope.topics)
    if replicas > MAX_PARTITION_REPLICAS:
        raise scope.ctx.error(
            "topics",
            f"{replicas:,} partition replicas in all (partitions times replication_factor); "
            f"expected at most {MAX_PARTITION_REPLICAS:,}",
        )


def _topic(table: Table, brokers: int, tiered: bool) -> TopicSpecModel:
    name = table.str("name")
    partitions = table.int("partitions", 1, 1, maximum=MAX_PARTITION_REPLICAS)
    rf = table.int("replication_factor", 1, 1)
    if rf > brokers:
        raise table.error(
            "replication_factor", f"expected at most {brokers} (the number of brokers), got {rf}"
        )
    assignment = None
    if table.has("assignment"):
        raw = table.array("assignment")
        if len(raw) != partitions or any(
            not isinstance(r, list)
            or len(r) != rf
            or any(not is_broker(b, brokers) for b in r)
            or len(set(r)) != rf
            for r in raw
        ):
            raise table.error(
                "assignment",
                f"expected {partitions} lists of {rf} distinct broker ids 0..{brokers - 1}, "
                f"got {describe(raw)}",
            )
        assignment = tuple(tuple(r) for r in raw)
    configs = _topic_configs(table.table("configs"))
    try:
        check_remote_storage(configs, tiered)
    except TopicConfigError as error:
        raise table.error("configs", str(error)) from None
    table.finish()
    return TopicSpecModel(name, partitions, rf, assignment, configs)


def _topic_configs(table: Table) -> dict[str, str]:
    """``configs``: Kafka topic configs (``{ "remote.storage.enable" = true }``), kept as Kafka's strings."""
    configs = {}
    for name, value in table.data.items():
        table.used.add(name)
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, (int, float)):
            value = str(value)
        elif not isinstance(value, str):
            raise table.error(name, f"expected a string, number or boolean, got {describe(value)}")
        try:
            configs[name] = check_topic_config(name, value)
        except TopicConfigError as error:
            raise table.error(name, str(error).removeprefix(f"{name}: ")) from None
    return configs


def read_links(root: Table, scope: Scope) -> None:
    """``[[links]]``: the latency of the link between two nodes (brokers or clients)."""

    def link(table: Table, _: int) -> LinkSpec:
        spec = LinkSpec(between(table, scope.cluster, scope.clients), table.ms("latency_ms"))
        table.finish()
        return spec

    scope.links = scope.items(root, "links", link)
