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
    MESSAGE_TOO_LARGE = 10
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    INVALID_TOPIC_EXCEPTION = 17
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    OPERATION_NOT_ATTEMPTED = 55
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    UNKNOWN_TOPIC_ID = 100
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    UNSUPPORTED_COMPRESSION_TYPE = 76
    INVALID_RECORD = 87
    STALE_BROKER_EPOCH = 77
    INVALID_UPDATE_VERSION = 95
    INELIGIBLE_REPLICA = 107
    # the log's size and timestamp checks, authorization, admin APIs (server/log_validator.py, ...)
    RECORD_TOO_LARGE = 10  # an alias of MESSAGE_TOO_LARGE (Kafka's RecordTooLargeException)
    RECORD_LIST_TOO_LARGE = 18
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    SECURITY_DISABLED = 54
    LOG_DIR_NOT_FOUND = 57
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    RESOURCE_NOT_FOUND = 91

    def __str__(self) -> str:
        return self.name


class ErrorCode(int):
    """A code of Kafka's protocol the emulator does not model (a test pushed it), with Kafka's name."""

    name: str

    def __new__(cls, code: int, name: str) -> ErrorCode:
        self = super().__new__(cls, code)
        self.name = name
        return self

    def __str__(self) -> str:
        return self.name
