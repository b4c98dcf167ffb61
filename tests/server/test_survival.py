"""No request ends the server: a request that finds a bug is answered UNKNOWN_SERVER_ERROR; the rest go on.

Real clients on loopback against ``ServedThread`` servers (real time, every wait bounded).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
import trio
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceResponse
from kafka.structs import OffsetAndMetadata

from minibroker.server.handlers import HANDLERS
from minibroker.sim import open_cluster
from tests.server.conftest import WAIT_S, RawClient, scenario
from tests.server.test_purgatories import produce_request


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition of ``t`` -> offset) as a consumer with assigned partitions does."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("t", p) for p in offsets])
        consumer.commit({TopicPartition("t", p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def test_deleting_two_empty_groups_with_offsets_on_one_broker_answers_both(serve):
    # one broker, ISR of one: each group's tombstone write completes inside the request
    server = serve(scenario(brokers=1, topics='name = "t"\npartitions = 2'))
    for group in ("g1", "g2"):
        commit(server.bootstrap, group, {0: 5, 1: 6})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        deleted = admin.delete_groups(["g1", "g2", "nobody"])
        assert deleted == {"g1": "OK", "g2": "OK", "nobody": "GroupIdNotFoundError"}
        assert admin.delete_groups(["g2"]) == {"g2": "GroupIdNotFoundError"}
        assert admin.list_group_offsets("g1") == {"g1": {}}
    finally:
        admin.close()
    assert server.call(lambda: sorted(server.cluster.brokers[0].coordinator.groups)) == []
    assert server.logs == []


def metadata_ok(client: RawClient) -> bool:
    """A Metadata request on ``client`` is answered and lists topic ``t``."""
    response = client.request(MetadataRequest(topics=None), MetadataResponse, 12)
    return "t" in [t.name for t in response.topics]


def commit_of(client: RawClient, group: str) -> int:
    """``group``'s committed offset of t-0, read with OffsetFetch v8."""
    request = OffsetFetchRequest(
        groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)], require_stable=False
    )
    (answer,) = client.request(request, OffsetFetchResponse, 8).groups
    ((partition,),) = [t.partitions for t in answer.topics]
    return partition.committed_offset


def _boom(*args, **kwargs):
    raise RuntimeError("a bug")


def _only_log(server) -> str:
    (line,) = server.logs
    return line


def test_a_failing_handler_is_answered_unknown_server_error_and_the_connection_stays(serve, monkeypatch):
    server = serve(scenario(brokers=1, topics='name = "t"'))
    monkeypatch.setitem(HANDLERS, ListGroupsRequest.API_KEY, _boom)
    client = RawClient(server.port(0))
    try:
        for version in (0, 5):
            answer = client.request(
                ListGroupsRequest(states_filter=[], types_filter=[]), ListGroupsResponse, version
            )
            assert (answer.error_code, answer.groups) == (-1, [])
        line = server.logs[0]
        assert re.match(
            r"broker 0: 127\.0\.0\.1:\d+: ListGroups v0 correlation id 1: internal error, answered "
            r"UNKNOWN_SERVER_ERROR\nTraceback \(most recent call last\):\n",
            line,
        )
        assert line.endswith("RuntimeError: a bug") and "_boom" in line
        assert len(server.logs) == 2
        assert metadata_ok(client)  # the same connection goes on
    finally:
        client.close()


def test_a_failing_produce_handler_fails_every_partition_and_acks_0_closes(serve, monkeypatch):
    server = serve(scenario(brokers=1, topics='name = "t"'))
    monkeypatch.setitem(HANDLERS, 0, _boom)
    client = RawClient(server.port(0))
    try:
        answer = client.request(produce_request(-1, 1000, b"v"), ProduceResponse, 9)
        ((topic, part),) = [(t.name, p) for t in answer.responses for p in t.partition_responses]
        assert (topic, part.index, part.error_code, part.base_offset) == ("t", 0, -1, -1)
        client.send(produce_request(0, 1000, b"v"), 9)
        assert client.closed_by_server()  # acks=0: no answer to carry the error, as in Kafka
    finally:
        client.close()
    assert [line.split("\n", 1)[0].split(": ", 2)[2] for line in server.logs] == [
        "Produce v9 correlation id 1: internal error, answered UNKNOWN_SERVER_ERROR",
        "Produce v9 correlation id 2: internal error, no answer with acks=0; closing",
    ]


def test_an_exception_in_the_broker_fails_only_its_request(serve, monkeypatch):
    from minibroker.coordinator.group import GroupCoordinator

    server = serve(scenario(brokers=1, topics='name = "t"'))
    commit(server.bootstrap, "g", {0: 3})
    monkeypatch.setattr(GroupCoordinator, "describe", _boom)
    client = RawClient(server.port(0))
    try:
        answer = client.request(DescribeGroupsRequest(groups=["g", "h"]), DescribeGroupsResponse, 5)
        assert [(g.group_id, g.error_code) for g in answer.groups] == [("g", -1), ("h", -1)]
        line = _only_log(server)
        assert (
            line.startswith("broker 0: 127.0.0.1:")
            and "DescribeGroups v5 correlation id 1: internal error" in line
        )
        # one traceback: where the coordinator raised, on the scheduler, and where the handler re-raised it
        assert line.count("Traceback") == 1 and line.endswith("RuntimeError: a bug")
        assert "coordinator.py" in line and "group_admin.py" in line
        monkeypatch.undo()
        assert commit_of(client, "g") == 3
    finally:
        client.close()


