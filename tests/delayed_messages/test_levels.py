"""Delay levels, the header contract's records and the settings: exact values and exact errors."""

from __future__ import annotations

import pytest

from minibroker.broker.config import ConfigError
from minibroker.delayed_messages import DEFAULT_LEVELS, DelayConfig, DelayError, DelayLevels
from minibroker.delayed_messages.headers import (
    DUE_MS,
    MESSAGE_ID,
    REAL_PARTITION,
    REAL_TOPIC,
    DelayedMessage,
    build_batch,
    decode_delayed,
    encode_delayed,
    encode_forward,
    murmur2,
    records,
)
from minibroker.delayed_messages.levels import format_duration, parse_duration

LEVELS = DelayLevels.parse(DEFAULT_LEVELS)


def test_default_levels_are_the_seeds_twelve():
    assert LEVELS.delays_ms == (
        5_000,
        10_000,
        30_000,
        60_000,
        120_000,
        300_000,
        600_000,
        1_200_000,
        1_800_000,
        2_700_000,
        3_600_000,
        7_200_000,
    )
    assert LEVELS.topics()[:4] == ["__delay_5s", "__delay_10s", "__delay_30s", "__delay_1m"]
    assert LEVELS.topics()[-2:] == ["__delay_1h", "__delay_2h"]


@pytest.mark.parametrize(
    ("delay", "level"),
    [(1, 5_000), (5_000, 5_000), (5_001, 10_000), (17_000, 30_000), (30_000, 30_000), (7_200_000, 7_200_000)],
)
def test_a_delay_rounds_up_to_the_smallest_level_at_least_as_long(delay, level):
    assert LEVELS.level_for(delay) == level


def test_delays_outside_the_levels_are_refused():
    with pytest.raises(DelayError, match=r"delay_ms: 7200001 is longer than the largest level \(2h\)"):
        LEVELS.level_for(7_200_001)
    with pytest.raises(DelayError, match="delay_ms: expected at least 1, got 0"):
        LEVELS.level_for(0)


def test_durations_parse_and_print_canonically():
    assert [parse_duration(t) for t in ("500ms", "5s", "1m", "2h")] == [500, 5_000, 60_000, 7_200_000]
    assert [format_duration(ms) for ms in (500, 5_000, 60_000, 90_000, 7_200_000)] == [
        "500ms",
        "5s",
        "1m",
        "90s",
        "2h",
    ]
    assert DelayLevels.parse("60s, 2m").topics() == ["__delay_1m", "__delay_2m"]
    assert LEVELS.level_of_topic("__delay_45m") == 2_700_000
    assert LEVELS.level_of_topic("orders") is None


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([], "delay.levels: expected at least one level like 5s"),
        (["5s", "5s"], r"delay.levels\[1\]: levels must increase, '5s' follows '5s'"),
        (["1m", "30s"], r"delay.levels\[1\]: levels must increase, '30s' follows '1m'"),
        (["5 sec"], r"delay.levels\[0\]: expected a positive duration like 500ms, 5s, 1m or 2h, got '5 sec'"),
        (["0s"], r"delay.levels\[0\]: expected a positive duration"),
    ],
)
def test_bad_level_lists_name_the_place(names, message):
    with pytest.raises(DelayError, match=message):
        DelayLevels.parse(names)


def test_settings_by_name_and_their_errors():
    config = DelayConfig.from_kafka(
        {"delay.levels": ["1s", "1m"], "delay.service.max.held.per.partition": 3, "delay.topic.partitions": 2}
    )
    assert (config.levels.delays_ms, config.max_held_per_partition, config.topic_partitions) == (
        (1_000, 60_000),
        3,
        2,
    )
    assert config.to_kafka()["delay.levels"] == ["1s", "1m"]
    assert config.with_kafka({"delay.service.poll.ms": 7}).poll_ms == 7
    assert DelayConfig().replication_factor(2) == 2
    with pytest.raises(ConfigError, match=r"delay_service: unknown setting 'delay\.level'"):
        DelayConfig.from_kafka({"delay.level": ["5s"]})
    with pytest.raises(ConfigError, match=r"delay_service.delay.levels: expected a list of durations"):
        DelayConfig.from_kafka({"delay.levels": 5})
    with pytest.raises(ConfigError, match=r"max\.in\.flight: expected a number >= 1, got 0"):
        DelayConfig.from_kafka({"delay.service.max.in.flight": 0})
    with pytest.raises(ConfigError, match=r"replication\.factor: 3 is more than the cluster's 2 brokers"):
        DelayConfig.from_kafka({"delay.topic.replication.factor": 3}).replication_factor(2)


def test_level_records_carry_the_contract_and_decode_back():
    message = DelayedMessage("m-1", "orders", 2, 35_000, 5_000, b"k", b"v", (("app", b"x"),))
    raw = encode_delayed([message, DelayedMessage("m-2", "orders", None, 36_000, 6_000)])
    (record, _) = list(records(raw))
    assert record.headers == [
        (REAL_TOPIC, b"orders"),
        (DUE_MS, b"35000"),
        (REAL_PARTITION, b"2"),
        (MESSAGE_ID, b"m-1"),
        ("app", b"x"),
    ]
    decoded = list(decode_delayed(raw, 40, "__delay_30s-0", 30_000))
    assert decoded[0] == (40, message)
    assert decoded[1][0] == 41 and decoded[1][1].real_partition is None


def test_only_the_real_topic_header_is_required():
    raw = build_batch(
        [
            (1_000, b"key", b"value", [(REAL_TOPIC, b"orders")]),
            (2_000, None, b"value", [("app", b"x")]),
            (3_000, None, b"value", [(REAL_TOPIC, b"orders"), (DUE_MS, b"soon")]),
        ]
    )
    (first, second, third) = list(decode_delayed(raw, 7, "__delay_5s-0", 5_000))
    assert first == (7, DelayedMessage("__delay_5s-0@7", "orders", None, 6_000, 1_000, b"key", b"value"))
    assert second == (8, "offset 8: no delay.real.topic header")
    assert third[0] == 9 and third[1].startswith("offset 9: a delay header is not UTF-8 text or a number")


def test_the_real_partition_comes_from_the_header_then_the_key_then_the_id():
    assert DelayedMessage("m", "t", 5, 0, 0, b"k").partition_in(8) == 5
    assert DelayedMessage("m", "t", None, 0, 0, b"k").partition_in(8) == (murmur2(b"k") & 0x7FFFFFFF) % 8
    assert DelayedMessage("m", "t", None, 0, 0).partition_in(8) == (murmur2(b"m") & 0x7FFFFFFF) % 8


def test_forwarded_records_keep_key_value_and_headers_and_add_id_and_due():
    message = DelayedMessage("m-1", "orders", 0, 35_000, 5_000, b"k", b"v", (("app", b"x"),))
    (record,) = list(records(encode_forward([message], 35_002)))
    assert (record.timestamp, record.key, record.value) == (35_002, b"k", b"v")
    assert record.headers == [("app", b"x"), (MESSAGE_ID, b"m-1"), (DUE_MS, b"35000")]
