"""The checks Kafka's log makes on a produce's batches before appending them, with Kafka's errors.

Kafka runs them in ``UnifiedLog.append`` (``analyzeAndValidateRecords``) and
``LogValidator`` (storage/.../log/LogValidator.java); here the wire front end runs
them on a partition's records (``produce.py``), with the topic's configs in force
(``TopicLimits``: the topic's override, else the broker setting, else Kafka's default):

- a batch larger than ``max.message.bytes`` (broker: ``message.max.bytes``, default
  1,048,588): MESSAGE_TOO_LARGE, checked per batch before anything else
  (``check_batch_sizes``);
- each record, batch by batch (``validate_for_log``): on a ``compact`` topic a
  record without a key is INVALID_RECORD; with ``message.timestamp.type=CreateTime`` a
  timestamp more than ``message.timestamp.before.max.ms`` before the broker's clock
  or ``message.timestamp.after.max.ms`` after it, or a batch a producer marked
  LogAppendTime, is INVALID_TIMESTAMP. As in Kafka (KIP-467) every bad record of the
  first batch that has one is named in ``record_errors`` (its index in its batch and
  Kafka's message), the partition's ``error_message`` says why, and nothing of the
  produce is appended;
- records larger in total than ``segment.bytes``: RECORD_LIST_TOO_LARGE;
- ``message.timestamp.type=LogAppendTime``: each batch is stamped with the broker's
  clock (its timestamp type and max timestamp, the CRC recomputed, as Kafka's
  ``setMaxTimestamp``), and the answer's ``log_append_time_ms`` is that time.

Records are parsed one by one only when a check needs them: a compacted topic, a
``before.max.ms`` bound, a batch whose header max timestamp is past the
``after.max.ms`` bound, or a producer's LogAppendTime batch; otherwise the batch
header decides (its max timestamp is the latest of its records).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import attrs
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import calc_crc32c

from minibroker.broker.config import BrokerConfig
from minibroker.broker.topic_configs import INT64_MAX, topic_value
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.server.compression import CODEC_NAMES, DecompressedTooLarge, DecompressionError, decompress
from minibroker.server.records import (
    ATTRIBUTES,
    ATTRIBUTES_AT,
    CODEC_MASK,
    HEADER_SIZE,
    InvalidRecords,
    inner_batches,
)

_CRC_AT = 17
_MAX_TIMESTAMP_AT = 35
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1


@attrs.frozen
class RecordError:
    """One rejected record: its index in its batch and Kafka's message (ProduceResponse.RecordError)."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(InvalidRecords):
    """Records Kafka's LogValidator refuses: the partition's error, message and record errors."""

    def __init__(self, error: Errors, message: str, record_errors: list[RecordError]) -> None:
        super().__init__(error, message)
        self.error_message = message
        self.record_errors = record_errors


@attrs.frozen
class TopicLimits:
    """The configs in force for one topic that the checks read."""

    max_message_bytes: int
    segment_bytes: int
    compacted: bool
    log_append_time: bool
    before_max_ms: int
    after_max_ms: int

    @classmethod
    def of_topic(cls, topic: str, overrides: Mapping[str, str], config: BrokerConfig) -> TopicLimits:
        """``of``, remembered per topic while its overrides and the broker's config stay the same.

        A Produce reads the limits of every topic it writes; they change only when a topic's
        overrides or the broker's (frozen, replaced on change) config do, so the remembered limits
        are used when the overrides are equal and the config is the same object.
        """
        known = _LIMITS.get(topic)
        if known is not None and known[1] is config and known[0] == overrides:
            return known[2]
        limits = cls.of(overrides, config)
        if len(_LIMITS) >= _LIMITS_KEPT:
            _LIMITS.clear()
        _LIMITS[topic] = (dict(overrides), config, limits)
        return limits

    @classmethod
    def of(cls, overrides: Mapping[str, str], config: BrokerConfig) -> TopicLimits:
        """The limits in force for a topic with ``overrides`` on a broker with ``config``."""
        fallback = {
            "message.max.bytes": config.message_max_bytes,
            "log.segment.bytes": config.log_segment_bytes,
            "log.message.timestamp.type": config.log_message_timestamp_type,
            "log.message.timestamp.before.max.ms": config.log_message_timestamp_before_max_ms,
            "log.message.timestamp.after.max.ms": config.log_message_timestamp_after_max_ms,
        }

        def value(name: str) -> str:
            return topic_value(name, overrides, fallback)

        return cls(
            max_message_bytes=int(value("max.message.bytes")),
            segment_bytes=int(value("segment.bytes")),
            compacted="compact" in value("cleanup.policy").split(","),
            log_append_time=value("message.timestamp.type") == "LogAppendTime",
            before_max_ms=int(value("message.timestamp.before.max.ms")),
            after_max_ms=int(value("message.timestamp.after.max.ms")),
        )


#: topic -> (its overrides, the broker config, the limits they give): ``TopicLimits.of_topic``
_LIMITS: dict[str, tuple[dict[str, str], BrokerConfig, TopicLimits]] = {}
#: topics remembered at most (the table starts over past it)
_LIMITS_KEPT = 1024


def check_batch_sizes(raw: bytes, tp: TopicPartition, limits: TopicLimits) -> None:
    """MESSAGE_TOO_LARGE for a batch past ``max.message.bytes`` (Kafka checks this first, per batch)."""
    try:
        spans = list(inner_batches(raw))
    except InvalidRecords:
        return  # a bad length: ``validate_records`` answers CORRUPT_MESSAGE for it
    for start, end in spans:
        if end - start > limits.max_message_bytes:
            raise InvalidRecords(
                Errors.MESSAGE_TOO_LARGE,
                f"The record batch size in the append to {tp} is {end - start} bytes which exceeds "
                f"the maximum configured value of {limits.max_message_bytes}.",
            )


