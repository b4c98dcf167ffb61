"""tools/share_vs_retry.py: the poison-record workload through retry topics + DLT and through a share group,
with exact virtual-time figures (20 records, the poison one at offset 7, 5 deliveries, 1000 ms backoff)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("share_vs_retry", ROOT / "tools" / "share_vs_retry.py")
assert SPEC is not None and SPEC.loader is not None
share_vs_retry = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(share_vs_retry)

COMMON = {"done": 19, "handler_calls": 24, "duplicates": 0, "out_of_order": 12, "dead_or_archived": 1}


def _without_wall(row):
    return {k: v for k, v in row.items() if k != "wall_ms"}


def test_retry_topics_deliver_the_poison_record_to_the_dlt_after_four_backoffs():
    row = _without_wall(share_vs_retry.retry_row(20, 7, 5, 1000))
    assert row == {
        "design": "retry topics + DLT",
        **COMMON,
        "done_p50_ms": 0,
        "done_max_ms": 0,
        "poison_end_ms": 4000,  # 4 retries, 1000 ms apart
        "extra_records": 5,  # one record in each of orders-retry-1..4, one in orders-dlt
        "timer_tasks": 4,
    }


def test_a_share_group_archives_the_poison_record_at_once_at_its_fifth_delivery():
    row = _without_wall(share_vs_retry.share_row(20, 7, 5))
    assert row == {
        "design": "share group",
        **COMMON,
        "done_p50_ms": 0,
        "done_max_ms": 0,
        "poison_end_ms": 0,  # a RELEASEd record is handed out again by the next ShareFetch, at once
        "extra_records": 5,  # share-group state snapshots written to __share_group_state
        "timer_tasks": 5,  # one acquisition lock per acquisition
    }


def test_a_poison_offset_outside_the_records_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        share_vs_retry.main(["--records", "5", "--poison", "9"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["share_vs_retry.py: error: --poison must be an offset 0..4, got 9"]
