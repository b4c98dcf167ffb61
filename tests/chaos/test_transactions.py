"""Chaos with transactions: the ``transactions`` profile's schedules, invariant 8, and the planted
``lso-unheld`` bug caught, shrunk and replayed."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from minibroker.chaos import run_index
from minibroker.chaos.distribute import RunSummary
from minibroker.chaos.failures import replay_fails, write_shrunk
from minibroker.chaos.generate import generate
from minibroker.chaos.profiles import profile
from minibroker.chaos.schedule import RC_READER, compile_schedule
from minibroker.chaos.toml_writer import scenario_toml
from minibroker.chaos.txn_schedule import transaction_bound
from minibroker.scenario import parse_scenario
from minibroker.scenario.model import TransactionStep


def test_the_same_seed_gives_the_same_transactional_schedule():
    first = generate(profile("transactions"), 0, 3, 1000)
    again = generate(profile("transactions"), 0, 3, 1000)
    assert first == again and compile_schedule(first) == compile_schedule(again)
    # x0 inits, aborts, commits, crashes mid-transaction; its successor x0g1 inits (fencing it)
    assert [(t.client, t.ending) for t in first.txns] == [
        ("x0", "init"),
        ("x0", "abort"),
        ("x0", "commit"),
        ("x0", "crash"),
        ("x0g1", "init"),
    ]
    assert first.transform is not None and len(first.transform.cycles) == 4
    assert any(c.id == RC_READER for c in compile_schedule(first).clients)
    # the other profiles draw no transactions: their schedules are what they were
    plain = generate(profile("default"), 0, 3, 1000)
    assert plain.txns == () and plain.transform is None and not plain.transactional


def test_a_transactional_schedule_round_trips_through_toml():
    schedule = generate(profile("transactions"), 0, 3, 1000)
    scenario = compile_schedule(schedule)
    loaded = parse_scenario(scenario_toml(scenario), "written.toml")
    assert attrs.evolve(loaded, path=scenario.path) == scenario
    assert sum(isinstance(step, TransactionStep) for step in loaded.steps) == 13
    for index in range(20):  # every send of a transaction comes before its end: the loader takes them all
        parse_scenario(
            scenario_toml(compile_schedule(generate(profile("transactions"), 0, index, 500))), "w.toml"
        )


def test_the_transaction_bound_adds_its_parts():
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 250, "request.timeout.ms": 500}
    producers = [
        {
            "max.block.ms": 1000,
            "request.timeout.ms": 200,
            "minibroker.response.grace.ms": 200,
            "transaction.timeout.ms": 400,
        },
        {
            "max.block.ms": 500,
            "request.timeout.ms": 500,
            "minibroker.response.grace.ms": 200,
            "transaction.timeout.ms": 800,
        },
    ]
    # settled 1000 + start 1400 + timeout 800 + 2 x 250 + 3 x 500 + marker backoff 100 + 4 x 5 + 100
    assert transaction_bound(config, producers, 5, 1000) == 5420
    assert transaction_bound(config, [], 5, 1000) == 0


def test_transactional_runs_keep_every_invariant():
    outcome = run_index("transactions", 0, 3, 1000)
    assert outcome.violations == [] and outcome.expected == []
    assert (outcome.row["txns"], outcome.row["transform_commits"]) == (3, 1)


def test_the_transactions_v2_profile_runs_every_transactional_producer_on_protocol_version_2():
    schedule = generate(profile("transactions-v2"), 0, 3, 1000)
    versions = {c.id: c.config.get("minibroker.transaction.version") for c in schedule.producers}
    # the transactional producer x0 speaks version 2, the plain ones (acks=-1 load, the loop's source) none
    assert {c for c, v in versions.items() if v is not None} == {"x0"} and versions["x0"] == 2
    assert schedule.transform is not None
    assert schedule.transform.producer["minibroker.transaction.version"] == 2
    # version 1 writes no key: the transactions profile's schedules are what they were
    assert all(
        "minibroker.transaction.version" not in c.config
        for c in generate(profile("transactions"), 0, 3, 1000).producers
    )
    outcome = run_index("transactions-v2", 0, 3, 1000)
    assert outcome.violations == [] and outcome.expected == []
    assert (outcome.row["txns"], outcome.row["transform_commits"]) == (3, 3)


#: (profile, seed, index) of 2,000 ms runs that once broke invariant 8: a commit after a send whose
#: AddPartitionsToTxn timed out (nothing committed, NONE reported), a commit after a timed-out
#: TxnOffsetCommit (outputs without offsets), sends after a timed-out commit joining it, (1912)
#: the LSO rule's walk of a log missing a COMMIT marker replicated where a truncated batch had been;
#: and invariant 6 (1032): an AlterPartition answered after its timeout left the leader's ISR view
#: stale for good (the leader now sends it again, and learns the committed ISR)
FOUND_RUNS = (
    ("transactions", 0, 90),
    ("transactions", 0, 188),
    ("transactions", 7, 303),
    ("transactions-v2", 7, 144),
    ("transactions", 0, 1912),
    ("transactions-v2", 0, 1032),
)


@pytest.mark.parametrize(("profile_name", "seed", "index"), FOUND_RUNS)
def test_a_run_that_once_broke_exactly_once_holds_every_invariant(profile_name, seed, index):
    outcome = run_index(profile_name, seed, index, 2000)
    assert [v.line() for v in outcome.violations] == []
    assert outcome.row["txns"] > 0


def test_an_lso_not_held_by_an_open_transaction_is_caught_and_shrunk(tmp_path):
    outcome = run_index("transactions", 0, 3, 1000, plant="lso-unheld")
    assert {v.invariant for v in outcome.violations} == {8}
    target = next(v for v in outcome.violations if v.partition == "t0-0")
    assert target.line() == (
        "invariant 8 t0-0 offsets LSO 12 at 203 ms: the LSO 14 on broker 0 is past 12, the first offset "
        "of a transaction still open in its log (HW 14)"
    )
    summary = RunSummary(3, outcome.row, tuple(outcome.violations), tuple(outcome.expected))
    shrunk = write_shrunk("transactions", 0, summary, target, 1000, tmp_path, budget=40, plant="lso-unheld")
    assert shrunk.replay_fails and shrunk.faults == 0 and shrunk.produces == 0
    text = Path(shrunk.path).read_text()
    assert 'action = "send"' in text and "lso = 0" in text
    assert replay_fails(Path(shrunk.path), "lso-unheld")
    assert not replay_fails(Path(shrunk.path))  # without the planted bug the file passes
