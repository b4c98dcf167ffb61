"""Settings of delayed messages, by name, with their defaults.

``DelayConfig.from_kafka({"delay.levels": ["5s", "1m"], ...})``: an unknown name
or a bad value raises ``ConfigError`` naming the key and the expected form, as
the brokers' settings do. None of these names is Kafka's (Kafka has no delayed
messages); they follow its style.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from minibroker.broker.config import ConfigError, _int_field, _KafkaNamed, _text_field
from minibroker.delayed_messages.levels import DEFAULT_LEVELS, DelayError, DelayLevels, format_duration

LEVELS_KEY = "delay.levels"


@attrs.define(frozen=True)
class DelayConfig(_KafkaNamed):
    """The delay levels' topics and every broker's DelayService."""

    #: partitions of each level topic
    topic_partitions: int = _int_field("delay.topic.partitions", 1, 1)
    #: replication factor of the level topics and ``__delay_offsets``; 0: min(3, brokers)
    topic_replication_factor: int = _int_field("delay.topic.replication.factor", 0, 0)
    #: a partition's fetching pauses when this many of its messages are held, resumes below it
    max_held_per_partition: int = _int_field("delay.service.max.held.per.partition", 10_000, 1)
    #: the most messages one forwarding round sends before it commits (bounds duplicates after a crash)
    max_in_flight: int = _int_field("delay.service.max.in.flight", 100, 1)
    #: rounds sent and not yet covered by an acknowledged commit (several in flight at once)
    forward_rounds: int = _int_field("delay.service.forward.rounds", 5, 1)
    #: committed records of the level topics are deleted (DeleteRecords) at most this often (``purge.py``)
    purge_interval_ms: int = _int_field("delay.service.purge.interval.ms", 1_000, 1)
    #: how often the service looks for the level partitions its broker leads; its fetches' max wait
    poll_ms: int = _int_field("delay.service.poll.ms", 500, 1)
    #: wait before retrying a forward, commit or offsets read that failed
    retry_backoff_ms: int = _int_field("delay.service.retry.backoff.ms", 100, 1)
    #: forwards tried, the first included, for a message whose real topic or partition does not exist
    undeliverable_attempts: int = _int_field("delay.service.undeliverable.attempts", 10, 1)
    #: how long such a message is parked (written to a level again) between two attempts
    undeliverable_backoff_ms: int = _int_field("delay.service.undeliverable.backoff.ms", 6_000, 1)
    #: where such a message goes after its last attempt ("": dropped, counted and traced)
    dead_letter_topic: str = _text_field("delay.service.dead.letter.topic", "")
    #: the levels (``delay.levels``: a list of durations, or one comma-separated string)
    levels: DelayLevels = attrs.field(
        factory=lambda: DelayLevels.parse(DEFAULT_LEVELS), metadata={"kafka": LEVELS_KEY}
    )

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any], where: str = "delay_service") -> DelayConfig:
        settings = dict(settings)
        names = settings.pop(LEVELS_KEY, DEFAULT_LEVELS)
        if not isinstance(names, (str, list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f'{where}.{LEVELS_KEY}: expected a list of durations like ["5s", "1m"]')
        try:
            levels = DelayLevels.parse(names, f"{where}.{LEVELS_KEY}")
        except DelayError as error:
            raise ConfigError(str(error)) from None
        return attrs.evolve(super().from_kafka(settings, where), levels=levels)

    def to_kafka(self) -> dict[str, Any]:
        return {**super().to_kafka(), LEVELS_KEY: [format_duration(ms) for ms in self.levels.delays_ms]}

    def replication_factor(self, brokers: int) -> int:
        """The internal topics' replication factor on a cluster of ``brokers``."""
        rf = self.topic_replication_factor or min(3, brokers)
        if rf > brokers:
            raise ConfigError(
                f"delay.topic.replication.factor: {rf} is more than the cluster's {brokers} brokers"
            )
        return rf