def validate_for_log(raw: bytes, tp: TopicPartition, limits: TopicLimits, now_ms: int) -> tuple[bytes, int]:
    """The records as they are appended and their ``log_append_time_ms`` (-1 unless LogAppendTime)."""
    spans = list(inner_batches(raw))
    for start, end in spans:
        if _needs_records(raw, start, limits, now_ms):
            errors = _record_errors(raw[start:end], tp, limits, now_ms)
            if errors:
                _raise(errors)
    if len(raw) > limits.segment_bytes:
        raise InvalidRecords(
            Errors.RECORD_LIST_TOO_LARGE,
            f"Message batch size is {len(raw)} bytes in append to partition {tp}, which exceeds the "
            f"maximum configured segment size of {limits.segment_bytes}.",
        )
    if not limits.log_append_time:
        return raw, NO_TIMESTAMP
    stamped = bytearray(raw)
    for start, end in spans:
        (attributes,) = ATTRIBUTES.unpack_from(stamped, start + ATTRIBUTES_AT)
        ATTRIBUTES.pack_into(stamped, start + ATTRIBUTES_AT, attributes | _LOG_APPEND_TIME)
        _INT64.pack_into(stamped, start + _MAX_TIMESTAMP_AT, now_ms)
        _UINT32.pack_into(stamped, start + _CRC_AT, calc_crc32c(bytes(stamped[start + ATTRIBUTES_AT : end])))
    return bytes(stamped), now_ms


def _raise(errors: list[tuple[Errors, RecordError]]) -> None:
    """Kafka's ``processRecordErrors``: INVALID_TIMESTAMP if any record has a bad timestamp."""
    records = [record for _, record in errors]
    if any(error is Errors.INVALID_TIMESTAMP for error, _ in errors):
        raise RecordValidationError(
            Errors.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            records,
        )
    shown = ", ".join(str(r) for r in records[:3])
    raise RecordValidationError(
        Errors.INVALID_RECORD,
        f"One or more records have been rejected due to {len(records)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        records,
    )


def _needs_records(raw: bytes, start: int, limits: TopicLimits, now_ms: int) -> bool:
    """Whether a check must read the batch at ``start`` record by record (its header decides otherwise)."""
    if limits.compacted:
        return True
    if limits.log_append_time:
        return False
    (attributes,) = ATTRIBUTES.unpack_from(raw, start + ATTRIBUTES_AT)
    (max_timestamp,) = _INT64.unpack_from(raw, start + _MAX_TIMESTAMP_AT)
    return bool(
        attributes & _LOG_APPEND_TIME
        or limits.before_max_ms < INT64_MAX
        or max_timestamp > now_ms + limits.after_max_ms
    )


def _record_errors(
    batch_bytes: bytes, tp: TopicPartition, limits: TopicLimits, now_ms: int
) -> list[tuple[Errors, RecordError]]:
    batch = DefaultRecordBatch(batch_bytes)
    producer_log_append = not limits.log_append_time and batch.timestamp_type == 1
    check_times = not limits.log_append_time
    errors: list[tuple[Errors, RecordError]] = []
    for index, (offset, timestamp, has_key) in enumerate(_records(batch_bytes)):
        if limits.compacted and not has_key:
            message = f"Compacted topic cannot accept message without key in topic partition {tp}."
            errors.append((Errors.INVALID_RECORD, RecordError(index, message)))
        elif producer_log_append:
            message = (
                f"Invalid timestamp type in message with offset {offset}. Producer should not set "
                "timestamp type to LogAppendTime."
            )
            errors.append((Errors.INVALID_TIMESTAMP, RecordError(index, message)))
        elif check_times and timestamp != NO_TIMESTAMP and _out_of_range(timestamp, now_ms, limits):
            message = (
                f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp "
                f"should be within [{now_ms - limits.before_max_ms}, {now_ms + limits.after_max_ms}]"
            )
            errors.append((Errors.INVALID_TIMESTAMP, RecordError(index, message)))
    return errors


def _out_of_range(timestamp: int, now_ms: int, limits: TopicLimits) -> bool:
    return now_ms - timestamp > limits.before_max_ms or timestamp - now_ms > limits.after_max_ms


def _records(batch_bytes: bytes) -> list[tuple[int, int, bool]]:
    """(offset, timestamp, has a key) of each record of one checked v2 batch."""
    (attributes,) = ATTRIBUTES.unpack_from(batch_bytes, ATTRIBUTES_AT)
    codec = attributes & CODEC_MASK
    plain = batch_bytes
    if codec:
        if codec not in CODEC_NAMES:
            return []
        try:
            body = decompress(codec, batch_bytes[HEADER_SIZE:], len(batch_bytes) * 1024)
        except (DecompressionError, DecompressedTooLarge):
            return []  # ``validate_records`` has answered for these already
        buffer = bytearray(batch_bytes[:HEADER_SIZE]) + body
        ATTRIBUTES.pack_into(buffer, ATTRIBUTES_AT, attributes & ~CODEC_MASK)
        plain = bytes(buffer)
    try:
        return [(r.offset, r.timestamp, r.key is not None) for r in DefaultRecordBatch(plain)]
    except (CorruptRecordError, UnicodeDecodeError):
        return []
