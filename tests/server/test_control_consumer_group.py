"""The control API's consumer protocol group actions (KIP-848): read a group's epochs and assignments,
fence a member; over HTTP (answers validated against docs/control-openapi.json) and on the
``minibroker.testing`` handle, with a confluent-kafka consumer (``group.protocol=consumer``)."""

from __future__ import annotations

import time

import pytest

from minibroker.server.control_http import ControlServer
from tests.server.test_control_http import Api

SESSION_MS = 3000
HEARTBEAT_MS = 300
CONFIG = {
    "offsets.topic.num.partitions": 1,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
}
WAIT_S = 20.0


@pytest.fixture
def cluster(minibroker_factory):
    return minibroker_factory(1, topics=["t:2:1"], config=CONFIG)


def _consumer(cluster, group: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )


def _poll_until(consumer, condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        consumer.poll(0.05)


def test_read_a_group_and_fence_its_member_over_http(cluster):
    server = ControlServer(log=lambda line: None).start(cluster)
    host, port = server.address
    api = Api(f"http://{host}:{port}")
    consumer = _consumer(cluster, "ops")
    try:
        consumer.subscribe(["t"])
        _poll_until(consumer, lambda: len(consumer.assignment()) == 2, "both partitions")
        group = api.get("consumer_group", "group_id=ops")
        [member] = group["members"]
        assert (group["state"], group["group_epoch"], group["assignment_epoch"], group["coordinator"]) == (
            "Stable",
            1,
            1,
            0,
        )
        assert (member["member_epoch"], member["assigned"], member["target"], member["state"]) == (
            1,
            ["t-0", "t-1"],
            ["t-0", "t-1"],
            "STABLE",
        )
        assert member["member_id"] == consumer.memberid()
        assert 0 < member["session_remaining_ms"] <= SESSION_MS and member["rebalance_remaining_ms"] is None

        assert api.post("fence_group_member", {"group_id": "ops", "member_id": member["member_id"]}) == (
            200,
            {"ok": True},
        )
        # removed at once (group epoch 2); its next heartbeat hears UNKNOWN_MEMBER_ID and it joins again
        _poll_until(
            consumer,
            lambda: [m["member_epoch"] for m in api.get("consumer_group", "group_id=ops")["members"]] == [3],
            "the member back at epoch 3",
        )
        again = api.get("consumer_group", "group_id=ops")
        assert (again["state"], again["group_epoch"], again["members"][0]["assigned"]) == (
            "Stable",
            3,
            ["t-0", "t-1"],
        )
        assert api.post("fence_group_member", {"group_id": "ops", "member_id": "nobody"}) == (
            400,
            {"error": "group 'ops': no member 'nobody'"},
        )
        assert api.call("GET", "/v1/consumer_group?group_id=none") == (
            400,
            {"error": "group 'none': no live coordinator holds a consumer protocol group of that id"},
        )
    finally:
        consumer.close()
        server.stop()


def test_the_testing_handle_reads_and_fences_and_refuses_bad_input_in_one_line(minibroker_factory):
    cluster = minibroker_factory(1, topics=["t:1:1"])
    with pytest.raises(ValueError) as raised:
        cluster.consumer_group("g")
    assert str(raised.value) == "group 'g': __consumer_offsets does not exist yet (no group has formed)"
    with pytest.raises(ValueError) as raised:
        cluster.fence_group_member("", "m")
    assert str(raised.value) == "group_id '': expected a non-empty string"
    with pytest.raises(ValueError) as raised:
        cluster.fence_group_member("g", 5)
    assert str(raised.value) == "member_id 5: expected a non-empty string"
