"""The server-side assignors of KIP-848: ``uniform`` (balanced, sticky) and ``range`` (contiguous ranges)."""

from __future__ import annotations

import pytest

from minibroker.coordinator.group import range_assignor, uniform_assignor


def _counts(result):
    return sorted(len(parts) for parts in result.values())


@pytest.mark.parametrize(("members", "partitions"), [(1, 4), (3, 10), (4, 4), (5, 3), (7, 100)])
def test_uniform_gives_every_partition_once_and_counts_within_one(members, partitions):
    subscriptions = {f"m{i}": {"t"} for i in range(members)}
    result = uniform_assignor.assign(subscriptions, {"t": partitions}, {})
    owned = [tp for parts in result.values() for tp in parts]
    assert sorted(owned) == [("t", p) for p in range(partitions)]
    assert max(_counts(result)) - min(_counts(result)) <= 1


def test_uniform_moves_only_what_balance_needs_when_a_member_joins_or_leaves():
    subscriptions = {f"m{i}": {"t"} for i in range(3)}
    before = uniform_assignor.assign(subscriptions, {"t": 12}, {})
    joined = uniform_assignor.assign({**subscriptions, "m3": {"t"}}, {"t": 12}, before)
    moved = sum(len(before[m] - joined[m]) for m in before)
    assert (moved, _counts(joined)) == (3, [3, 3, 3, 3])  # 4 each to 3 each: one from each old member
    assert all(joined[m] <= before[m] for m in before)
    left = uniform_assignor.assign({m: {"t"} for m in ("m0", "m1", "m3")}, {"t": 12}, joined)
    assert all(joined[m] <= left[m] for m in ("m0", "m1", "m3"))  # the survivors keep theirs
    assert _counts(left) == [4, 4, 4]


def test_uniform_with_different_subscriptions_gives_each_topic_only_to_its_subscribers():
    subscriptions = {"a": {"t", "u"}, "b": {"t"}, "c": {"u"}}
    result = uniform_assignor.assign(subscriptions, {"t": 4, "u": 2}, {})
    assert {tp[0] for tp in result["b"]} <= {"t"} and {tp[0] for tp in result["c"]} <= {"u"}
    assert sorted(tp for parts in result.values() for tp in parts) == [
        *(("t", p) for p in range(4)),
        *(("u", p) for p in range(2)),
    ]
    assert _counts(result) == [2, 2, 2]


def test_range_gives_each_subscriber_a_contiguous_range_per_topic_in_member_id_order():
    subscriptions = {"b": {"t", "u"}, "a": {"t", "u"}, "c": {"t"}}
    result = range_assignor.assign(subscriptions, {"t": 7, "u": 3}, {})
    assert result == {
        "a": {("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)},
        "b": {("t", 3), ("t", 4), ("u", 2)},
        "c": {("t", 5), ("t", 6)},
    }
