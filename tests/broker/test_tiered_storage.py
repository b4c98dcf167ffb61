"""Tiered storage (KIP-405): copies to the remote tier, local retention, DelayedRemoteFetch and
DelayedRemoteListOffsets, on a manual clock with the broker's timer advanced by hand.

Every test uses the same timeline (``tiered``): broker 0 leads t-0 alone; segments roll at 30 bytes
(three 10-byte batches); the copy task runs at 0 and every 1000 ms after a run ends, each copy
taking 50 ms; local retention is checked every 500 ms with ``local.retention.bytes`` 10.

- 100: ten batches of one record (offsets 0..9): segments [0-2] [3-5] [6-8] and the active [9];
- 1000: the copy task copies [0-2] (done 1050), [3-5] (1100), [6-8] (1150);
- 1500: retention: 100 bytes held, 30 + 30 + 30 may go (100 - 90 = 10 >= 10): local log start 9;
- 1600: the tests start their requests; a remote read takes 200 ms (done at 1800).
"""

from __future__ import annotations

import re

import pytest

from minibroker.broker.topic_configs import TopicConfigError, check_remote_storage, local_retention
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsRequest,
)
from tests.broker.conftest import TP, Harness

TOPIC = {"remote.storage.enable": "true", "segment.bytes": "30", "local.retention.bytes": "10"}


def tiered(read_latency: int = 200, fault: str = "none", later: dict | None = None, **settings) -> Harness:
    """The timeline above, then at 1600 the broker settings in ``later`` (a tier turning slow or failing)."""
    h = Harness(
        **{
            "remote.log.storage.system.enable": True,
            "remote.log.manager.task.interval.ms": 1000,
            "log.retention.check.interval.ms": 500,
            "minibroker.remote.storage.copy.latency.ms": 50,
            "minibroker.remote.storage.read.latency.ms": read_latency,
            "minibroker.remote.storage.fault": fault,
            **settings,
        }
    )
    h.rm.topic_overrides = lambda topic: dict(TOPIC)
    h.rm.remote_log_manager.start()
    h.lead(replicas=(0,))
    h.advance(100)
    for _ in range(10):
        h.produce(count=1, acks=1)
    for now in (500, 1000, 1050, 1100, 1150, 1500, 1600):
        h.advance(now)
    if later:
        h.rm.config = h.rm.config.with_kafka(later)
    return h


def answered_at(h: Harness, box: list, purgatory, at: int):
    """Nothing at ``at - 1`` with one operation parked in ``purgatory``; the one answer at ``at``."""
    h.advance(at - 1)
    assert box == []
    assert purgatory.num_delayed() == 1
    h.advance(at)
    (response,) = box
    return response


def list_offsets(h: Harness, timestamp: int) -> list:
    box: list = []
    h.rm.list_offsets(ListOffsetsRequest({TP: timestamp}, request_id=f"l{timestamp}"), box.append)
    return box


def test_closed_segments_are_copied_one_after_the_other_and_deleted_locally_past_local_retention():
    h = tiered()
    log = h.rm.partitions[TP].log
    copies = [(e["time_ms"], e["start"], e["end"]) for e in h.events.of_kind("remote.copy")]
    assert copies == [(1050, 0, 2), (1100, 3, 5), (1150, 6, 8)]
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (0, 9, 10)
    assert log.highest_offset_in_remote_storage == 8
    assert [e["offset"] for e in h.events.of_kind("local_log_start")] == [3, 6, 9]


def test_a_fetch_below_the_local_log_start_waits_exactly_the_read_latency():
    h = tiered(read_latency=200)
    box = h.fetch(0, max_wait=10)
    response = answered_at(h, box, h.rm.remote_fetch_purgatory, 1800)
    part = response.partitions[TP]
    assert (part.error, response.cause) == (Errors.NONE, "condition")
    assert [b.base_offset for b in part.batches] == [0, 1, 2]  # one remote segment per read
    assert (part.high_watermark, part.log_start_offset) == (10, 0)
    h.advance(2100)  # past remote.fetch.max.wait.ms: completed once, not again
    assert len(box) == 1
    assert h.rm.remote_fetch_purgatory.expirations == 0


