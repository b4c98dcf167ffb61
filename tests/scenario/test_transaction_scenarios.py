"""The bundled transaction scenarios: every expectation holds, at the times their comments work out."""

from __future__ import annotations

from pathlib import Path

from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace import ListSink

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _run(name: str):
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    result = run_scenario(scenario)
    failed = [f"{r.where}: expected {r.expected}; seen {r.seen}" for r in result.results if not r.passed]
    assert not failed, failed
    return result


def _done(result, name: str) -> tuple[int | None, dict[str, str]]:
    (request,) = result.named[name]
    return request.completed_ms, request.errors


def test_end_txn_waits_for_the_prepare_commit_write_to_reach_the_hw():
    result = _run("txn_end_txn_waits_for_isr")
    # every __transaction_state write: 2 x 40 ms to the follower on broker 2 and back
    assert _done(result, "init") == (1080, {"tx": "NONE"})
    assert _done(result, "send") == (1280, {"t-0": "NONE"})
    assert _done(result, "commit") == (1580, {"tx": "NONE"})
    assert _done(result, "read") == (1580, {"t-0": "NONE"})


def test_a_read_committed_consumer_stalls_until_the_timeout_check_aborts_the_crashed_producers_transaction():
    result = _run("txn_read_committed_stalled")
    rounds = result.named["reader"]
    # every round before 19700 expired empty after fetch.max.wait.ms; round 39 ended with the abort
    stalled = [r for r in rounds if r.completed_ms is not None and r.completed_ms < 20000]
    assert len(stalled) == 38 and all(r.cause == "expiry" and not any(r.records.values()) for r in stalled)
    (aborted,) = [r for r in rounds if r.id == "reader#39"]
    assert (aborted.created_ms, aborted.completed_ms, aborted.records) == (19700, 20000, {"t-0": 2})


def test_a_zombie_is_fenced_by_a_new_init_of_its_transactional_id():
    result = _run("txn_zombie_fenced")
    assert _done(result, "successor-init") == (1120, {"tx": "NONE"})
    assert _done(result, "zombie-send-2") == (1500, {"t-0": "INVALID_PRODUCER_EPOCH"})
    assert _done(result, "zombie-commit") == (1600, {"tx": "INVALID_PRODUCER_EPOCH"})
    assert _done(result, "zombie-abort") == (1700, {"tx": "PRODUCER_FENCED"})
    (read,) = result.named["read"]
    assert read.records == {"t-0": 3}  # the successor's records; the zombie's aborted 2 and 2 markers are not


def test_a_new_coordinator_reloads_a_prepare_commit_and_completes_its_markers():
    result = _run("txn_coordinator_failover")
    assert _done(result, "commit") == (1960, {"tx": "NONE"})
    (read,) = result.named["read"]
    assert (read.completed_ms, read.records) == (1890, {"t-0": 3})


def test_a_late_send_hangs_the_lso_without_verification_and_is_refused_with_it():
    result = _run("txn_hanging_transaction")
    # each send reaches broker 1 5000 ms after it left, 3500 ms after its transaction's ABORT marker
    assert _done(result, "late-0") == (2000, {"t-0": "REQUEST_TIMED_OUT"})
    assert _done(result, "abort-0") == (2500, {"tx": "NONE"})
    assert _done(result, "late-1") == (22000, {"t-1": "REQUEST_TIMED_OUT"})
    assert _done(result, "abort-1") == (22500, {"tx": "NONE"})
    (read,) = result.named["read"]
    # t-0 holds at LSO 1 (the late write's open transaction); t-1 hands over the plain record
    assert (read.completed_ms, read.records) == (29000, {"t-0": 0, "t-1": 1})


def test_with_transaction_version_2_the_leader_adds_the_partition_and_end_txn_bumps_the_epoch(tmp_path):
    text = (SCENARIOS / "txn_end_txn_waits_for_isr.toml").read_text()
    tv2 = text.replace(
        'transactional_id = "tx"\n',
        'transactional_id = "tx"\nconfig = { "minibroker.transaction.version" = 2 }\n',
    )
    assert tv2 != text
    (tmp_path / "tv2.toml").write_text(tv2)
    sink = ListSink()
    result = run_scenario(load_scenario(tmp_path / "tv2.toml"), sinks=[sink])
    assert all(r.passed for r in result.results)
    # the same times: broker 1 (0 ms from the coordinator) adds t-0, whose Ongoing write takes 80 ms
    assert _done(result, "send") == (1280, {"t-0": "NONE"})
    assert _done(result, "commit") == (1580, {"tx": "NONE"})
    assert [(e["time_ms"], e["broker"], e["add"]) for e in sink.of_kind("txn.verify")] == [(1200, 1, True)]
    assert [e["epoch"] for e in sink.of_kind("txn.state")] == [
        0,
        0,
        1,
        1,
    ]  # Empty, Ongoing, Prepare, Complete
    assert not [e for e in sink.of_kind("client.txn.retry")]
