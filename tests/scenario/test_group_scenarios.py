"""Consumer groups in scenarios: bad input gives one clear line; the bundled group scenarios hold."""

from __future__ import annotations

import pytest

from minibroker.scenario import load_scenario, parse_scenario
from minibroker.scenario.run import run_scenario
from tests.scenario.test_load_errors import error_of

BASE = """\
[cluster]
brokers = 1

[[topics]]
name = "t"
partitions = 2

[[clients]]
id = "c1"
type = "consumer"
config = { "group.id" = "g" }
subscribe = ["t"]

[[clients]]
id = "plain"
type = "consumer"
assign = ["t-0"]
"""


def test_base_is_valid():
    scenario = parse_scenario(BASE, "x.toml")
    assert [c.subscribe for c in scenario.clients] == [("t",), ()]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\nsubscribe = ["t"]\n',
            "x.toml:22: clients[2].subscribe: expected a group.id in config to subscribe",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\nconfig = { "group.id" = "g" }\nsubscribe = ["u"]\n',
            "x.toml:23: clients[2].subscribe[0]: unknown topic 'u'; expected one of: t",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\nconfig = { "group.id" = "g" }\nassign = ["t-0"]\n'
            'subscribe = ["t"]\n',
            "x.toml:24: clients[2].subscribe: expected either assign or subscribe, not both",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\nconfig = { "group.id" = 5 }\n',
            "x.toml:20: clients[2].config.group.id: expected a string, got 5",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\n'
            'config = { "partition.assignment.strategy" = "sticky" }\n',
            "x.toml:22: clients[2].config.partition.assignment.strategy: expected one of range, roundrobin, "
            "got 'sticky'",
        ),
        (
            '[[steps]]\nat = 5\naction = "join"\nclient = "plain"\n',
            "x.toml:22: steps[0].client: expected a consumer that subscribes: c1; got 'plain'",
        ),
        (
            '[[steps]]\nat = 5\naction = "stall"\nclient = "c1"\nduration_ms = -1\n',
            "x.toml:23: steps[0].duration_ms: expected a whole number of ms >= 0, got -1",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\nstate = "Rebalancing"\n',
            "x.toml:22: expect[0].state: expected one of Empty, PreparingRebalance, CompletingRebalance, "
            "Stable, Dead, Assigning, Reconciling, got 'Rebalancing'",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\nmembers = ["plain"]\n',
            "x.toml:22: expect[0].members: expected a consumer that subscribes: c1; got 'plain'",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\nassignment = { c1 = ["t-9"] }\n',
            "x.toml:22: expect[0].assignment.c1: topic 't' has partitions 0..1, not 9",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\ncommitted = { "t-0" = "five" }\n',
            "x.toml:22: expect[0].committed: expected a table like",
        ),
    ],
)
def test_bad_group_input(extra, message):
    assert error_of(BASE + "\n" + extra).startswith(message)


@pytest.mark.parametrize(
    "name",
    [
        "group_initial_rebalance_delay",
        "group_session_timeout",
        "group_stalled_member",
        "group_coordinator_failover",
    ],
)
def test_bundled_group_scenarios_hold_with_their_exact_times(name):
    result = run_scenario(load_scenario(f"scenarios/{name}.toml"))
    failed = [(r.where, r.expected, r.seen) for r in result.results if not r.passed]
    assert failed == []
    assert len(result.results) >= 6


def test_member_expectation_errors():
    assert error_of(BASE + '\n[[expect]]\nmember = "plain"\nerrors = []\n').startswith(
        "x.toml:20: expect[0].member: expected a consumer that subscribes: c1; got 'plain'"
    )
    assert error_of(BASE + '\n[[expect]]\nmember = "c1"\nerrors = ["oops"]\n').startswith(
        'x.toml:21: expect[0].errors: expected a list of Kafka error names like ["MEMBER_ID_REQUIRED"]'
    )
    assert error_of(BASE + '\n[[expect]]\nmember = "c1"\nerrors = []\napi = "Fetch"\n').startswith(
        "x.toml:22: expect[0].api: expected one of JoinGroup, SyncGroup, Heartbeat, OffsetCommit, "
        "OffsetFetch, LeaveGroup, ConsumerGroupHeartbeat, got 'Fetch'"
    )
