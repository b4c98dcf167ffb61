"""The ``[[clients]]`` section: producers and consumers, their Kafka settings and assignments
(a transactional producer's and a READ_COMMITTED consumer's keys: ``transactions``)."""

from __future__ import annotations

from typing import Any

from minibroker.broker.config import ConsumerConfig, ProducerConfig
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.groups import read_group_protocol, read_subscribe
from minibroker.scenario.loader.scope import Scope, check_partition, kafka, unique
from minibroker.scenario.loader.share import check_share_consumer
from minibroker.scenario.loader.transactions import transactional_settings
from minibroker.scenario.model import ClientSpec, TopicSpecModel


def read_clients(root: Table, scope: Scope) -> None:
    scope.clients = scope.items(root, "clients", lambda table, _: _client(table, scope.topics))
    if len(scope.clients) == len(root.array("clients")):
        unique([c.id for c in scope.clients], "clients", "id", scope.ctx)


def fix_acks(values: dict) -> dict:
    """``acks`` as Kafka spells it ("all", "-1", "0", "1") as the number the producer uses."""
    acks = values.get("acks", -1)
    if acks in ("all", "-1"):
        acks = -1
    elif acks in ("0", "1"):
        acks = int(acks)
    values["acks"] = acks
    return values


def _client(table: Table, topics: tuple[TopicSpecModel, ...]) -> ClientSpec:
    client_id = table.str("id")
    if client_id == "controller" or client_id.isdigit():
        raise table.error(
            "id", f"expected a name that is not 'controller' or a broker id, got {describe(client_id)}"
        )
    kind = table.str("type", choices=("producer", "consumer", "share_consumer"))
    if kind == "producer":
        config = kafka(table, "config", ProducerConfig.from_kafka, fix_acks)
        if config["acks"] not in (-1, 0, 1):
            config_path = table.sub("config.acks")
            raise table.ctx.error(config_path, f"expected all, -1, 0 or 1, got {describe(config['acks'])}")
        config = transactional_settings(table, kind, config)
        assign: tuple[tuple[str, int, int], ...] = ()
    else:
        config = transactional_settings(table, kind, kafka(table, "config", ConsumerConfig.from_kafka))
        if table.has("group_protocol"):
            config = read_group_protocol(table, config)
        assign = tuple(_assignment(table, i, value, topics) for i, value in enumerate(table.array("assign")))
    spec = ClientSpec(client_id, kind, config, assign)
    if kind != "producer" and table.has("subscribe"):
        spec = read_subscribe(table, spec, topics)
    if kind == "share_consumer":
        check_share_consumer(table, spec)
    table.finish()
    return spec


def _assignment(table: Table, i: int, value: Any, topics: tuple[TopicSpecModel, ...]) -> tuple[str, int, int]:
    where = f"assign[{i}]"
    if isinstance(value, str):
        topic, _, partition = value.rpartition("-")
        if not topic or not partition.isdigit():
            raise table.error(where, f"expected 'topic-partition' like 't-0', got {describe(value)}")
        return (*check_partition(table, where, topic, int(partition), topics), 0)
    item = Table(value, table.sub(where), table.ctx)
    result = (
        *check_partition(item, "topic", item.str("topic"), item.int("partition", 0), topics),
        item.int("offset", 0),
    )
    item.finish()
    return result
