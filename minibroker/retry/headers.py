"""The retry header contract: what a record carries into a retry topic and the DLT."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from minibroker.common.record_batch import build_batch, records

#: header names (bytes values, integers in decimal)
ORIGINAL_TOPIC = "retry.original.topic"
ORIGINAL_PARTITION = "retry.original.partition"
ORIGINAL_OFFSET = "retry.original.offset"
ORIGINAL_TIMESTAMP = "retry.original.timestamp"
ATTEMPT = "retry.attempt"  # deliveries that failed so far
ERROR = "retry.error"  # "<ExceptionType>: <message>" of the last failure
DUE = "retry.due.ms"  # when the next delivery may happen (the DLT: when it was dead-lettered)
INTEGERS = (ORIGINAL_PARTITION, ORIGINAL_OFFSET, ORIGINAL_TIMESTAMP, ATTEMPT, DUE)


@attrs.frozen
class RetryRecord:
    """One record as the retry machinery sees it: ``headers`` the parsed ``retry.*`` fields, ``extra`` the
    record's other headers, carried unchanged through every hand-off."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: dict[str, str | int] = attrs.field(factory=dict)
    extra: tuple[tuple[str, bytes], ...] = ()

    @property
    def attempt(self) -> int:
        """Failed deliveries so far (0 for a record never retried)."""
        return int(self.headers.get(ATTEMPT, 0))

    def encode_headers(self) -> list[tuple[str, bytes]]:
        own = [(name, str(value).encode()) for name, value in sorted(self.headers.items())]
        return [*self.extra, *own]


def encode(batch: Iterable[RetryRecord]) -> bytes:
    """One v2 record batch of ``batch``."""
    return build_batch((r.timestamp, r.key, r.value, r.encode_headers()) for r in batch)


def decode(raw: bytes) -> list[RetryRecord]:
    """The records of ``raw`` (a fetched batch), ``retry.*`` headers parsed."""
    return [parse(r.key, r.value, r.timestamp, r.headers) for r in records(raw)]


def parse(
    key: bytes | None, value: bytes | None, timestamp: int, header_list: Iterable[tuple[str, bytes]]
) -> RetryRecord:
    """A record as any Kafka client returns it, ``retry.*`` headers parsed.

    Raises ``ValueError`` naming the header when an integer header is not a decimal number.
    """
    headers: dict[str, str | int] = {}
    extra = []
    for name, raw in header_list:
        if name.startswith("retry."):
            text = raw.decode("utf-8", "replace")
            if name in INTEGERS:
                try:
                    headers[name] = int(text)
                except ValueError:
                    raise ValueError(f"header {name}: expected a decimal integer, got {text!r}") from None
            else:
                headers[name] = text
        else:
            extra.append((name, raw))
    return RetryRecord(key, value, timestamp, headers, tuple(extra))
