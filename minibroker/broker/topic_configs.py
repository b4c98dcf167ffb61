"""Topic-level configs: every config Kafka 4 defines for a topic, and how values are checked.

The table follows Kafka's ``LogConfig`` (storage/.../log/LogConfig.java) and
``TopicConfig`` (https://kafka.apache.org/documentation/#topicconfigs), without the
configs Kafka 4 removed (``message.format.version``, ``message.downconversion.enable``,
``message.timestamp.difference.max.ms``). A topic's overrides are strings by Kafka's
names (``TopicSpec.configs``), as Kafka keeps them. Each config has a type, Kafka's
default and the broker setting it falls back to (Kafka's synonym, e.g. the broker's
``log.segment.bytes`` for ``segment.bytes``); the fallback counts only where minibroker
has that broker setting. Some are *modelled* (they change what the emulator does):

- ``min.insync.replicas``: the partition's min ISR (acks=all produce, the HW freeze);
- ``unclean.leader.election.enable``: the controller may elect an out-of-sync replica;
- ``cleanup.policy``: without ``delete`` DeleteRecords answers POLICY_VIOLATION; with
  ``compact`` a record without a key is refused (INVALID_RECORD, ``server.log_validator``) and
  the log cleaner compacts the topic, as ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
  ``max.compaction.lag.ms`` and ``delete.retention.ms`` say (``log_cleaner``);
- ``segment.ms``: when a log rolls its active segment (with ``segment.bytes``);
- ``max.message.bytes``, ``segment.bytes``: the largest batch and the largest produce to a
  partition (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE);
- ``message.timestamp.type``, ``message.timestamp.before.max.ms``, ``...after.max.ms``:
  LogAppendTime stamping and the timestamp bounds (INVALID_TIMESTAMP);
- ``flush.messages``, ``flush.ms``: with ``serve --data-dir``, when a log is fsynced (read when
  the log's files are opened);
- ``remote.storage.enable``, ``local.retention.ms``, ``local.retention.bytes``: tiered storage
  (KIP-405, ``remote_log_manager``): closed segments are copied to the remote tier and deleted
  locally past the local retention (-2: ``retention.ms`` / ``retention.bytes``);
- ``segment.bytes``: the size at which a new replica's log rolls its segments.

The others are kept and described but change nothing here (retention, compression levels,
throttles): an application may set them, and reads back what it set.
An unknown name or a value of the wrong form raises ``TopicConfigError`` (Kafka's
INVALID_CONFIG) with a one-line message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
_THROTTLED = re.compile(r"[0-9]+:[0-9]+")


class TopicConfigError(ValueError):
    """A topic config name or value Kafka would refuse (INVALID_CONFIG)."""


@attrs.frozen
class TopicConfigDef:
    name: str
    kind: str  # "int", "long", "bool", "choice", "list", "ratio" (0..1) or "throttled" (p:b list or *)
    default: str
    broker_key: str | None = None  # the broker setting it falls back to
    minimum: int = 0
    maximum: int = INT64_MAX
    choices: tuple[str, ...] = ()
    modelled: bool = False


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef(
            "cleanup.policy",
            "list",
            "delete",
            "log.cleanup.policy",
            choices=("delete", "compact"),
            modelled=True,
        ),
        TopicConfigDef(
            "compression.type",
            "choice",
            "producer",
            "compression.type",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        TopicConfigDef(
            "compression.gzip.level", "int", "-1", "compression.gzip.level", minimum=-1, maximum=9
        ),
        TopicConfigDef("compression.lz4.level", "int", "9", "compression.lz4.level", minimum=1, maximum=17),
        TopicConfigDef(
            "compression.zstd.level", "int", "3", "compression.zstd.level", minimum=-131072, maximum=22
        ),
        TopicConfigDef(
            "delete.retention.ms", "long", "86400000", "log.cleaner.delete.retention.ms", modelled=True
        ),
        TopicConfigDef("file.delete.delay.ms", "long", "60000", "log.segment.delete.delay.ms"),
        TopicConfigDef(
            "flush.messages", "long", str(INT64_MAX), "log.flush.interval.messages", minimum=1, modelled=True
        ),
        TopicConfigDef("flush.ms", "long", str(INT64_MAX), "log.flush.interval.ms", modelled=True),
        TopicConfigDef("follower.replication.throttled.replicas", "throttled", ""),
        TopicConfigDef("index.interval.bytes", "int", "4096", "log.index.interval.bytes", maximum=INT32_MAX),
        TopicConfigDef("leader.replication.throttled.replicas", "throttled", ""),
        TopicConfigDef(
            "local.retention.bytes", "long", "-2", "log.local.retention.bytes", minimum=-2, modelled=True
        ),
        TopicConfigDef(
            "local.retention.ms", "long", "-2", "log.local.retention.ms", minimum=-2, modelled=True
        ),
        TopicConfigDef(
            "max.compaction.lag.ms",
            "long",
            str(INT64_MAX),
            "log.cleaner.max.compaction.lag.ms",
            minimum=1,
            modelled=True,
        ),
        TopicConfigDef(
            "max.message.bytes", "int", "1048588", "message.max.bytes", maximum=INT32_MAX, modelled=True
        ),
        TopicConfigDef(
            "message.timestamp.after.max.ms",
            "long",
            "3600000",
            "log.message.timestamp.after.max.ms",
            modelled=True,
        ),
        TopicConfigDef(
            "message.timestamp.before.max.ms",
            "long",
            str(INT64_MAX),
            "log.message.timestamp.before.max.ms",
            modelled=True,
        ),
        TopicConfigDef(
            "message.timestamp.type",
            "choice",
            "CreateTime",
            "log.message.timestamp.type",
            choices=("CreateTime", "LogAppendTime"),
            modelled=True,
        ),
        TopicConfigDef(
            "min.cleanable.dirty.ratio", "ratio", "0.5", "log.cleaner.min.cleanable.ratio", modelled=True
        ),
        TopicConfigDef(
            "min.compaction.lag.ms", "long", "0", "log.cleaner.min.compaction.lag.ms", modelled=True
        ),
        TopicConfigDef(
            "min.insync.replicas",
            "int",
            "1",
            "min.insync.replicas",
            minimum=1,
            maximum=INT32_MAX,
            modelled=True,
        ),
        TopicConfigDef("preallocate", "bool", "false", "log.preallocate"),
        TopicConfigDef("remote.log.copy.disable", "bool", "false"),
        TopicConfigDef("remote.log.delete.on.disable", "bool", "false"),
        TopicConfigDef("remote.storage.enable", "bool", "false", modelled=True),
        TopicConfigDef("retention.bytes", "long", "-1", "log.retention.bytes", minimum=-INT64_MAX - 1),
        TopicConfigDef("retention.ms", "long", "604800000", "log.retention.ms", minimum=-1),
        TopicConfigDef(
            "segment.bytes",
            "int",
            "1073741824",
            "log.segment.bytes",
            minimum=14,
            maximum=INT32_MAX,
            modelled=True,
        ),
        TopicConfigDef(
            "segment.index.bytes", "int", "10485760", "log.index.size.max.bytes", minimum=4, maximum=INT32_MAX
        ),
        TopicConfigDef("segment.jitter.ms", "long", "0", "log.roll.jitter.ms"),
        TopicConfigDef("segment.ms", "long", "604800000", "log.roll.ms", minimum=1, modelled=True),
        TopicConfigDef(
            "unclean.leader.election.enable",
            "bool",
            "false",
            "unclean.leader.election.enable",
            modelled=True,
        ),
    )
}


def check_topic_config(name: str, value: str | None) -> str:
    """The value as Kafka keeps it (lists without spaces, booleans in lower case); or TopicConfigError."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        known = ", ".join(sorted(TOPIC_CONFIGS))
        raise TopicConfigError(f"unknown topic config {name!r}; minibroker knows: {known}")
    if value is None:
        raise TopicConfigError(f"{name}: a value is needed (null given)")
    text = value.strip()
    if definition.kind in ("int", "long"):
        try:
            number = int(text)
        except ValueError:
            raise TopicConfigError(f"{name}: expected a whole number, got {value!r}") from None
        if not definition.minimum <= number <= definition.maximum:
            raise TopicConfigError(
                f"{name}: expected a number in {definition.minimum}..{definition.maximum}, got {number}"
            )
        return str(number)
    if definition.kind == "ratio":
        try:
            ratio = float(text)
        except ValueError:
            raise TopicConfigError(f"{name}: expected a number in 0..1, got {value!r}") from None
        if not 0 <= ratio <= 1:
            raise TopicConfigError(f"{name}: expected a number in 0..1, got {value!r}")
        return text
    if definition.kind == "throttled":
        items = [item.strip() for item in text.split(",") if item.strip()]
        if items != ["*"] and not all(_THROTTLED.fullmatch(item) for item in items):
            raise TopicConfigError(
                f"{name}: expected * or a comma-separated list of partition:broker, got {value!r}"
            )
        return ",".join(items)
    if definition.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise TopicConfigError(f"{name}: expected true or false, got {value!r}")
        return text.lower()
    if definition.kind == "choice":
        if text not in definition.choices:
            raise TopicConfigError(f"{name}: expected one of {', '.join(definition.choices)}, got {value!r}")
        return text
    items = [item.strip() for item in text.split(",") if item.strip()]
    bad = [item for item in items if item not in definition.choices]
    if not items or bad:
        raise TopicConfigError(
            f"{name}: expected a comma-separated list of {', '.join(definition.choices)}, got {value!r}"
        )
    return ",".join(dict.fromkeys(items))


