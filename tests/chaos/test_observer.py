"""The live checker on hand-made trace events: each rule fires exactly when broken."""

from __future__ import annotations

from minibroker.chaos.observe import Observer


def ops(*events):
    observer = Observer()
    for seq, (kind, time_ms, fields) in enumerate(events):
        observer(
            {
                "seq": seq,
                "time_ms": time_ms,
                "kind": kind,
                "broker": 0,
                "purgatory": "Fetch",
                "op": "f1",
                **fields,
            }
        )
    return observer.violations


def test_a_clean_expiry_and_a_clean_completion_pass():
    assert (
        ops(
            ("op.create", 10, {"delay_ms": 50}),
            ("op.complete", 60, {"cause": "expiry"}),
            ("op.expire", 60, {}),
        )
        == []
    )
    assert ops(("op.create", 10, {"delay_ms": 50}), ("op.complete", 60, {"cause": "condition"})) == []


def test_completing_twice_is_invariant_1():
    (violation,) = ops(
        ("op.create", 10, {"delay_ms": 50}),
        ("op.complete", 20, {"cause": "condition"}),
        ("op.complete", 30, {"cause": "condition"}),
    )
    assert violation.invariant == 1 and violation.time_ms == 30
    assert "completed twice (first at 20 ms)" in violation.message
    assert violation.evidence["fields"] == {
        "kind": "op.complete",
        "broker": 0,
        "purgatory": "Fetch",
        "op": "f1",
    }


def test_expiring_off_the_deadline_is_invariant_1():
    (violation,) = ops(("op.create", 10, {"delay_ms": 50}), ("op.complete", 61, {"cause": "expiry"}))
    assert violation.invariant == 1
    assert "expired at 61 ms, not at its deadline 60 ms" in violation.message


def test_completing_after_the_deadline_is_invariant_1():
    (violation,) = ops(("op.create", 10, {"delay_ms": 50}), ("op.complete", 61, {"cause": "condition"}))
    assert "after its deadline 60 ms" in violation.message


def test_expiration_without_an_expiry_completion_is_invariant_1():
    (violation,) = ops(
        ("op.create", 10, {"delay_ms": 50}),
        ("op.complete", 30, {"cause": "condition"}),
        ("op.expire", 60, {}),
    )
    assert violation.invariant == 1 and violation.time_ms == 60
    assert "on_expiration without completing by expiry first" in violation.message
