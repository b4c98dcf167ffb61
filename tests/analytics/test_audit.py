"""The exactly-once audit: planted problems are found, excused operations are not flagged."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from minibroker.cli import main
from minibroker.trace import JsonlSink
from tests.analytics import reference
from tests.analytics.conftest import write_trace


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, events: list[dict]) -> None:
    path.write_text("".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in events))


def _is(event: dict, kind: str, op: str = "stuck") -> bool:
    return event["kind"] == kind and event["op"] == op


def synthetic(path: Path) -> None:
    """Hand-made events: a lost op, excused ops (crash, waiting, cancelled), an orphan, timer fires."""
    sink = JsonlSink(path)
    events = [
        (
            0,
            "op.create",
            {"broker": 0, "purgatory": "Produce", "op": "lost-1", "keys": ["t-0"], "delay_ms": 100},
        ),
        (
            0,
            "op.create",
            {"broker": 1, "purgatory": "Produce", "op": "crashed-1", "keys": ["t-0"], "delay_ms": 100},
        ),
        (
            0,
            "op.create",
            {"broker": 0, "purgatory": "Fetch", "op": "cancelled-1", "keys": ["t-1"], "delay_ms": 100},
        ),
        (
            0,
            "op.create",
            {"broker": 0, "purgatory": "Fetch", "op": "b2-replica-fetch-7", "keys": ["t-0"], "delay_ms": 100},
        ),
        (
            0,
            "op.create",
            {"broker": 0, "purgatory": "Produce", "op": "early-1", "keys": ["t-0"], "delay_ms": 100},
        ),
        (
            10,
            "op.cancel",
            {"broker": 0, "purgatory": "Fetch", "keys": ["t-1"], "count": 1, "ops": ["cancelled-1"]},
        ),
        (50, "fault", {"broker": 1, "fault": "crash"}),
        (95, "timer.fire", {"broker": 0, "op": "early-1", "expiration": 100}),
        (95, "op.complete", {"broker": 0, "purgatory": "Produce", "op": "early-1", "cause": "expiry"}),
        (95, "op.expire", {"broker": 0, "purgatory": "Produce", "op": "early-1"}),
        (103, "timer.fire", {"broker": 0, "op": "b2-replica-fetch-7", "expiration": 100}),
        (
            103,
            "op.complete",
            {"broker": 0, "purgatory": "Fetch", "op": "b2-replica-fetch-7", "cause": "expiry"},
        ),
        (103, "op.expire", {"broker": 0, "purgatory": "Fetch", "op": "b2-replica-fetch-7"}),
        (200, "op.complete", {"broker": 0, "purgatory": "Produce", "op": "orphan-1", "cause": "condition"}),
        (
            400,
            "op.create",
            {"broker": 0, "purgatory": "Produce", "op": "waiting-1", "keys": ["t-0"], "delay_ms": 1000},
        ),
        (500, "hw", {"broker": 0, "partition": "t-0", "hw": 3, "previous": 0, "leo": 3}),
    ]
    for seq, (time_ms, kind, fields) in enumerate(events):
        sink({"seq": seq, "time_ms": time_ms, "kind": kind, **fields})
    sink.close()


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("planted")
    clean = write_trace("follower_paused_timeout", directory / "clean.jsonl")
    events = _lines(clean)
    after = len(events)
    complete = next(e for e in events if _is(e, "op.complete"))
    expire = next(e for e in events if _is(e, "op.expire"))
    _write(directory / "dup_complete.jsonl", [*events, {**complete, "seq": after}])
    _write(directory / "expire_without_complete.jsonl", [e for e in events if not _is(e, "op.complete")])
    _write(directory / "double_expire.jsonl", [*events, {**expire, "seq": after}])
    _write(directory / "expiry_without_expiration.jsonl", [e for e in events if not _is(e, "op.expire")])
    synthetic(directory / "synthetic.jsonl")
    return directory


@pytest.fixture(scope="module")
def audited(spark, planted, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit-out")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["analyze", str(planted / "*.jsonl"), "--out", str(out)])
    return code, out, buffer.getvalue()


def test_planted_problems_are_listed_and_nothing_else(audited, planted):
    code, out, text = audited
    assert code == 1
    found = {
        (Path(row["trace"]).stem, row["op"], row["problem"], row["status"])
        for row in pq.read_table(out / "audit.parquet").to_pylist()
    }
    assert found == {
        ("dup_complete", "stuck", "completed 2+ times", "completed"),
        ("expire_without_complete", "stuck", "completed 0 times", "lost"),
        ("expire_without_complete", "stuck", "on_expiration without on_complete", "lost"),
        ("double_expire", "stuck", "on_expiration 2+ times", "completed"),
        ("expiry_without_expiration", "stuck", "expiry without on_expiration", "completed"),
        ("synthetic", "lost-1", "completed 0 times", "lost"),
        ("synthetic", "orphan-1", "no op.create", "completed"),
    }
    assert "exactly-once audit: 7 problem(s)" in text
    assert "completed 2+ times: 1" in text


def test_every_table_of_the_planted_run_equals_the_plain_python_computation(audited, planted):
    _, out, _ = audited
    expected = reference.analyze(sorted(planted.glob("*.jsonl")), 1000)
    for name, rows in expected.items():
        assert pq.read_table(out / f"{name}.parquet").to_pylist() == rows, name
    synthetic_statuses = {
        row["op_kind"]: row for row in expected["operations"] if row["purgatory"] == "Produce"
    }["produce"]
    assert (synthetic_statuses["crashed"], synthetic_statuses["waiting"], synthetic_statuses["lost"]) == (
        1,
        1,
        2,
    )
    cancelled = sum(row["cancelled"] for row in expected["operations"])
    assert cancelled == 1
    fires = [(row["delta_ms"], row["fires"]) for row in expected["timer_precision"]]
    assert fires == [(-5, 1), (0, 5 * 4), (3, 1)]  # four fires in each of the five real traces
