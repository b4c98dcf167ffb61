"""The simple assignor: every partition assigned, shared when members outnumber partitions."""

from minibroker.coordinator.share.simple_assignor import assign


def test_more_members_than_partitions_share_them():
    result = assign({"a": ("t",), "b": ("t",), "c": ("t",)}, lambda topic: 2)
    assert result == {"a": {"t": (0,)}, "b": {"t": (1,)}, "c": {"t": (0,)}}


def test_fewer_members_than_partitions_split_them():
    result = assign({"b": ("t",), "a": ("t", "u")}, {"t": 3, "u": 1}.get)
    assert result == {"a": {"t": (0, 2), "u": (0,)}, "b": {"t": (1,)}}