def test_an_exception_in_a_timer_task_is_logged_and_the_cluster_goes_on(serve):
    from minibroker.timer import TimerTask

    server = serve(scenario(brokers=1, topics='name = "t"'))
    server.call(lambda: server.cluster.scheduler.call_later(0, _boom))
    server.call(lambda: server.cluster.brokers[0].replica_manager.timer.add(TimerTask(0, _boom)))
    server.wait_for(lambda: len(server.logs) == 2, "two contained errors")
    for line in server.logs:
        assert line.startswith("cluster: internal error (contained)\nTraceback") and line.endswith(
            "RuntimeError: a bug"
        )
    client = RawClient(server.port(0))
    try:
        assert metadata_ok(client)
    finally:
        client.close()


# --- what the request fuzz (test_request_fuzz.py) found ----------------------------------------------
def test_acks_0_produce_with_a_transactional_id_is_appended_without_an_answer(serve):
    server = serve(scenario(brokers=1, topics='name = "t"'))
    client = RawClient(server.port(0))
    try:
        request = produce_request(0, 1000, b"v")
        request.transactional_id = "tx"
        client.send(request, 9)
        # no answer (acks=0) and the connection stays: the next Produce lands after the first record
        answer = client.request(produce_request(-1, 1000, b"w"), ProduceResponse, 9)
        part = answer.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 1)
    finally:
        client.close()
    assert server.logs == []


def test_delete_topics_by_a_zero_or_unknown_topic_id(serve):
    server = serve(scenario(brokers=1, topics='name = "t"'))
    state = DeleteTopicsRequest.DeleteTopicState
    client = RawClient(server.port(0))
    try:
        unknown = uuid.UUID(int=5)
        request = DeleteTopicsRequest(
            topics=[state(name=None, topic_id=uuid.UUID(int=0)), state(name=None, topic_id=unknown)],
            timeout_ms=1000,
        )
        answer = client.request(request, DeleteTopicsResponse, 6)
        assert [(r.name, r.error_code, r.topic_id) for r in answer.responses] == [
            (None, 42, None),  # INVALID_REQUEST: neither a name nor an id (the zero id reads as null)
            (None, 100, unknown),  # UNKNOWN_TOPIC_ID
        ]
    finally:
        client.close()
    assert not any("internal error" in line for line in server.logs)


def test_a_member_naming_one_protocol_twice_joins_with_it(serve):
    server = serve(scenario(brokers=1, config='"group.initial.rebalance.delay.ms" = 0', topics='name = "t"'))
    client = RawClient(server.port(0))
    try:
        find = FindCoordinatorRequest(key="j", key_type=0)
        deadline = time.monotonic() + WAIT_S
        while client.request(find, FindCoordinatorResponse, 3).error_code != 0:  # creating __consumer_offsets
            assert time.monotonic() < deadline
            time.sleep(0.05)
        protocol = JoinGroupRequest.JoinGroupRequestProtocol
        join = JoinGroupRequest(
            group_id="j",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[protocol(name="range", metadata=b"first"), protocol(name="range", metadata=b"again")],
        )
        answer = client.request(join, JoinGroupResponse, 3)
        assert (answer.error_code, answer.protocol_name, answer.leader) == (0, "range", answer.member_id)
        assert [m.metadata for m in answer.members] == [b"first"]
    finally:
        client.close()
    assert not any("internal error" in line for line in server.logs)


# --- the cluster's side: Cluster.contain_errors ------------------------------------------------------
class _Echo:
    """A network endpoint that answers every request with its message, or raises on ``"bug"``."""

    def deliver(self, src, message, respond):
        if message == "bug":
            raise RuntimeError("a bug")
        respond(message)


async def test_a_bug_in_a_delivery_ends_an_emulation_unless_errors_are_contained(autojump_clock):
    with pytest.raises(BaseException) as ended:  # an emulation must not hide its bugs
        async with open_cluster(brokers=1) as cluster:
            cluster.network.register("echo", _Echo())
            await cluster.network.call("client", "echo", "bug", 1000)
    assert ended.group_contains(RuntimeError, match="a bug")

    reports: list[tuple[str, object]] = []
    async with open_cluster(brokers=1) as cluster:
        cluster.contain_errors(lambda error, requester: reports.append((str(error), requester)))
        network = cluster.network
        network.register("echo", _Echo())
        network.register("client", _Echo())  # a node answers reach only when registered
        failed = await network.call("client", "echo", "bug", 1000)
        assert (failed.error.name, str(failed.cause)) == ("UNKNOWN_SERVER_ERROR", "a bug")
        assert reports == [("a bug", "client")]
        network.request("client", "echo", "fine", 1000, _boom)  # the requester's own callback fails
        network.scheduler.call_later(5, _boom)
        await trio.sleep(0.01)
        assert reports[1:] == [("a bug", None), ("a bug", None)]
        assert await network.call("client", "echo", "fine", 1000) == "fine"