def test_a_slow_tier_expires_the_fetch_at_remote_fetch_max_wait_with_no_records():
    h = tiered(
        read_latency=200,
        later={"minibroker.remote.storage.fault": "slow", "minibroker.remote.storage.slow.ms": 400},
    )
    box = h.fetch(0)
    response = answered_at(h, box, h.rm.remote_fetch_purgatory, 2100)  # 1600 + remote.fetch.max.wait.ms
    assert (response.partitions[TP].error, response.cause, response.partitions[TP].batches) == (
        Errors.NONE,
        "expiry",
        (),
    )
    h.advance(2200)  # the read ends at 1600 + 200 + 400; its result is dropped
    assert len(box) == 1
    assert [e["time_ms"] for e in h.events.of_kind("remote.read")] == [2200]
    assert h.rm.remote_fetch_purgatory.expires_by_key == {TP: 1}


def test_a_failing_tier_answers_unknown_server_error_after_the_read_latency():
    h = tiered(read_latency=200, later={"minibroker.remote.storage.fault": "failing"})
    box = h.fetch(3)
    h.advance(1800)
    (response,) = box
    assert (response.partitions[TP].error, response.cause) == (Errors.UNKNOWN_SERVER_ERROR, "condition")


def test_a_failing_tier_copies_nothing_and_keeps_every_local_segment():
    h = tiered(fault="failing")
    log = h.rm.partitions[TP].log
    assert [e["time_ms"] for e in h.events.of_kind("remote.copy.failed")] == [1050]
    assert (log.local_log_start_offset, log.highest_offset_in_remote_storage) == (0, -1)


def test_a_fetch_at_or_above_the_local_log_start_reads_locally_at_once():
    h = tiered()
    box = h.fetch(9)
    (response,) = box
    assert [b.base_offset for b in response.partitions[TP].batches] == [9]
    assert h.rm.remote_fetch_purgatory.num_delayed() == 0


def test_a_follower_below_the_local_log_start_is_told_offset_moved_to_tiered_storage():
    h = tiered()
    (response,) = h.fetch(0, replica=1)
    assert response.partitions[TP].error is Errors.OFFSET_MOVED_TO_TIERED_STORAGE


def test_list_offsets_earliest_local_and_latest_tiered_answer_from_the_tiers_at_once():
    h = tiered()
    answers = {}
    for ts in (-1, -2, -4, -5):
        part = list_offsets(h, ts)[0].partitions[TP]
        answers[ts] = (part.error, part.timestamp, part.offset, part.leader_epoch)
    assert answers == {
        LATEST_TIMESTAMP: (Errors.NONE, -1, 10, 0),
        EARLIEST_TIMESTAMP: (Errors.NONE, -1, 0, 0),
        EARLIEST_LOCAL_TIMESTAMP: (Errors.NONE, -1, 9, 0),
        LATEST_TIERED_TIMESTAMP: (Errors.NONE, -1, 8, 0),
    }


def test_a_timestamp_lookup_waits_in_remote_list_offsets_for_the_remote_metadata():
    h = tiered(read_latency=200)
    box = list_offsets(h, 100)
    response = answered_at(h, box, h.rm.remote_list_offsets_purgatory, 1800)
    part = response.partitions[TP]
    assert (part.error, part.timestamp, part.offset, part.leader_epoch, response.cause) == (
        Errors.NONE,
        100,
        0,
        0,
        "condition",
    )


def test_a_timestamp_lookup_times_out_with_request_timed_out():
    h = tiered(read_latency=200, **{"remote.list.offsets.request.timeout.ms": 150})
    box = list_offsets(h, 100)
    response = answered_at(h, box, h.rm.remote_list_offsets_purgatory, 1750)
    assert (response.partitions[TP].error, response.cause) == (Errors.REQUEST_TIMED_OUT, "expiry")
    h.advance(1800)
    assert len(box) == 1


