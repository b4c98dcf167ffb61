"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs on every resource type Kafka 4 has.

Resources are Kafka's (``ConfigResource.Type``), as ``ConfigHelper`` and
``ConfigAdminManager`` treat them; values travel as strings, as on the wire:

- TOPIC (2, by name): the configs of ``topic_configs``, each an override (source
  DYNAMIC_TOPIC_CONFIG) or its fallback: the broker setting it follows, else Kafka's default.
- BROKER (4, by id; ``""`` is the cluster-wide default): every ``BrokerConfig`` setting, with
  its source: DYNAMIC_BROKER_CONFIG (altered for this broker), DYNAMIC_DEFAULT_BROKER_CONFIG
  (altered for all), STATIC_BROKER_CONFIG (the cluster was made with it), or DEFAULT_CONFIG;
  ``""`` describes the cluster-wide dynamic ones only. Every broker setting can be altered here
  (Kafka allows only its dynamic ones); the effects already modelled follow at once
  (``Broker.set_config``: min ISR and lag now, timer settings on restart).
- BROKER_LOGGER (8, by broker id): the broker's loggers and levels (``root`` at INFO, and the
  ones set), source DYNAMIC_BROKER_LOGGER_CONFIG; only IncrementalAlterConfigs changes them.
- CLIENT_METRICS (16, a subscription name): ``metrics``, ``interval.ms``, ``match``; only
  the ones set are described (source CLIENT_METRICS_CONFIG), as Kafka does.
- GROUP (32, a group id, which need not exist): Kafka's ``GroupConfig`` (session and
  heartbeat intervals of consumer and share groups, the share record lock), set ones with
  source GROUP_CONFIG, the others Kafka's defaults. Stored and described; the coordinator
  does not read them.

Operations: SET, DELETE (back to the fallback), APPEND and SUBTRACT (list configs only).
The legacy AlterConfigs (``replace_configs``) sets the configs given and removes every
other override of the resource, as Kafka's controller does; it refuses BROKER_LOGGER. A bad
name or value is INVALID_CONFIG with the first problem's message, a null value to set or an
empty group or subscription name INVALID_REQUEST; ``validate_only`` checks only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from minibroker.broker.config import BrokerConfig, ConfigError, check_value
from minibroker.broker.topic_configs import (
    TOPIC_CONFIGS,
    TopicConfigError,
    check_remote_storage,
    check_topic_config,
)
from minibroker.common.errors import Errors
from minibroker.sim.cluster import Cluster
from minibroker.sim.topic_admin import AdminError

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG = (
    4,
    5,
    6,
    7,
    8,
)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TOPIC_TYPES = {
    "int": INT,
    "long": LONG,
    "bool": BOOLEAN,
    "choice": STRING,
    "list": LIST,
    "ratio": DOUBLE,
    "throttled": LIST,
}
_DEFAULTS = BrokerConfig()
#: Kafka's GroupConfig: name -> (default, least, most); the bounds are the broker's group.*.min/max defaults
GROUP_CONFIGS: dict[str, tuple[int, int, int]] = {
    "consumer.heartbeat.interval.ms": (5000, 5000, 15000),
    "consumer.session.timeout.ms": (45000, 45000, 60000),
    "share.heartbeat.interval.ms": (5000, 5000, 15000),
    "share.record.lock.duration.ms": (30000, 15000, 60000),
    "share.session.timeout.ms": (45000, 45000, 60000),
}
#: Kafka's GroupConfig with a choice of values: name -> (the values allowed, default); the share
#: partitions of a group read these and ``share.record.lock.duration.ms`` (``SharePartitionManager``)
GROUP_CHOICE_CONFIGS: dict[str, tuple[tuple[str, ...], str]] = {
    "share.auto.offset.reset": (("latest", "earliest"), "latest"),
    "share.isolation.level": (("read_uncommitted", "read_committed"), "read_uncommitted"),
}
#: Kafka's ClientMetricsConfigs: name -> config type
CLIENT_METRICS_CONFIGS = {"interval.ms": INT, "match": LIST, "metrics": LIST}
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")
ROOT_LOGGER = "root"


@attrs.frozen
class ConfigEntry:
    name: str
    value: str
    source: int
    config_type: int
    read_only: bool = False
    #: (name, value, source) from the most to the least specific, as Kafka's DescribeConfigs synonyms
    synonyms: tuple[tuple[str, str, int], ...] = ()

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


def broker_synonyms(cluster: Cluster, broker: int, key: str) -> list[tuple[str, str, int]]:
    """Where a broker setting's value comes from, most specific first (Kafka's ``configSynonyms``)."""
    found = []
    for name, source in ((str(broker), DYNAMIC_BROKER_CONFIG), ("", DYNAMIC_DEFAULT_BROKER_CONFIG)):
        if key in cluster.dynamic_configs.get(name, {}):
            found.append((key, _text(cluster.dynamic_configs[name][key]), source))
    static, default = cluster.static_configs[broker].to_kafka()[key], _DEFAULTS.to_kafka()[key]
    if static != default:
        found.append((key, _text(static), STATIC_BROKER_CONFIG))
    found.append((key, _text(default), DEFAULT_CONFIG))
    return found


