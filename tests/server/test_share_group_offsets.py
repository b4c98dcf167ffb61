"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) over a raw
socket against ``minibroker serve``: exact error codes, the SPSO they read and move, and a leader holding the
share partition from before the alteration fenced at its next write and reading the new state."""

from __future__ import annotations

import pytest

from minibroker.server import share_messages as w
from minibroker.server.metadata import topic_id
from tests.server.conftest import WAIT_S, RawClient, scenario

CONFIG = '"group.share.record.lock.duration.ms" = 30000'
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 68, 69, 3

Describe = w.DescribeShareGroupOffsetsRequest
Alter = w.AlterShareGroupOffsetsRequest
Delete = w.DeleteShareGroupOffsetsRequest
FetchTopic = w.ShareFetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition


def fetch_request(
    group: str, member: str, epoch: int, acks: dict[str, list[tuple[int, int, int]]], wait_ms: int = 0
) -> w.ShareFetchRequest:
    """A ShareFetch of partition 0 of each topic of ``acks`` (topic -> its acknowledgements: first, last,
    type)."""
    return w.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=10,
        batch_size=10,
        topics=[
            FetchTopic(
                topic_id=topic_id(name),
                partitions=[
                    FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            FetchPartition.AcknowledgementBatch(
                                first_offset=f, last_offset=last, acknowledge_types=[t]
                            )
                            for f, last, t in batches
                        ],
                    )
                ],
            )
            for name, batches in acks.items()
        ],
        forgotten_topics_data=[],
    )


class ShareClient:
    def __init__(self, client: RawClient) -> None:
        self.client = client

    def heartbeat(self, member: str, epoch: int) -> None:
        request = w.ShareGroupHeartbeatRequest(
            group_id="sg", member_id=member, member_epoch=epoch, subscribed_topic_names=["t"]
        )
        assert self.client.request(request, w.ShareGroupHeartbeatResponse, 1).error_code == 0

    def fetch(
        self, member: str, epoch: int, acks: list[tuple[int, int, int]] = (), wait_ms: int = 0
    ) -> list[tuple]:
        """ShareFetch of t-0 (acks: first, last, type); the acquired runs (first, last, delivery count)."""
        request = fetch_request("sg", member, epoch, {"t": acks}, wait_ms)
        answer = self.client.request(request, w.ShareFetchResponse, 1)
        assert answer.error_code == 0
        return [
            (
                p.acknowledge_error_code,
                [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records],
            )
            for t in answer.responses
            for p in t.partitions
        ]

    def describe(self, group: str, topics=None) -> tuple[int, list[tuple]]:
        wanted = None
        if topics is not None:
            wanted = [
                Describe.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic(
                    topic_name=t, partitions=ps
                )
                for t, ps in topics
            ]
        request = Describe(
            groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=wanted)]
        )
        (answer,) = self.client.request(request, w.DescribeShareGroupOffsetsResponse, 0).groups
        return answer.error_code, [
            (t.topic_name, p.partition_index, p.start_offset, p.error_code)
            for t in answer.topics
            for p in t.partitions
        ]

    def alter(self, group: str, offsets: dict[tuple[str, int], int]) -> list[tuple]:
        topics: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                Alter.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=partition, start_offset=offset
                )
            )
        request = Alter(
            group_id=group,
            topics=[
                Alter.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                for t, ps in topics.items()
            ],
        )
        answer = self.client.request(request, w.AlterShareGroupOffsetsResponse, 0)
        return [
            (t.topic_name, p.partition_index, p.error_code) for t in answer.responses for p in t.partitions
        ]

    def delete(self, group: str, topics: list[str]) -> tuple[int, list[tuple]]:
        request = Delete(
            group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]
        )
        answer = self.client.request(request, w.DeleteShareGroupOffsetsResponse, 0)
        return answer.error_code, [
            (t.topic_name, p.partition_index, p.error_code) for t in answer.responses for p in t.partitions
        ]


def test_share_group_offsets_admin_over_a_raw_socket(serve):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    server = serve(scenario(brokers=1, config=CONFIG, topics='name = "t"\npartitions = 2'))
    server.call(server.cluster.ensure_offsets_topic)
    server.wait_for(lambda: server.cluster.coordinator_for("sg") == 0, "the group's coordinator")
    raw = RawClient(server.port(0))
    share = ShareClient(raw)
    try:
        assert share.describe("nope") == (GROUP_ID_NOT_FOUND, [])
        assert share.alter("nope", {("t", 0): 1}) == [("t", 0, GROUP_ID_NOT_FOUND)]
        assert share.delete("nope", ["t"]) == (GROUP_ID_NOT_FOUND, [])

        share.heartbeat("m1", 0)
        assert share.fetch("m1", 0) == [(0, [])]  # the window starts at the HW, 0
        producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
        for value in (b"a", b"b", b"c", b"d", b"e"):
            producer.produce("t", value=value, partition=0)
        assert producer.flush(WAIT_S) == 0
        assert share.fetch("m1", 1) == [(0, [(0, 4, 1)])]
        assert share.fetch("m1", 2, acks=[(0, 1, 1)]) == [(0, [])]  # ACCEPT 0-1: the SPSO moves to 2

        assert share.describe("sg") == (0, [("t", 0, 2, 0), ("t", 1, -1, 0)])
        assert share.describe("sg", [("t", [0, 7])]) == (
            0,
            [("t", 0, 2, 0), ("t", 7, -1, UNKNOWN_TOPIC_OR_PARTITION)],
        )
        assert share.alter("sg", {("t", 0): 4}) == [("t", 0, NON_EMPTY_GROUP)]
        assert share.delete("sg", ["t"]) == (NON_EMPTY_GROUP, [])

        assert share.fetch("m1", -1) == []  # the session closes: 2-4 are released
        share.heartbeat("m1", -1)
        assert share.alter("sg", {("t", 0): 4, ("t", 9): 0}) == [
            ("t", 0, 0),
            ("t", 9, UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert share.describe("sg", [("t", [0])]) == (0, [("t", 0, 4, 0)])

        # the leader still holds the share partition read before the alteration: it hands out 2-4 once more,
        # its write of their acknowledgement is fenced (FENCED_STATE_EPOCH), and the next fetch reads SPSO 4
        share.heartbeat("m2", 0)
        assert share.fetch("m2", 0) == [(0, [(2, 4, 2)])]
        assert share.fetch("m2", 1, acks=[(2, 4, 1)]) == [(124, [])]
        assert share.fetch("m2", 2, wait_ms=5000) == [(0, [(4, 4, 1)])]  # waits for the read

        assert share.fetch("m2", -1) == []
        share.heartbeat("m2", -1)
        assert share.delete("sg", ["t", "nope"]) == (
            0,
            [("nope", -1, UNKNOWN_TOPIC_OR_PARTITION), ("t", 0, 0), ("t", 1, 0)],
        )
        assert share.describe("sg") == (0, [])
        assert share.describe("sg", [("t", [0])]) == (0, [("t", 0, -1, 0)])
    finally:
        raw.close()
