"""Links to the controller: a broker cut off from it misses leadership until the link heals."""

from __future__ import annotations

from minibroker.scenario import parse_scenario, run_scenario

# Broker 0 leads t-0 (replicas 0, 1, 2). Broker 1 loses its link to the controller at 100; broker 0
# crashes at 200 and the controller elects broker 1 (epoch 1) at once, but the LeaderAndIsr is lost on
# the dropped link: a produce sent to broker 1 at 300 is answered NOT_LEADER_OR_FOLLOWER. When the link
# heals at 500 broker 1 catches up with the states it missed and leads from exactly 500.
SCENARIO = """\
[scenario]
name = "controller_link"
end_ms = 1000

[cluster]
brokers = 3
crash_detection_ms = 0

[[topics]]
name = "t"
partitions = 1
replication_factor = 3

[[clients]]
id = "p"
type = "producer"
config = { acks = "all", "request.timeout.ms" = 1000 }

[[steps]]
at = 300
action = "produce"
client = "p"
topic = "t"
id = "while-cut-off"

[[steps]]
at = 100
action = "drop"
between = [1, "controller"]

[[steps]]
at = 200
action = "crash"
broker = 0

[[steps]]
at = 500
action = "heal"
between = [1, "controller"]

[[expect]]
partition = "t-0"
at = 300
leader = 1
epoch = 1

[[expect]]
event = { kind = "leader", broker = 1, partition = "t-0", epoch = 1 }
count = 1

[[expect]]
event = { kind = "leader", broker = 1, partition = "t-0", epoch = 1, time_ms = 500 }

[[expect]]
request = "while-cut-off"
error = "NOT_LEADER_OR_FOLLOWER"
completed_at = 300
"""


def test_a_broker_cut_off_from_the_controller_leads_only_once_the_link_heals():
    result = run_scenario(parse_scenario(SCENARIO, "controller_link.toml"))
    assert [(r.where, r.passed) for r in result.results] == [
        ("expect[0]", True),
        ("expect[1]", True),
        ("expect[2]", True),
        ("expect[3]", True),
    ]


def test_a_later_heal_makes_broker_1_lead_later():
    text = SCENARIO.replace('at = 500\naction = "heal"', 'at = 900\naction = "heal"')
    result = run_scenario(parse_scenario(text, "controller_link.toml"))
    failed = [r.where for r in result.results if not r.passed]
    assert failed == ["expect[2]"]  # the leader event comes at 900, not 500
