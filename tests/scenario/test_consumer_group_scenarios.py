"""Consumer protocol (KIP-848) members in scenarios: ``group_protocol``, the group expectation's epochs
and targets, one clear line for bad input; the bundled scenarios hold with their exact times."""

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
group_protocol = "consumer"
config = { "group.id" = "g" }
subscribe = ["t"]
"""


def test_group_protocol_sets_the_consumer_config():
    scenario = parse_scenario(BASE, "x.toml")
    assert scenario.clients[0].config["group.protocol"] == "consumer"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\ngroup_protocol = "new"\n'
            'config = { "group.id" = "g" }\nsubscribe = ["t"]\n',
            "x.toml:18: clients[1].group_protocol: expected one of classic, consumer, got 'new'",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\ngroup_protocol = "consumer"\nassign = ["t-0"]\n',
            'x.toml:18: clients[1].group_protocol: expected subscribe = ["t"] beside it '
            "(a group member has one)",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\ngroup_protocol = "consumer"\n'
            'config = { "group.id" = "g", "group.protocol" = "classic" }\nsubscribe = ["t"]\n',
            "x.toml:18: clients[1].group_protocol: expected the config's group.protocol 'classic', "
            "got 'consumer'",
        ),
        (
            '[[clients]]\nid = "c2"\ntype = "consumer"\n'
            'config = { "group.id" = "g", "group.protocol" = "eager" }\nsubscribe = ["t"]\n',
            "x.toml:18: clients[1].config.group.protocol: expected one of classic, consumer, got 'eager'",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\nepochs = { c1 = "one" }\n',
            "x.toml:18: expect[0].epochs: expected member epochs like { c1 = 2 }, got {'c1': 'one'}",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\nepochs = { c9 = 1 }\n',
            "x.toml:18: expect[0].epochs.c9: expected a consumer that subscribes: c1; got 'c9'",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\ntarget = { c1 = ["t-7"] }\n',
            "x.toml:18: expect[0].target.c1: topic 't' has partitions 0..1, not 7",
        ),
        (
            '[[expect]]\ngroup = "g"\nat = 5\ngroup_epoch = "two"\n',
            "x.toml:18: expect[0].group_epoch: expected a whole number >= 0, got 'two'",
        ),
    ],
)
def test_bad_consumer_group_input(extra, message):
    assert error_of(BASE + "\n" + extra) == message


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("group_consumer_join", 7),
        ("group_consumer_session_timeout", 6),
        ("group_consumer_rebalance_timeout", 9),
        ("group_consumer_upgrade", 7),
    ],
)
def test_bundled_consumer_group_scenarios_hold_with_their_exact_times(name, count):
    result = run_scenario(load_scenario(f"scenarios/{name}.toml"))
    failed = [(r.where, r.expected, r.seen) for r in result.results if not r.passed]
    assert failed == []
    assert len(result.results) == count


def test_a_classic_group_fails_a_consumer_group_field():
    text = BASE.replace('group_protocol = "consumer"\n', "") + (
        '\n[[steps]]\nat = 0\naction = "join"\nclient = "c1"\n'
        '\n[[expect]]\ngroup = "g"\nat = 3000\nstate = "Stable"\ngroup_epoch = 1\n'
        "\n[scenario]\nend_ms = 3001\n"
    )
    result = run_scenario(parse_scenario(text, "x.toml"))
    [check] = result.results
    assert (check.passed, check.seen) == (False, "state Stable, group_epoch None")