def check_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Every override checked (``check_topic_config``); the first problem raises."""
    return {name: check_topic_config(name, value) for name, value in configs.items()}


def deletes_records(configs: Mapping[str, str]) -> bool:
    """Whether ``cleanup.policy`` includes ``delete`` (DeleteRecords is refused otherwise)."""
    return "delete" in configs.get("cleanup.policy", "delete").split(",")


def topic_value(name: str, overrides: Mapping[str, str], broker_settings: Mapping[str, object]) -> str:
    """The value in force: the override, else the broker setting it falls back to, else Kafka's default."""
    if name in overrides:
        return overrides[name]
    definition = TOPIC_CONFIGS[name]
    if definition.broker_key is not None and definition.broker_key in broker_settings:
        value = broker_settings[definition.broker_key]
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    return definition.default


def remote_storage_enabled(configs: Mapping[str, str]) -> bool:
    """Whether ``remote.storage.enable`` is true (the topic's closed segments go to the remote tier)."""
    return configs.get("remote.storage.enable", "false") == "true"


def local_retention(configs: Mapping[str, str]) -> tuple[int, int]:
    """(``local.retention.ms``, ``local.retention.bytes``), -2 resolved to ``retention.ms`` / ``.bytes``.

    -1 keeps local segments without limit (Kafka's LogConfig ``localRetentionMs/Bytes``).
    """
    ms = int(configs.get("local.retention.ms", "-2"))
    size = int(configs.get("local.retention.bytes", "-2"))
    if ms == -2:
        ms = int(configs.get("retention.ms", TOPIC_CONFIGS["retention.ms"].default))
    if size == -2:
        size = int(configs.get("retention.bytes", TOPIC_CONFIGS["retention.bytes"].default))
    return ms, size


