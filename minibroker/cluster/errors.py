"""Kafka's error codes, by Kafka's names, for the ones the emulator produces."""

from __future__ import annotations

import enum


class Errors(enum.IntEnum):
    """Error codes as in Kafka's protocol (``org.apache.kafka.common.protocol.Errors``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    RECORD_TOO_LARGE = 10
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    NETWORK_EXCEPTION = 13
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    INELIGIBLE_REPLICA = 107

    def __str__(self) -> str:
        return self.name
