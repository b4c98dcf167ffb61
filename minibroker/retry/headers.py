"""The retry header contract: what a record carries into a retry topic and the DLT."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from minibroker.delay.headers import build_batch, records

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
    out = []
    for record in records(raw):
        headers: dict[str, str | int] = {}
        extra = []
        for name, value in record.headers:
            if name.startswith("retry."):
                text = value.decode()
                headers[name] = int(text) if name in INTEGERS else text
            else:
                extra.append((name, value))
        out.append(RetryRecord(record.key, record.value, record.timestamp, headers, tuple(extra)))
    return out
