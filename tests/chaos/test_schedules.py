"""Schedules: pure functions of their inputs, written as TOML that loads back equal and runs identically."""

from __future__ import annotations

import attrs
import pytest

from minibroker.chaos import PROFILES, compile_schedule, generate, run_index
from minibroker.chaos.schedule import PROBE, READER, FaultSpec
from minibroker.chaos.toml_writer import replay_scenario, scenario_toml
from minibroker.chaos.violations import Violation
from minibroker.scenario import parse_scenario, run_scenario
from minibroker.trace import ListSink


def test_generation_is_a_pure_function_of_profile_seed_index_and_duration():
    a = generate(PROFILES["default"], 7, 3, 1000)
    assert a == generate(PROFILES["default"], 7, 3, 1000)
    assert a != generate(PROFILES["default"], 7, 4, 1000)
    assert a != generate(PROFILES["default"], 8, 3, 1000)
    assert generate(PROFILES["unclean"], 7, 3, 1000).config["unclean.leader.election.enable"] is True
    assert a.config["unclean.leader.election.enable"] is False


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_generated_schedules_stay_in_their_ranges(profile):
    for index in range(30):
        s = generate(PROFILES[profile], 1, index, 1000)
        assert 3 <= s.brokers <= 5
        loop = 3 if s.transform is not None else 0  # the transform loop's ctp-in and ctp-out
        assert 1 <= len(s.partitions()) - loop <= 6
        assert all(1 <= t.replication_factor <= 3 for t in s.topics)
        assert 1 <= s.config["min.insync.replicas"] <= 3
        assert all(1 <= f.start <= f.end <= s.heal_ms for f in s.faults)
        assert len({p.bytes for p in s.produces}) == len(s.produces)  # a batch's size names its request


def test_written_toml_loads_back_to_an_equal_model_and_runs_identically():
    schedule = generate(PROFILES["default"], 5, 2, 600)
    scenario = compile_schedule(schedule)
    text = scenario_toml(scenario, ["a comment"])
    loaded = parse_scenario(text, "written.toml")
    assert attrs.evolve(loaded, path=scenario.path) == scenario
    first, second = ListSink(), ListSink()
    run_scenario(scenario, sinks=[first])
    run_scenario(loaded, sinks=[second])
    assert len(first) > 500
    assert list(first) == list(second)


def test_group_members_and_controller_links_round_trip_and_run_identically():
    # run 23 of seed 5 (600 ms): two members, a hang and a leave on them; plus a dropped controller link
    schedule = generate(PROFILES["default"], 5, 23, 600)
    assert [m.id for m in schedule.members] == ["m0", "m1"]
    assert {f.kind for f in schedule.faults if f.member} == {"leave", "hang"}
    cut = FaultSpec("drop", 100, 300, between=(0, "controller"))
    schedule = attrs.evolve(schedule, faults=(*schedule.faults, cut))
    scenario = compile_schedule(schedule)
    assert scenario.cluster.config["offsets.topic.num.partitions"] == 2
    loaded = parse_scenario(scenario_toml(scenario), "written.toml")
    assert attrs.evolve(loaded, path=scenario.path) == scenario
    first, second = ListSink(), ListSink()
    run_scenario(scenario, sinks=[first])
    run_scenario(loaded, sinks=[second])
    assert sum(e["kind"] == "group.commit" for e in first) > 5
    assert list(first) == list(second)


def test_replay_additions_round_trip_too():
    schedule = generate(PROFILES["default"], 5, 2, 600)
    read = Violation(
        2,
        "t0-0",
        "1..2",
        5,
        "lost",
        {"kind": "read", "partition": "t0-0", "offset": 1, "count": 2, "bytes": 105, "op": "w5"},
    )
    pinned = Violation(
        4,
        "t0-0",
        "",
        5,
        "hw",
        {"kind": "event", "count": 0, "fields": {"kind": "hw", "broker": 1, "time_ms": 5}},
    )
    scenario = replay_scenario(schedule, [read, pinned])
    assert attrs.evolve(parse_scenario(scenario_toml(scenario), "x.toml"), path=scenario.path) == scenario
    assert [c.id for c in scenario.clients][-3:] == [PROBE, READER, "check-0"]
    assert scenario.clients[-1].assign == (("t0", 0, 1),)


def test_a_run_is_deterministic():
    a = run_index("default", 3, 1, 600)
    b = run_index("default", 3, 1, 600)
    strip = {"wall_ms", "cpu_ms"}
    assert {k: v for k, v in a.row.items() if k not in strip} == {
        k: v for k, v in b.row.items() if k not in strip
    }
    assert a.row["events"] > 500
    assert a.violations == b.violations == []
