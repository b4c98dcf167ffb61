"""DescribeConfigs and IncrementalAlterConfigs on topics and brokers, changed at run time.

Resources are Kafka's: TOPIC (2, by name) and BROKER (4, by id; ``""`` is the
cluster-wide default, for alters). Values travel as strings, as on the wire.

Topics: the configs of ``topic_configs``, each an override (source
DYNAMIC_TOPIC_CONFIG) or its fallback: the broker setting it follows, else
Kafka's default. Brokers: every ``BrokerConfig`` setting, with its source:
DYNAMIC_BROKER_CONFIG (altered for this broker), DYNAMIC_DEFAULT_BROKER_CONFIG
(altered for all), STATIC_BROKER_CONFIG (the cluster was made with it), or
DEFAULT_CONFIG. Every broker setting can be altered here (Kafka allows only its
dynamic ones); the effects already modelled follow at once (``Broker.set_config``:
min ISR and lag now, timer settings on restart). Operations: SET, DELETE (back to
the fallback), APPEND and SUBTRACT (list configs only). A bad name or value is
INVALID_CONFIG with the first problem's message; ``validate_only`` checks only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from minibroker.broker.config import BrokerConfig, ConfigError, check_value
from minibroker.broker.topic_configs import TOPIC_CONFIGS, TopicConfigError, check_topic_config
from minibroker.common.errors import Errors
from minibroker.sim.cluster import Cluster
from minibroker.sim.topic_admin import AdminError

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TOPIC_TYPES = {"int": INT, "long": LONG, "double": DOUBLE, "bool": BOOLEAN, "choice": STRING, "list": LIST}
_DEFAULTS = BrokerConfig()


@attrs.frozen
class ConfigEntry:
    name: str
    value: str
    source: int
    config_type: int
    read_only: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _broker_id(cluster: Cluster, name: str, allow_default: bool) -> int | None:
    if name == "" and allow_default:
        return None
    if name.isdigit() and int(name) < len(cluster.brokers):
        return int(name)
    raise AdminError(
        Errors.INVALID_REQUEST,
        f"broker resource {name!r}: expected a broker id 0..{len(cluster.brokers) - 1}"
        + (' or "" (every broker)' if allow_default else ""),
    )


def _broker_source(cluster: Cluster, broker: int, key: str) -> int:
    if key in cluster.dynamic_configs.get(str(broker), {}):
        return DYNAMIC_BROKER_CONFIG
    if key in cluster.dynamic_configs.get("", {}):
        return DYNAMIC_DEFAULT_BROKER_CONFIG
    static = cluster.static_configs[broker].to_kafka()
    return DEFAULT_CONFIG if static[key] == _DEFAULTS.to_kafka()[key] else STATIC_BROKER_CONFIG


def describe_configs(
    cluster: Cluster, resource_type: int, name: str, keys: Sequence[str] | None = None
) -> list[ConfigEntry]:
    """The configs of one resource (only ``keys`` when given; unknown keys are left out)."""
    wanted = None if keys is None else set(keys)
    entries: list[ConfigEntry] = []
    if resource_type == BROKER:
        broker = _broker_id(cluster, name, allow_default=False)
        assert broker is not None
        for key, value in cluster.brokers[broker].config.to_kafka().items():
            if wanted is None or key in wanted:
                kind = BOOLEAN if isinstance(value, bool) else INT if isinstance(value, int) else STRING
                entries.append(ConfigEntry(key, _text(value), _broker_source(cluster, broker, key), kind))
        return entries
    if resource_type != TOPIC:
        raise AdminError(Errors.INVALID_REQUEST, f"resource type {resource_type}: expected 2 (topic) or 4")
    spec = cluster.topics.get(name)
    if spec is None:
        raise AdminError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist.")
    return topic_entries(cluster, spec.configs, wanted)


def topic_entries(cluster: Cluster, overrides: dict[str, str], wanted: set[str] | None = None) -> list:
    """A topic's configs given its overrides; the fallbacks are broker 0's settings."""
    entries: list[ConfigEntry] = []
    broker_settings = cluster.brokers[0].config.to_kafka()
    for key, definition in sorted(TOPIC_CONFIGS.items()):
        if wanted is not None and key not in wanted:
            continue
        if key in overrides:
            value, source = overrides[key], DYNAMIC_TOPIC_CONFIG
        elif definition.broker_key is not None:
            value = _text(broker_settings[definition.broker_key])
            source = _broker_source(cluster, 0, definition.broker_key)
        else:
            value, source = definition.default, DEFAULT_CONFIG
        entries.append(ConfigEntry(key, value, source, _TOPIC_TYPES[definition.kind]))
    return entries


def _unique(ops: Sequence[tuple[str, int, str | None]]) -> None:
    names = [name for name, _, _ in ops]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise AdminError(Errors.INVALID_REQUEST, f"duplicate config keys: {', '.join(duplicates)}")


def alter_configs(
    cluster: Cluster,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> None:
    """Apply (name, operation, value) changes to one resource, all or none."""
    _unique(ops)
    if resource_type == TOPIC:
        _alter_topic(cluster, name, ops, validate_only)
    elif resource_type == BROKER:
        _alter_broker(cluster, name, ops, validate_only)
    else:
        raise AdminError(Errors.INVALID_REQUEST, f"resource type {resource_type}: expected 2 (topic) or 4")


def _alter_topic(
    cluster: Cluster, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
) -> None:
    spec = cluster.topics.get(name)
    if spec is None:
        raise AdminError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name!r} does not exist.")
    configs = dict(spec.configs)
    try:
        for key, op, value in ops:
            definition = TOPIC_CONFIGS.get(key)
            if op == DELETE:
                check_topic_config(key, definition.default if definition else None)
                configs.pop(key, None)
            elif op == SET:
                configs[key] = check_topic_config(key, value)
            elif op in (APPEND, SUBTRACT):
                if definition is None or definition.kind != "list":
                    raise TopicConfigError(f"{key}: APPEND and SUBTRACT work on list configs only")
                current = configs.get(key, definition.default).split(",")
                items = check_topic_config(key, value).split(",")
                merged = (
                    current + [i for i in items if i not in current]
                    if op == APPEND
                    else [i for i in current if i not in items]
                )
                configs[key] = check_topic_config(key, ",".join(merged))
            else:
                raise AdminError(Errors.INVALID_REQUEST, f"{key}: unknown config operation {op}")
    except TopicConfigError as error:
        raise AdminError(Errors.INVALID_CONFIG, str(error)) from None
    if not validate_only:
        cluster.set_topic_configs(name, configs)


def _alter_broker(
    cluster: Cluster, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
) -> None:
    target = _broker_id(cluster, name, allow_default=True)
    names = BrokerConfig.kafka_names()
    fields = attrs.fields_dict(BrokerConfig)
    dynamic = dict(cluster.dynamic_configs.get(name, {}))
    for key, op, value in ops:
        if key not in names:
            raise AdminError(Errors.INVALID_CONFIG, f"unknown broker config {key!r}")
        if op == DELETE:
            dynamic.pop(key, None)
        elif op == SET:
            dynamic[key] = _broker_value(fields[names[key]], key, value)
        elif op in (APPEND, SUBTRACT):
            raise AdminError(Errors.INVALID_CONFIG, f"{key}: APPEND and SUBTRACT work on list configs only")
        else:
            raise AdminError(Errors.INVALID_REQUEST, f"{key}: unknown config operation {op}")
    if validate_only:
        return
    cluster.dynamic_configs[name] = dynamic
    for broker in range(len(cluster.brokers)) if target is None else (target,):
        effective = cluster.static_configs[broker].to_kafka()
        effective.update(cluster.dynamic_configs.get("", {}))
        effective.update(cluster.dynamic_configs.get(str(broker), {}))
        current = cluster.brokers[broker].config.to_kafka()
        changed = {k: v for k, v in effective.items() if current[k] != v}
        if changed:
            cluster.set_broker_config(broker, changed)


def _broker_value(field: attrs.Attribute, key: str, value: str | None) -> Any:
    kind = field.metadata["type"]
    text = (value or "").strip()
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ConfigError(f"{key}: expected true or false, got {value!r}")
            return check_value(field, text.lower() == "true", key)
        if kind is int:
            try:
                number = int(text)
            except ValueError:
                raise ConfigError(f"{key}: expected a whole number, got {value!r}") from None
            return check_value(field, number, key)
        return check_value(field, text, key)
    except ConfigError as error:
        raise AdminError(Errors.INVALID_CONFIG, str(error)) from None