def test_a_timestamp_lookup_on_a_failing_tier_answers_unknown_server_error():
    h = tiered(read_latency=200, later={"minibroker.remote.storage.fault": "failing"})
    box = list_offsets(h, 100)
    h.advance(1800)
    assert box[0].partitions[TP].error is Errors.UNKNOWN_SERVER_ERROR


def test_without_the_broker_switch_nothing_is_tiered():
    h = tiered(**{"remote.log.storage.system.enable": False})
    log = h.rm.partitions[TP].log
    assert (log.local_log_start_offset, log.highest_offset_in_remote_storage) == (0, -1)
    assert list_offsets(h, LATEST_TIERED_TIMESTAMP)[0].partitions[TP].offset == -1
    assert [p.name for p in h.rm.purgatories] == ["Produce", "Fetch", "DeleteRecords", "ElectLeader"]


@pytest.mark.parametrize(
    ("configs", "system", "problem"),
    [
        ({"remote.storage.enable": "true"}, False, "tiered storage is off on the brokers"),
        (
            {"remote.storage.enable": "true", "cleanup.policy": "delete,compact"},
            True,
            "remote storage supports only cleanup.policy=delete",
        ),
        (
            {"remote.storage.enable": "true", "local.retention.bytes": "200", "retention.bytes": "100"},
            True,
            "local.retention.bytes: 200 is more than retention.bytes (100)",
        ),
        ({"remote.storage.enable": "true", "local.retention.ms": "-1"}, True, "-1 (unlimited) is more than"),
    ],
)
def test_kafka_refuses_remote_storage_configs_it_cannot_honour(configs, system, problem):
    with pytest.raises(TopicConfigError, match=re.escape(problem)):
        check_remote_storage(configs, system)


def test_remote_storage_configs_kafka_accepts():
    check_remote_storage({"remote.storage.enable": "false", "cleanup.policy": "compact"}, False)
    check_remote_storage({"remote.storage.enable": "true", "local.retention.ms": "1000"}, True)
    assert local_retention({"retention.ms": "5000"}) == (5000, -1)
    assert local_retention({"local.retention.bytes": "0"}) == (604_800_000, 0)


def test_a_timestamp_past_the_remote_tier_is_found_in_the_local_log_and_none_answers_minus_one():
    h = tiered(read_latency=200)
    h.advance(1700)
    h.produce(count=1, acks=1)  # offset 10, appended at 1700
    later, never = list_offsets(h, 1650), list_offsets(h, 5000)
    h.advance(1900)
    found = later[0].partitions[TP]
    assert (found.error, found.timestamp, found.offset) == (Errors.NONE, 1700, 10)
    missing = never[0].partitions[TP]
    assert (missing.error, missing.timestamp, missing.offset) == (Errors.NONE, -1, -1)


def test_a_new_leader_copies_on_from_the_tiers_end_even_inside_one_of_its_segments():
    h = Harness(
        **{
            "remote.log.storage.system.enable": True,
            "remote.log.manager.task.interval.ms": 1000,
            "minibroker.remote.storage.copy.latency.ms": 50,
        }
    )
    h.rm.topic_overrides = lambda topic: dict(TOPIC)
    h.lead(replicas=(0,))
    h.advance(100)
    for _ in range(10):
        h.produce(count=1, acks=1)
    log = h.rm.partitions[TP].log
    # a previous leader, whose segments rolled elsewhere, copied offsets 0 and 1
    h.rm.remote_log_manager.storage.copy_log_segment(TP, tuple(log.batches()[:2]))
    for now in (1000, 1050, 1100, 1150):
        h.advance(now)
    copies = [(e["time_ms"], e["start"], e["end"]) for e in h.events.of_kind("remote.copy")]
    assert copies == [(1050, 2, 2), (1100, 3, 5), (1150, 6, 8)]