def describe_configs(
    cluster: Cluster, resource_type: int, name: str, keys: Sequence[str] | None = None
) -> list[ConfigEntry]:
    """The configs of one resource (only ``keys`` when given; unknown keys are left out)."""
    wanted = set(keys) if keys else None  # null or empty: every config, as Kafka answers
    entries: list[ConfigEntry] = []
    if resource_type == BROKER:
        broker = _broker_id(cluster, name, allow_default=True)
        if broker is None:
            settings = cluster.dynamic_configs.get("", {})
            sources = dict.fromkeys(settings, DYNAMIC_DEFAULT_BROKER_CONFIG)
        else:
            settings = cluster.brokers[broker].config.to_kafka()
            sources = {key: _broker_source(cluster, broker, key) for key in settings}
        for key, value in settings.items():
            if wanted is None or key in wanted:
                kind = BOOLEAN if isinstance(value, bool) else INT if isinstance(value, int) else STRING
                synonyms = broker_synonyms(cluster, 0 if broker is None else broker, key)
                if broker is None:
                    synonyms = [s for s in synonyms if s[2] != DYNAMIC_BROKER_CONFIG]
                entries.append(ConfigEntry(key, _text(value), sources[key], kind, synonyms=tuple(synonyms)))
        scopes = [("", DYNAMIC_DEFAULT_BROKER_CONFIG)]
        if broker is not None:
            scopes.insert(0, (name, DYNAMIC_BROKER_CONFIG))
        shown = {entry.name for entry in entries}
        for scope, source in scopes:
            for key, value in sorted(cluster.resource_configs.get((BROKER, scope), {}).items()):
                if (wanted is None or key in wanted) and key not in shown:
                    shown.add(key)
                    entries.append(ConfigEntry(key, value, source, STRING, synonyms=((key, value, source),)))
        return entries
    if resource_type in (BROKER_LOGGER, CLIENT_METRICS, GROUP):
        return [e for e in _other_entries(cluster, resource_type, name) if wanted is None or e.name in wanted]
    if resource_type != TOPIC:
        raise AdminError(Errors.INVALID_REQUEST, f"Unsupported resource type: {resource_type}")
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
        synonyms = [(key, overrides[key], DYNAMIC_TOPIC_CONFIG)] if key in overrides else []
        if definition.broker_key in broker_settings:
            synonyms += broker_synonyms(cluster, 0, definition.broker_key)
        else:
            synonyms.append((definition.broker_key or key, definition.default, DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(
            ConfigEntry(key, value, source, _TOPIC_TYPES[definition.kind], synonyms=tuple(synonyms))
        )
    return entries


def _resource_name(resource_type: int, name: str) -> None:
    if name:
        return
    what = {GROUP: "Group name", CLIENT_METRICS: "Client metrics subscription name"}
    raise AdminError(Errors.INVALID_REQUEST, f"{what.get(resource_type, 'Broker id')} must not be empty")


def _other_entries(cluster: Cluster, resource_type: int, name: str) -> list[ConfigEntry]:
    """The configs of a BROKER_LOGGER, CLIENT_METRICS or GROUP resource."""
    _resource_name(resource_type, name)
    stored = cluster.resource_configs.get((resource_type, name), {})
    if resource_type == BROKER_LOGGER:
        _broker_id(cluster, name, allow_default=False)
        levels = {ROOT_LOGGER: "INFO", **stored}
        return [ConfigEntry(k, v, DYNAMIC_BROKER_LOGGER_CONFIG, 0) for k, v in sorted(levels.items())]
    if resource_type == CLIENT_METRICS:
        return [
            ConfigEntry(k, v, CLIENT_METRICS_CONFIG, CLIENT_METRICS_CONFIGS[k])
            for k, v in sorted(stored.items())
        ]
    defaults = {k: (str(d), INT) for k, (d, _, _) in GROUP_CONFIGS.items()}
    defaults.update({k: (d, STRING) for k, (_, d) in GROUP_CHOICE_CONFIGS.items()})
    return [
        ConfigEntry(k, stored[k], GROUP_CONFIG, kind)
        if k in stored
        else ConfigEntry(k, d, DEFAULT_CONFIG, kind)
        for k, (d, kind) in sorted(defaults.items())
    ]


def _check_other(resource_type: int, key: str, value: str) -> str:
    """A BROKER_LOGGER, CLIENT_METRICS or GROUP config value as kept, or INVALID_CONFIG."""
    text = value.strip()
    if resource_type == BROKER_LOGGER:
        if text.upper() not in LOG_LEVELS:
            raise AdminError(
                Errors.INVALID_CONFIG,
                f"Cannot set the log level of {key} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(LOG_LEVELS)}",
            )
        return text.upper()
    if resource_type == CLIENT_METRICS:
        if key not in CLIENT_METRICS_CONFIGS:
            raise AdminError(Errors.INVALID_CONFIG, f"Unknown client metric configuration: {key}")
        if key == "interval.ms" and not (text.isdigit() and 100 <= int(text) <= 3_600_000):
            raise AdminError(
                Errors.INVALID_CONFIG, f"interval.ms: expected a number in 100..3600000, got {value!r}"
            )
        return text
    if key in GROUP_CHOICE_CONFIGS:
        choices = GROUP_CHOICE_CONFIGS[key][0]
        if text not in choices:
            raise AdminError(
                Errors.INVALID_CONFIG, f"{key}: expected one of {', '.join(choices)}, got {value!r}"
            )
        return text
    if key not in GROUP_CONFIGS:
        raise AdminError(Errors.INVALID_CONFIG, f"Unknown group config name: {key}")
    _, least, most = GROUP_CONFIGS[key]
    if not (text.isdigit() and least <= int(text) <= most):
        raise AdminError(Errors.INVALID_CONFIG, f"{key}: expected a number in {least}..{most}, got {value!r}")
    return str(int(text))


def _alter_other(
    cluster: Cluster,
    resource_type: int,
    name: str,
    ops: Sequence[tuple[str, int, str | None]],
    validate_only: bool,
) -> None:
    _resource_name(resource_type, name)
    if resource_type == BROKER_LOGGER:
        _broker_id(cluster, name, allow_default=False)
    configs = dict(cluster.resource_configs.get((resource_type, name), {}))
    for key, op, value in ops:
        if op == SET:
            configs[key] = _check_other(resource_type, key, value or "")
        elif op == DELETE:
            if resource_type == BROKER_LOGGER and key == ROOT_LOGGER:
                raise AdminError(
                    Errors.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"
                )
            configs.pop(key, None)
        elif (
            op in (APPEND, SUBTRACT)
            and resource_type == CLIENT_METRICS
            and CLIENT_METRICS_CONFIGS.get(key) == LIST
        ):
            current = [i for i in configs.get(key, "").split(",") if i]
            items = [i.strip() for i in (value or "").split(",") if i.strip()]
            merged = (
                current + [i for i in items if i not in current]
                if op == APPEND
                else [i for i in current if i not in items]
            )
            configs[key] = ",".join(merged)
        elif op in (APPEND, SUBTRACT):
            raise AdminError(Errors.INVALID_CONFIG, f"{key}: APPEND and SUBTRACT work on list configs only")
        else:
            raise AdminError(Errors.INVALID_REQUEST, f"{key}: unknown config operation {op}")
    if not validate_only:
        cluster.resource_configs[resource_type, name] = configs


def replace_configs(
    cluster: Cluster,
    resource_type: int,
    name: str,
    configs: Sequence[tuple[str, str | None]],
    validate_only: bool = False,
) -> None:
    """The legacy AlterConfigs: ``configs`` become the resource's whole set of overrides."""
    if resource_type == TOPIC:
        spec = cluster.topics.get(name)
        current = set(spec.configs) if spec is not None else set()
    elif resource_type == BROKER:
        current = set(cluster.dynamic_configs.get(name, {})) | set(
            cluster.resource_configs.get((BROKER, name), {})
        )
    elif resource_type in (CLIENT_METRICS, GROUP):
        current = set(cluster.resource_configs.get((resource_type, name), {}))
    else:
        raise AdminError(Errors.INVALID_REQUEST, f"Unknown resource type {resource_type}")
    given = {key for key, _ in configs}
    ops = [(key, SET, value) for key, value in configs]
    ops += [(key, DELETE, None) for key in sorted(current - given)]
    alter_configs(cluster, resource_type, name, ops, validate_only)


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
    nulls = [key for key, op, value in ops if op != DELETE and value is None]
    if nulls:
        raise AdminError(Errors.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    if resource_type == TOPIC:
        _alter_topic(cluster, name, ops, validate_only)
    elif resource_type == BROKER:
        _alter_broker(cluster, name, ops, validate_only)
    elif resource_type in (BROKER_LOGGER, CLIENT_METRICS, GROUP):
        _alter_other(cluster, resource_type, name, ops, validate_only)
    else:
        raise AdminError(Errors.INVALID_REQUEST, f"Unknown resource type {resource_type}")


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
        check_remote_storage(configs, cluster.remote_storage_system_enabled())
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
    # a broker setting minibroker does not model is stored and described, as KRaft's controller takes any
    # broker config (its ControllerConfigurationValidator checks only the broker id); nothing acts on it
    unmodelled = dict(cluster.resource_configs.get((BROKER, name), {}))
    for key, op, value in ops:
        if key not in names:
            if op == DELETE:
                unmodelled.pop(key, None)
            elif op == SET:
                unmodelled[key] = value or ""
            else:
                raise AdminError(
                    Errors.INVALID_CONFIG, f"{key}: APPEND and SUBTRACT work on list configs only"
                )
            continue
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
    cluster.resource_configs[BROKER, name] = unmodelled
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
