"""Topic-level configs: which Kafka topic configs a topic may override, and how values are checked.

A topic's overrides are strings by Kafka's names (``TopicSpec.configs``), as Kafka
keeps them. Each known config has a type and a default: the broker setting it
falls back to (Kafka's synonym, e.g. the broker's ``min.insync.replicas``) or
Kafka's own default. Some are *modelled* (they change what the emulator does):

- ``min.insync.replicas``: the partition's min ISR (acks=all produce, the HW freeze);
- ``unclean.leader.election.enable``: the controller may elect an out-of-sync replica;
- ``cleanup.policy``: without ``delete`` DeleteRecords answers POLICY_VIOLATION; with ``compact``
  the log cleaner compacts the topic, as ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
  ``max.compaction.lag.ms`` and ``delete.retention.ms`` say (``log_cleaner``);
- ``segment.bytes``, ``segment.ms``: when a log rolls its active segment (read when a replica's
  log is made);
- ``flush.messages``, ``flush.ms``: with ``serve --data-dir``, when a log is fsynced (read when
  the log's files are opened).

The others are kept and described but change nothing here (retention, compression,
timestamps): an application may set them, and reads back what it set.
An unknown name or a value of the wrong form raises ``TopicConfigError`` (Kafka's
INVALID_CONFIG) with a one-line message.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


class TopicConfigError(ValueError):
    """A topic config name or value Kafka would refuse (INVALID_CONFIG)."""


@attrs.frozen
class TopicConfigDef:
    name: str
    kind: str  # "int", "long", "double", "bool", "choice" or "list"
    default: str
    broker_key: str | None = None  # the broker setting it falls back to
    minimum: int = 0
    maximum: int = INT64_MAX
    choices: tuple[str, ...] = ()
    modelled: bool = False


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in (
        TopicConfigDef("cleanup.policy", "list", "delete", choices=("delete", "compact"), modelled=True),
        TopicConfigDef(
            "compression.type",
            "choice",
            "producer",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        TopicConfigDef(
            "delete.retention.ms", "long", "86400000", "log.cleaner.delete.retention.ms", modelled=True
        ),
        TopicConfigDef(
            "flush.messages", "long", str(INT64_MAX), "log.flush.interval.messages", minimum=1, modelled=True
        ),
        TopicConfigDef("flush.ms", "long", str(INT64_MAX), "log.flush.interval.ms", modelled=True),
        TopicConfigDef(
            "max.compaction.lag.ms",
            "long",
            str(INT64_MAX),
            "log.cleaner.max.compaction.lag.ms",
            minimum=1,
            modelled=True,
        ),
        TopicConfigDef("max.message.bytes", "int", "1048588", maximum=INT32_MAX),
        TopicConfigDef(
            "message.timestamp.type", "choice", "CreateTime", choices=("CreateTime", "LogAppendTime")
        ),
        TopicConfigDef("min.cleanable.dirty.ratio", "double", "0.5", maximum=1, modelled=True),
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
        TopicConfigDef("retention.bytes", "long", "-1", minimum=-1),
        TopicConfigDef("retention.ms", "long", "604800000", minimum=-1),
        TopicConfigDef(
            "segment.bytes",
            "int",
            "1073741824",
            "log.segment.bytes",
            minimum=14,
            maximum=INT32_MAX,
            modelled=True,
        ),
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
    if definition.kind in ("int", "long", "double"):
        whole = definition.kind != "double"
        try:
            number: float = int(text) if whole else float(text)
        except ValueError:
            form = "a whole number" if whole else "a number"
            raise TopicConfigError(f"{name}: expected {form}, got {value!r}") from None
        if not definition.minimum <= number <= definition.maximum:
            raise TopicConfigError(
                f"{name}: expected a number in {definition.minimum}..{definition.maximum}, got {number}"
            )
        return str(number)
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
