"""Scenario steps for link faults: client-broker links, one-way drops (``from``/``to``), fencing.

Exact virtual times: a request lost on a dropped link is answered REQUEST_TIMED_OUT by its client at
request.timeout.ms + minibroker.response.grace.ms (1000 + 1000 here) after it was sent.
"""

from __future__ import annotations

import pytest

from minibroker.scenario import ScenarioError, parse_scenario, run_scenario

BASE = """\
topics = [{{ name = "t", partitions = 1, replication_factor = 3 }}]
clients = [{{ id = "p", type = "producer", config = {{ acks = "all", "request.timeout.ms" = 1000 }} }}]
steps = [
  {{ at = 200, action = "produce", client = "p", topic = "t", id = "cut-off" }},
  {{ at = 3000, action = "produce", client = "p", topic = "t", id = "healed" }},{faults}
]

[scenario]
name = "links"
end_ms = {end_ms}

[cluster]
brokers = 3
"""
#: the produce sent at 200 across the dropped link, and the one sent at 3000 after the heal at 2500
TIMED_OUT_THEN_HEALED = """
[[expect]]
request = "cut-off"
error = "REQUEST_TIMED_OUT"
completed_at = 2200

[[expect]]
request = "healed"
error = "NONE"
completed_at = 3000
"""


def outcome(faults: str, expectations: str, end_ms: int = 5000) -> list[bool]:
    scenario = parse_scenario(BASE.format(end_ms=end_ms, faults=faults) + expectations, "links.toml")
    return [r.passed for r in run_scenario(scenario).results]


def step(at: int, action: str, **keys: str) -> str:
    """One more inline step table (values are TOML)."""
    fields = "".join(f", {key} = {value}" for key, value in keys.items())
    return f"\n  {{ at = {at}, action = {action!r}{fields} }},"


def test_a_client_cut_off_from_the_leader_times_out_and_succeeds_after_the_heal():
    faults = step(100, "drop", between='["p", 0]') + step(2500, "heal", between='["p", 0]')
    expectations = (
        TIMED_OUT_THEN_HEALED
        + """
[[expect]]
partition = "t-0"
at = 2200
leo = 0
"""
    )
    assert outcome(faults, expectations) == [True, True, True]


def test_a_one_way_drop_of_the_answers_leaves_the_record_written_but_unacknowledged():
    faults = step(100, "drop", **{"from": "0", "to": '"p"'}) + step(
        2500, "heal", **{"from": "0", "to": '"p"'}
    )
    expectations = (
        TIMED_OUT_THEN_HEALED
        + """
[[expect]]
partition = "t-0"
at = 200
leo = 1
hw = 1

[[expect]]
event = { kind = "fault", fault = "drop", src = "0", dst = "p", one_way = true, time_ms = 100 }
count = 1
"""
    )
    assert outcome(faults, expectations) == [True, True, True, True]


def test_a_one_way_drop_of_a_brokers_heartbeats_fences_it_at_the_session_timeout():
    faults = step(5000, "drop", **{"from": "1", "to": '"controller"'})
    expectations = """
[[expect]]
event = { kind = "controller.broker", broker = 1, state = "fenced", time_ms = 13000 }
count = 1

[[expect]]
partition = "t-0"
at = 13000
leader = 0
isr = [0, 2]
"""
    assert outcome(faults, expectations, end_ms=14000) == [True, True]


def test_a_one_way_drop_of_the_controllers_messages_fences_nobody():
    faults = step(5000, "drop", **{"from": '"controller"', "to": "0"})
    expectations = """
[[expect]]
count = "events"
event = { kind = "controller.broker" }
equals = 0
"""
    assert outcome(faults, expectations, end_ms=30000) == [True]


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ({"from": "0"}, "steps[2].to: expected to beside from: a one-way link"),
        ({"to": "0"}, "steps[2].from: expected from beside to: a one-way link"),
        (
            {"from": "0", "to": "1", "between": "[0, 1]"},
            "steps[2].between: expected either between = [a, b] (both ways) or from and to (one way)",
        ),
        (
            {"from": "1", "to": "1"},
            "steps[2].to: expected a node other than from (1): a node has no link to itself",
        ),
        (
            {"from": "0", "to": '"q"'},
            "steps[2].to: expected a broker id 0..2, a client id or \"controller\", got 'q'",
        ),
    ],
)
def test_a_one_way_step_names_what_is_wrong(keys, error):
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(BASE.format(end_ms=100, faults=step(50, "drop", **keys)), "links.toml")
    assert str(raised.value).endswith(error), str(raised.value)
