"""ACLs on the share-group APIs over a raw socket, with Kafka's checks and codes: READ on the group for
ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and AlterShareGroupOffsets, DELETE for
DeleteShareGroupOffsets, DESCRIBE for ShareGroupDescribe and DescribeShareGroupOffsets
(GROUP_AUTHORIZATION_FAILED, 30); READ (DESCRIBE for the heartbeat's subscription and the offsets
describe) on each topic (TOPIC_AUTHORIZATION_FAILED, 29)."""

from __future__ import annotations

from minibroker.server import authorizer as a
from minibroker.server import share_messages as w
from minibroker.server.authorizer import AclBinding
from minibroker.server.metadata import topic_id
from tests.server.conftest import RawClient, scenario
from tests.server.test_share_group_offsets import ShareClient, fetch_request

TOPIC_DENIED, GROUP_DENIED, GROUP_ID_NOT_FOUND = 29, 30, 69
CONFIG = '"authorizer.class.name" = "minibroker", "allow.everyone.if.no.acl.found" = true'
TOPICS = 'name = "t"\npartitions = 1\n\n[[topics]]\nname = "u"\npartitions = 1'
AckTopic = w.ShareAcknowledgeRequest.AcknowledgeTopic
AckPartition = AckTopic.AcknowledgePartition


def _deny(resource: int, name: str, operation: int) -> AclBinding:
    return AclBinding(resource, name, a.LITERAL, a.ANONYMOUS, "*", operation, a.DENY)


def _heartbeat(raw: RawClient, group: str, member: str, epoch: int, topics=("t",)) -> tuple[int, int]:
    request = w.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=list(topics)
    )
    answer = raw.request(request, w.ShareGroupHeartbeatResponse, 1)
    return answer.error_code, answer.member_epoch


def _fetch(raw: RawClient, group: str, epoch: int, acks: dict[str, list] | None = None) -> tuple:
    """ShareFetch of t-0 and u-0 (``acks``: topic -> (first, last, type)); the top-level error and each
    partition's (topic, error, acknowledge error)."""
    acks = acks or {}
    request = fetch_request(group, "m1", epoch, {name: acks.get(name, []) for name in ("t", "u")})
    answer = raw.request(request, w.ShareFetchResponse, 1)
    names = {topic_id(n): n for n in ("t", "u")}
    return answer.error_code, sorted(
        (names[t.topic_id], p.error_code, p.acknowledge_error_code)
        for t in answer.responses
        for p in t.partitions
    )


def _acknowledge(raw: RawClient, group: str, epoch: int) -> tuple:
    request = w.ShareAcknowledgeRequest(
        group_id=group,
        member_id="m1",
        share_session_epoch=epoch,
        topics=[
            AckTopic(
                topic_id=topic_id("u"),
                partitions=[
                    AckPartition(
                        partition_index=0,
                        acknowledgement_batches=[
                            AckPartition.AcknowledgementBatch(
                                first_offset=0, last_offset=0, acknowledge_types=[1]
                            )
                        ],
                    )
                ],
            )
        ],
    )
    answer = raw.request(request, w.ShareAcknowledgeResponse, 1)
    return answer.error_code, [
        (t.topic_id == topic_id("u"), p.error_code) for t in answer.responses for p in t.partitions
    ]


def _describe(raw: RawClient, groups: list[str]) -> list[tuple]:
    request = w.ShareGroupDescribeRequest(group_ids=groups, include_authorized_operations=False)
    answer = raw.request(request, w.ShareGroupDescribeResponse, 1)
    return [(g.group_id, g.error_code, [m.member_id for m in g.members]) for g in answer.groups]


def test_share_apis_check_group_and_topic_acls(serve):
    server = serve(scenario(brokers=1, config=CONFIG, topics=TOPICS))
    server.call(server.cluster.ensure_offsets_topic)
    server.wait_for(lambda: server.cluster.coordinator_for("sg") == 0, "the group's coordinator")
    state = server.served.server.state
    for binding in (
        _deny(a.GROUP, "locked", a.READ),
        _deny(a.GROUP, "hidden", a.DESCRIBE),
        _deny(a.GROUP, "keep", a.DELETE),
        _deny(a.TOPIC, "u", a.READ),
        _deny(a.TOPIC, "u", a.DESCRIBE),
    ):
        server.call(state.authorizer.create, binding)
    raw = RawClient(server.port(0))
    share = ShareClient(raw)
    try:
        # whole requests: READ (DELETE) on the group, DESCRIBE on each subscribed topic
        assert _heartbeat(raw, "locked", "m1", 0) == (GROUP_DENIED, 0)
        assert _heartbeat(raw, "sg", "m1", 0, ("t", "u")) == (TOPIC_DENIED, 0)
        assert _fetch(raw, "locked", 0) == (GROUP_DENIED, [])
        assert _acknowledge(raw, "locked", 1) == (GROUP_DENIED, [])
        assert share.alter("locked", {("t", 0): 0}) == [("t", 0, GROUP_DENIED)]
        assert share.delete("keep", ["t"]) == (GROUP_DENIED, [])
        # AlterShareGroupOffsets: u-0 refused by its topic, t-0 passed on (sg does not exist yet)
        assert share.alter("sg", {("t", 0): 0, ("u", 0): 0}) == [
            ("t", 0, GROUP_ID_NOT_FOUND),
            ("u", 0, TOPIC_DENIED),
        ]

        assert _heartbeat(raw, "sg", "m1", 0) == (0, 1)
        # per partition: u-0 answered TOPIC_AUTHORIZATION_FAILED (its acknowledgements too), t-0 served
        assert _fetch(raw, "sg", 0) == (0, [("t", 0, 0), ("u", TOPIC_DENIED, 0)])
        assert _fetch(raw, "sg", 1, {"u": [(0, 0, 1)]}) == (
            0,
            [("t", 0, 0), ("u", TOPIC_DENIED, TOPIC_DENIED)],
        )
        assert _acknowledge(raw, "sg", 2) == (0, [(True, TOPIC_DENIED)])
        assert _describe(raw, ["sg", "hidden"]) == [("sg", 0, ["m1"]), ("hidden", GROUP_DENIED, [])]
        assert share.describe("hidden") == (GROUP_DENIED, [])
        assert share.describe("sg", [("t", [0]), ("u", [0])]) == (
            0,
            [("t", 0, -1, 0), ("u", 0, -1, TOPIC_DENIED)],
        )

        assert _fetch(raw, "sg", -1)[0] == 0  # the session closes
        assert _heartbeat(raw, "sg", "m1", -1) == (0, -1)
        assert share.delete("sg", ["t", "u"]) == (0, [("t", 0, 0), ("u", -1, TOPIC_DENIED)])
    finally:
        raw.close()
