"""LogConfig: the settings one partition's log lives by, from its topic's overrides and the broker's.

Kafka's ``LogConfig``
(https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java):
each topic config falls back to its broker synonym (``segment.ms`` to ``log.roll.ms``,
``delete.retention.ms`` to ``log.cleaner.delete.retention.ms``, ...), then to Kafka's default.
Only what the log and its cleaner act on is here: how segments roll and how the topic is compacted.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from minibroker.broker.config import BrokerConfig


@attrs.frozen
class LogConfig:
    """``compact``/``delete``: the words of ``cleanup.policy``; the rest by Kafka's names, in Python."""

    compact: bool = False
    delete: bool = True
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000

    @classmethod
    def of(cls, overrides: Mapping[str, str], broker: BrokerConfig) -> LogConfig:
        """The topic's ``overrides`` (checked strings, ``topic_configs``) over ``broker``'s settings."""
        policy = overrides.get("cleanup.policy", "delete").split(",")

        def number(name: str, default: int) -> int:
            return int(overrides[name]) if name in overrides else default

        return cls(
            compact="compact" in policy,
            delete="delete" in policy,
            segment_bytes=number("segment.bytes", broker.log_segment_bytes),
            segment_ms=number("segment.ms", broker.log_roll_ms),
            min_cleanable_ratio=float(overrides.get("min.cleanable.dirty.ratio", "0.5")),
            min_compaction_lag_ms=number("min.compaction.lag.ms", broker.log_cleaner_min_compaction_lag_ms),
            max_compaction_lag_ms=number("max.compaction.lag.ms", broker.log_cleaner_max_compaction_lag_ms),
            delete_retention_ms=number("delete.retention.ms", broker.log_cleaner_delete_retention_ms),
        )
