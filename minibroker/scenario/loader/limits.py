"""The bounds a scenario must stay within, so that every run fits this machine.

Each is far beyond what a scenario about purgatories needs; past them a run would
exhaust memory or take hours of wall time, so the loader refuses it before it starts
(docs/scenarios.md lists them for users). ``budget`` projects the work of a whole run.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from minibroker.broker.config import BrokerConfig, ConsumerConfig, ProducerConfig

#: every time in a scenario (``at``, ``end_ms``, ``duration_ms``, latencies, ``*.ms`` settings): one day
MAX_MS = 86_400_000
MAX_BROKERS = 1000
#: records and bytes of one produce: Kafka's record count and batch length are 32-bit, and offsets
#: (64-bit) cannot overflow within MAX_EVENTS produces of at most this many records
MAX_BATCH = 2**31 - 1
#: partitions times replication factor, over every topic a run or ``serve`` creates, internal
#: topics included (budget.py's ``planned_topics``)
MAX_PARTITION_REPLICAS = 100_000
#: the projected events of a run (see budget.py): a few minutes of wall time
MAX_EVENTS = 1_000_000
#: problems reported for one file; the rest are counted
MAX_PROBLEMS = 20
#: Kafka-named settings with bounds of their own: (minimum, maximum or None)
SETTING_LIMITS: dict[str, tuple[int, int | None]] = {
    # a level of one bucket never widens: each overflow level is as fine as the last, without end
    "minibroker.timer.wheel.size": (2, 1024),
    # Kafka 3.x's own minimum (a v0 record's overhead); Kafka 4.0 raised it to 1 MiB
    "log.segment.bytes": (14, None),
    # the sizes of the topics a run creates by itself (a topic's partitions are bounded alike)
    "offsets.topic.num.partitions": (1, MAX_PARTITION_REPLICAS),
    "offsets.topic.replication.factor": (1, MAX_BROKERS),
    "num.partitions": (1, MAX_PARTITION_REPLICAS),
    "default.replication.factor": (1, MAX_BROKERS),
    "delay.topic.partitions": (1, MAX_PARTITION_REPLICAS),
    "delay.topic.replication.factor": (0, MAX_BROKERS),
    "minibroker.partition.replicas.max": (1, MAX_PARTITION_REPLICAS),
}
#: every Kafka-named setting in ms: at most MAX_MS, like every other time
MS_SETTINGS = frozenset(
    name
    for config in (BrokerConfig, ProducerConfig, ConsumerConfig)
    for name in config.kafka_names()
    if name.endswith(".ms")
)


def setting_problem(name: str, value: Any) -> str | None:
    """What is wrong with a whole-number setting beyond its type (the config classes check that)."""
    low, high = SETTING_LIMITS.get(name, (None, MAX_MS if name in MS_SETTINGS else None))
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if (low is None or value >= low) and (high is None or value <= high):
        return None
    if low is not None and high is not None:
        return f"expected a number from {low} to {high}, got {value}"
    return (
        f"expected a number >= {low}, got {value}"
        if low is not None
        else f"expected a number at most {high}, got {value}"
    )


def directory_problem(path: str) -> str | None:
    """What stops ``path`` from being a directory a run can write in (made if missing): a file at it
    or on the way to it, or no permission; None when there is nothing in the way.

    It tries: the missing directories are made, a temporary file is written in the last one, and
    what it made is removed again.
    """
    target = Path(path)
    missing = []
    existing = target
    while not existing.exists() and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == target else f" on the way to {path!r}"
        return f"{str(existing)!r} is a file{where}; expected a directory"
    made: list[Path] = []
    try:
        for directory in reversed(missing):
            directory.mkdir()
            made.append(directory)
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as error:
        return f"cannot write in {path!r}: {error.strerror or error}; expected a writable directory"
    finally:
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                directory.rmdir()
    return None
