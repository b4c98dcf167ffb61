"""Transactions in scenarios: the steps and expectations of a transactional producer, their one-line
errors, and a run whose EndTxn, markers and READ_COMMITTED fetch happen at exact virtual times."""

from __future__ import annotations

import pytest

from minibroker.scenario import parse_scenario, run_scenario
from minibroker.scenario.model import PartitionState, TransactionState, TransactionStep
from tests.scenario.test_load_errors import error_of

BASE = """\
[scenario]
end_ms = 3000

[cluster]
brokers = 3
config = { "transaction.state.log.num.partitions" = 1 }

[[links]]
between = [0, 2]
latency_ms = 40

[[topics]]
name = "t"
partitions = 1
replication_factor = 1
assignment = [[1]]

[[clients]]
id = "p"
type = "producer"
transactional_id = "tx"
transaction_timeout_ms = 20000

[[clients]]
id = "c"
type = "consumer"
isolation_level = "read_committed"
assign = ["t-0"]

[[steps]]
at = 1000
action = "init"
client = "p"
id = "init"

[[steps]]
at = 1200
action = "begin"
client = "p"

[[steps]]
at = 1200
action = "send"
client = "p"
topic = "t"
records = 3
id = "send"

[[steps]]
at = 1400
action = "fetch"
client = "c"
id = "read"

[[steps]]
at = 1500
action = "commit"
client = "p"
id = "commit"
"""
LINES = BASE.count("\n")


def test_the_transactional_keys_become_kafka_settings_and_steps():
    scenario = parse_scenario(BASE, "x.toml")
    producer, consumer = scenario.clients
    assert producer.config == {"acks": -1, "transactional.id": "tx", "transaction.timeout.ms": 20000}
    assert consumer.config == {"isolation.level": "read_committed"}
    steps = [s for s in scenario.steps if isinstance(s, TransactionStep)]
    assert [(s.action, s.id) for s in steps] == [
        ("init", "init"),
        ("begin", None),
        ("send", "send"),
        ("commit", "commit"),
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[[steps]]\nat = 1600\naction = "send"\nclient = "p"\ntopic = "t"\n',
            "x.toml:{n}: steps[5]: send by 'p' at 1600 ms comes after a commit; "
            "expected it between its begin and its commit or abort",
        ),
        (
            '[[steps]]\nat = 1600\naction = "begin"\nclient = "c"\n',
            "x.toml:{n4}: steps[5].client: expected a transactional producer: p; got 'c'",
        ),
        (
            '[[steps]]\nat = 1600\naction = "crash"\nclient = "p"\n\n'
            '[[steps]]\nat = 1700\naction = "init"\nclient = "p"\n',
            "x.toml:{n6}: steps[6]: init by 'p' at 1700 ms comes after its crash; "
            "expected it before its begin (or after its commit or abort)",
        ),
        (
            '[[steps]]\nat = 1600\naction = "crash"\nclient = "p"\nbroker = 1\n',
            "x.toml:{n4}: steps[5].client: expected either broker (a broker crashes) or client "
            "(a producer does)",
        ),
        (
            '[[steps]]\nat = 1600\naction = "produce"\nclient = "p"\ntopic = "t"\n',
            "x.toml:{n4}: steps[5].client: producer 'p' is transactional; "
            "expected a send step inside begin and commit",
        ),
        (
            '[[steps]]\nat = 1300\naction = "send_offsets"\nclient = "p"\ngroup = "g"\n'
            'offsets = { "t-7" = 1 }\n',
            "x.toml:{n5}: steps[5].offsets.t-7: topic 't' has partitions 0..0, not 7",
        ),
        (
            '[[steps]]\nat = 1300\naction = "send_offsets"\nclient = "p"\ngroup = "g"\noffsets = 5\n',
            'x.toml:{n5}: steps[5].offsets: expected a table like {{ "t-0" = 5 }}, got 5',
        ),
        (
            '[[expect]]\ntransaction = "other"\nat = 5\n',
            "x.toml:{n2}: expect[0].transaction: expected the transactional_id of a producer: tx; "
            "got 'other'",
        ),
        (
            '[[expect]]\ntransaction = "tx"\nat = 5\nstate = "Done"\n',
            "x.toml:{n4}: expect[0].state: expected one of CompleteAbort, CompleteCommit, Empty, Ongoing, "
            "PrepareAbort, PrepareCommit, PrepareEpochFence, got 'Done'",
        ),
        (
            '[[expect]]\npartition = "t-0"\nat = 5\nlso = -2\n',
            "x.toml:{n4}: expect[0].lso: expected a whole number >= 0, got -2",
        ),
    ],
)
def test_bad_transaction_steps_and_expectations(extra, message):
    n = LINES + 2
    expected = message.format(n=n, n2=n + 1, n4=n + 3, n5=n + 5, n6=n + 5)
    assert error_of(BASE + "\n" + extra) == expected


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'transactional_id = "tx"\n',
            'config = { acks = 1 }\ntransactional_id = "tx"\n',
            "x.toml:21: clients[0].config.acks: a transactional producer needs acks = all, got 1",
        ),
        (
            'transactional_id = "tx"\n',
            "",
            "x.toml:21: clients[0].transaction_timeout_ms: expected a transactional_id beside it, "
            'like transactional_id = "tx"',
        ),
        (
            'isolation_level = "read_committed"',
            'isolation_level = "committed"',
            "x.toml:27: clients[1].isolation_level: expected one of read_uncommitted, read_committed, "
            "got 'committed'",
        ),
    ],
)
def test_bad_transactional_clients(old, new, message):
    assert error_of(BASE.replace(old, new, 1)) == message


