"""Chaos with a compacted topic: the ``compaction`` profile's schedules, invariant 11, and the planted
``tombstones-early`` and ``superseded-kept`` bugs caught."""

from __future__ import annotations

import hashlib

import attrs

from minibroker.chaos import run_index
from minibroker.chaos.generate import generate
from minibroker.chaos.profiles import profile
from minibroker.chaos.schedule import COMPACTOR, compile_schedule
from minibroker.chaos.toml_writer import scenario_toml
from minibroker.scenario import parse_scenario


def test_the_same_seed_gives_the_same_compacted_topic_and_keyed_produces():
    first = generate(profile("compaction"), 0, 1, 2000)
    assert first == generate(profile("compaction"), 0, 1, 2000)
    assert first.compacted is not None and first.compacted.name == "compacted"
    assert first.compacted.configs == {
        "cleanup.policy": "compact",
        "segment.ms": "300",
        "segment.bytes": "600",
        "min.cleanable.dirty.ratio": "0.3",
        "delete.retention.ms": "300",
    }
    assert first.config["log.cleaner.backoff.ms"] == 100
    keyed = [p for p in first.produces if p.producer == COMPACTOR]
    assert (len(keyed), sum(p.tombstone for p in keyed)) == (66, 14)
    assert all(p.keys for p in keyed)
    # the compacted topic is created but kept out of the probes and the reader
    assert "compacted" not in {t for t, _ in first.partitions()}
    scenario = compile_schedule(first)
    assert [t.name for t in scenario.topics][-1] == "compacted"
    loaded = parse_scenario(scenario_toml(scenario), "written.toml")
    assert attrs.evolve(loaded, path=scenario.path) == scenario


def test_the_other_profiles_schedules_are_unchanged():
    digest = hashlib.sha256()
    for name in ("default", "transactions", "acks1", "unclean", "consumer-protocol"):
        for index in range(3):
            schedule = generate(profile(name), 7, index, 2000)
            assert schedule.compacted is None
            digest.update(scenario_toml(compile_schedule(schedule)).encode())
    assert digest.hexdigest() == "1bd266e2a363175dbe5093325fa710e461560a32badc804bd1f434154a5feaea"


def test_a_compaction_run_cleans_during_faults_and_breaks_nothing():
    outcome = run_index("compaction", 0, 1, 2000)
    assert outcome.violations == []
    assert (outcome.row["cleanings"], outcome.row["faults"], outcome.row["events"]) == (8, 1, 4602)


def test_tombstones_removed_before_delete_retention_are_found():
    outcome = run_index("compaction", 0, 1, 2000, "tombstones-early")
    assert {v.invariant for v in outcome.violations} == {11}
    assert [v.line() for v in outcome.violations][:2] == [
        "invariant 11 compacted-0 offsets 35 at 700 ms: broker 0's cleaning removed the tombstone of key "
        "'k1' at 35 100 ms after the cleaning that first kept it (delete.retention.ms 300)",
        "invariant 11 compacted-0 offsets 39 at 900 ms: broker 0's cleaning removed the tombstone of key "
        "'d1' at 39 200 ms after the cleaning that first kept it (delete.retention.ms 300)",
    ]
    assert len(outcome.violations) == 4


def test_superseded_records_kept_below_the_checkpoint_are_found_live_and_at_the_end():
    outcome = run_index("compaction", 0, 1, 2000, "superseded-kept")
    assert [v.line() for v in outcome.violations] == [
        "invariant 11 compacted-0 offsets 1 and 4 at 300 ms: broker 0's cleaning (end 12) kept key 'k0' at 1 "
        "though 4 supersedes it",
        "invariant 11 compacted-0 offsets 1 and 4 at 4903 ms: leader 0 keeps key 'k0' at 1 below its cleaner "
        "checkpoint 85 though 4 supersedes it",
    ]
