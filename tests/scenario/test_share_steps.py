"""Share groups in scenarios: share_consumer clients, their steps and the share_partition expectation,
with one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.scenario import load_scenario, parse_scenario, run_scenario
from minibroker.scenario.model import SharePartitionState, ShareStep
from tests.scenario.test_load_errors import error_of

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

BASE = """\
[scenario]
end_ms = 3000

[cluster]
brokers = 1
config = { "offsets.topic.num.partitions" = 1, "share.coordinator.state.topic.num.partitions" = 1 }

[[topics]]
name = "t"
partitions = 1
replication_factor = 1

[[clients]]
id = "p"
type = "producer"

[[clients]]
id = "s"
type = "share_consumer"
config = { "group.id" = "sg" }
subscribe = ["t"]

[[steps]]
at = 0
action = "join"
client = "s"
"""


def test_share_steps_and_expectations_are_read():
    scenario = parse_scenario(
        BASE
        + '\n[[steps]]\nat = 5\naction = "acknowledge"\nclient = "s"\ntype = "REJECT"\noffsets = [3, 1]\n'
        + '\n[[steps]]\nat = 9\naction = "crash"\nclient = "s"\n'
        + '\n[[expect]]\nshare_partition = "t-0"\nshare_group = "sg"\nat = 10\nspso = 2\n'
        + 'states = { "2" = "Archived" }\ndelivery_counts = { "2" = 5 }\n',
        "x.toml",
    )
    assert scenario.clients[1].type == "share_consumer" and scenario.clients[1].subscribe == ("t",)
    assert scenario.steps[1] == ShareStep(5, 1, "acknowledge", "s", "REJECT", (1, 3), None)
    assert scenario.steps[2] == ShareStep(9, 2, "crash", "s")
    (expectation,) = scenario.expectations
    assert isinstance(expectation, SharePartitionState)
    assert (expectation.spso, expectation.states, expectation.delivery_counts) == (2, {2: "Archived"}, {2: 5})


@pytest.mark.parametrize(
    ("extra", "tail"),
    [
        (
            '[[steps]]\nat = 5\naction = "acknowledge"\nclient = "p"\ntype = "ACCEPT"\n',
            "steps[1].client: expected a share consumer: s; got 'p'",
        ),
        (
            '[[steps]]\nat = 5\naction = "acknowledge"\nclient = "s"\ntype = "DROP"\n',
            "steps[1].type: expected one of ACCEPT, RELEASE, REJECT, got 'DROP'",
        ),
        (
            '[[steps]]\nat = 5\naction = "acknowledge"\nclient = "s"\ntype = "ACCEPT"\noffsets = [-1]\n',
            "steps[1].offsets: expected a list of offsets >= 0 like [3], got [-1]",
        ),
        (
            '[[steps]]\nat = 5\naction = "acknowledge"\nclient = "s"\ntype = "ACCEPT"\npartition = "t-4"\n',
            "steps[1].partition: topic 't' has partitions 0..0, not 4",
        ),
        (
            '[[steps]]\nat = 5\naction = "leave"\nclient = "s"\n',
            "steps[1].action: a share consumer takes join, stall, acknowledge or crash, got leave",
        ),
        (
            '[[expect]]\nshare_partition = "t-0"\nshare_group = "g"\nat = 5\n',
            "expect[0].share_group: expected a share consumer's group.id: sg; got 'g'",
        ),
        (
            '[[expect]]\nshare_partition = "t-0"\nshare_group = "sg"\nat = 5\nstates = { "1" = "Gone" }\n',
            "expect[0].states.1: expected one of Available, Acquired, Acknowledged, Archived, got 'Gone'",
        ),
        (
            '[[expect]]\nshare_partition = "t-0"\nshare_group = "sg"\nat = 5\ndelivery_counts = { x = 1 }\n',
            "expect[0].delivery_counts.x: expected an offset like \"3\", got 'x'",
        ),
    ],
)
def test_bad_share_steps_and_expectations(extra, tail):
    message = error_of(BASE + "\n" + extra)
    assert message.startswith("x.toml:") and message.endswith(tail)


def test_a_share_consumer_needs_a_subscription():
    message = error_of(BASE.replace('subscribe = ["t"]\n', ""))
    assert message.endswith('clients[1].subscribe: a share consumer needs subscribe, like subscribe = ["t"]')


@pytest.mark.parametrize(
    "name", ["share_lock_expiry", "share_poison_archived", "share_fetch_wait", "share_leader_failover"]
)
def test_the_bundled_share_scenarios_hold(name):
    result = run_scenario(load_scenario(SCENARIOS / f"{name}.toml"))
    assert [r.where for r in result.results if not r.passed] == []
    assert len(result.results) >= 5