def check_remote_storage(configs: Mapping[str, str], system_enabled: bool) -> None:
    """Kafka's rules for a topic in tiered storage (``LogConfig``), as TopicConfigError.

    ``remote.storage.enable=true`` needs the brokers' ``remote.log.storage.system.enable`` and a
    ``cleanup.policy`` of ``delete`` alone; its local retention may not exceed the total retention.
    """
    if not remote_storage_enabled(configs):
        return
    if not system_enabled:
        raise TopicConfigError(
            "remote.storage.enable: tiered storage is off on the brokers "
            "(remote.log.storage.system.enable=false); a topic cannot use remote storage"
        )
    if configs.get("cleanup.policy", "delete") != "delete":
        raise TopicConfigError("remote.storage.enable: remote storage supports only cleanup.policy=delete")
    for local, total in (
        ("local.retention.ms", "retention.ms"),
        ("local.retention.bytes", "retention.bytes"),
    ):
        local_value = int(configs.get(local, TOPIC_CONFIGS[local].default))
        total_value = int(configs.get(total, TOPIC_CONFIGS[total].default))
        if local_value not in (-2, -1) and total_value != -1 and local_value > total_value:
            raise TopicConfigError(f"{local}: {local_value} is more than {total} ({total_value})")
        if local_value == -1 and total_value != -1:
            raise TopicConfigError(f"{local}: -1 (unlimited) is more than {total} ({total_value})")
