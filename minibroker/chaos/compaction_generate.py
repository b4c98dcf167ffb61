"""A compacted topic in a chaos run: keyed produces and tombstones while the cleaner runs.

``add_compaction(schedule, rng, duration_ms)`` adds topic ``compacted`` (one partition,
``cleanup.policy=compact``) with segments that roll within a few hundred ms
(``segment.ms``, ``segment.bytes``), a low ``min.cleanable.dirty.ratio`` and a short
``delete.retention.ms``, and sets the brokers' ``log.cleaner.backoff.ms`` to 100-200 ms, so
cleanings and tombstone removals happen during the run's faults. Its produces (``COMPACTOR``,
acks=-1) write one record per key, drawn from a few keys, a fifth of them tombstones; three
more keys are written once and deleted (a tombstone) in the first half of the run.
Invariant 11 (``minibroker.chaos.compaction_checks``) checks what the cleaner keeps.
"""

from __future__ import annotations

import random

import attrs

from minibroker.chaos.schedule import COMPACTOR, ProduceSpec, Schedule
from minibroker.scenario.model import TopicSpecModel

#: the compacted topic's name and keys
COMPACTED = "compacted"
KEYS = tuple(f"k{i}" for i in range(6))
DELETED = ("d0", "d1", "d2")


def add_compaction(schedule: Schedule, rng: random.Random, duration_ms: int) -> Schedule:
    """``schedule`` with a compacted topic and its keyed produces (drawn from ``rng`` only)."""
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": str(rng.choice((100, 200, 300))),
        "segment.bytes": str(rng.choice((300, 600, 1000))),
        "min.cleanable.dirty.ratio": str(rng.choice((0.01, 0.1, 0.3))),
        "delete.retention.ms": str(rng.choice((100, 300, 1000))),
    }
    rf = rng.randint(1, min(3, schedule.brokers))
    topic = TopicSpecModel(COMPACTED, 1, rf, configs=configs)
    produces = []
    for i in range(rng.randint(20, 40) * duration_ms // 1000):
        keys = tuple(sorted(rng.sample(KEYS, rng.randint(1, 3))))
        produces.append(
            ProduceSpec(
                f"x{i}",
                rng.randint(1, max(1, duration_ms - 1)),
                COMPACTOR,
                COMPACTED,
                0,
                len(keys),
                10_000 + i,  # unused (keyed records); unique, as every produce's size is
                keys=keys,
                tombstone=rng.random() < 0.2,
            )
        )
    for i, key in enumerate(DELETED):  # written once, then deleted: their tombstones stay the latest
        written = rng.randint(1, max(1, duration_ms // 4))
        deleted = rng.randint(written + 1, max(written + 1, duration_ms // 2))
        for n, (at, tombstone) in enumerate(((written, False), (deleted, True))):
            produces.append(
                ProduceSpec(f"d{i}.{n}", at, COMPACTOR, COMPACTED, 0, 1, 9_000 + 2 * i + n, (key,), tombstone)
            )
    return attrs.evolve(
        schedule,
        config={**schedule.config, "log.cleaner.backoff.ms": rng.choice((100, 200))},
        produces=tuple(sorted((*schedule.produces, *produces), key=lambda s: (s.at, s.id))),
        compacted=topic,
    )