def test_a_commit_waits_for_the_state_writes_to_reach_the_hw_and_read_committed_waits_for_the_marker():
    text = BASE + (
        '\n[[expect]]\nrequest = "init"\nerror = "NONE"\ncompleted_at = 1080\n'
        '\n[[expect]]\nrequest = "send"\nerror = "NONE"\ncompleted_at = 1280\n'
        '\n[[expect]]\nrequest = "commit"\nerror = "NONE"\ncompleted_at = 1580\n'
        '\n[[expect]]\nrequest = "read"\nrecords = 3\ncompleted_at = 1580\n'
        '\n[[expect]]\npartition = "t-0"\nat = 1300\nhw = 3\nlso = 0\n'
        '\n[[expect]]\ntransaction = "tx"\nat = 1579\nstate = "Ongoing"\npartitions = ["t-0"]\n'
        '\n[[expect]]\ntransaction = "tx"\nat = 1580\nstate = "PrepareCommit"\ncoordinator = 0\n'
        '\n[[expect]]\npartition = "t-0"\nat = 1580\nhw = 4\nlso = 4\n'
        '\n[[expect]]\ntransaction = "tx"\nat = 1660\nstate = "CompleteCommit"\nepoch = 0\npartitions = []\n'
    )
    scenario = parse_scenario(text, "x.toml")
    assert any(isinstance(e, TransactionState) for e in scenario.expectations)
    assert any(isinstance(e, PartitionState) and e.lso == 0 for e in scenario.expectations)
    result = run_scenario(scenario)
    failed = [f"{r.where}: expected {r.expected}; seen {r.seen}" for r in result.results if not r.passed]
    assert not failed, failed
    assert len(result.results) == 9


def test_send_offsets_commits_the_groups_offsets_at_the_commit_marker():
    text = BASE.replace(
        '"transaction.state.log.num.partitions" = 1 }',
        '"transaction.state.log.num.partitions" = 1, "offsets.topic.num.partitions" = 1 }',
    ) + (
        '\n[[steps]]\nat = 1300\naction = "send_offsets"\nclient = "p"\ngroup = "g"\n'
        'offsets = { "t-0" = 5 }\nid = "offsets"\n'
        '\n[[expect]]\nrequest = "offsets"\nerror = "NONE"\n'
        '\n[[expect]]\ngroup = "g"\nat = 1659\ncommitted = {}\n'
        '\n[[expect]]\ntransaction = "tx"\nat = 1579\nstate = "Ongoing"\n'
        'partitions = ["__consumer_offsets-0", "t-0"]\n'
        '\n[[expect]]\ngroup = "g"\nat = 1660\ncommitted = { "t-0" = 5 }\n'
    )
    result = run_scenario(parse_scenario(text, "x.toml"))
    failed = [f"{r.where}: expected {r.expected}; seen {r.seen}" for r in result.results if not r.passed]
    assert not failed, failed
    (offsets,) = result.named["offsets"]
    # AddOffsetsToTxn's write (80 ms: the follower on broker 2), then TxnOffsetCommit's on broker 0 (80 ms
    # too); the offset counts once the COMMIT marker sent at 1580 is on __consumer_offsets-0's HW: 1660
    assert (offsets.completed_ms, offsets.errors) == (1460, {"t-0": "NONE"})
