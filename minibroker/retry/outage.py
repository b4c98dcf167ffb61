"""One dependency's outage (``redis at URL``, ``kafka at HOST:PORT``): backoff, one line each way, a limit.

An outage starts with the first failed call and ends with the next call that succeeds. The service
asks ``failed(reason)`` how long to wait before it calls again: ``retry_backoff_ms`` after the first
failure, doubled after each further one, never above ``retry_backoff_max_ms`` (Kafka's client backoff,
``retry.backoff.ms`` / ``retry.backoff.max.ms``, without the jitter). It writes one line when an outage
starts and one when it ends, never one per attempt. With ``limit_ms > 0``, the failure that finds the
outage ``limit_ms`` old raises ``OutageLimitExceeded`` (the service exits 1 with that line); 0 means
keep retrying for ever.

Invariant: the waits of one outage are non-decreasing, each in ``[1, retry_backoff_max_ms]``, and none
ends past ``since + limit_ms``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable


class OutageLimitExceeded(Exception):
    """A dependency stayed unreachable for the configured limit: one line, exit status 1."""


def now_ms() -> int:
    """Epoch milliseconds: the scale of ``retry.due.ms`` as applications write it."""
    return time.time_ns() // 1_000_000


#: the longest reason a line quotes (kafka-python's texts run long)
REASON_CHARS = 160


def reason_of(error: BaseException) -> str:
    """``error`` as one short line: its type and the start of its first line of text."""
    name = type(error).__name__
    lines = str(error).strip().splitlines()
    # kafka-python's texts read "[Error 87] InvalidRecordError: None"
    text = re.sub(r"^\[Error -?\d+\] ", "", lines[0]) if lines else ""
    text = text.removeprefix(f"{name}: ").removesuffix(": None").rstrip(".")
    text = "" if text in (name, "None") else text
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 3] + "..."
    return f"{name}: {text}" if text else name


class Outage:
    """The failures of one dependency since its last success; see the module docstring."""

    def __init__(
        self,
        what: str,
        backoff_ms: int,
        backoff_max_ms: int,
        limit_ms: int,
        log: Callable[[str], None],
        clock: Callable[[], int] = now_ms,
        down: str = "unreachable",
        up: str = "reachable again",
    ) -> None:
        self.what, self.log, self.clock, self.down, self.up = what, log, clock, down, up
        self.backoff_ms, self.backoff_max_ms, self.limit_ms = backoff_ms, backoff_max_ms, limit_ms
        #: when the current outage began (None: reachable); failed calls in it
        self.since: int | None = None
        self.failures = 0
        #: outages seen since start-up
        self.count = 0

    @property
    def active(self) -> bool:
        return self.since is not None

    def failed(self, reason: str) -> int:
        """Note a failed call; the milliseconds to wait before the next one (``OutageLimitExceeded``
        once the outage is ``limit_ms`` old)."""
        now = self.clock()
        if self.since is None:
            self.since, self.failures = now, 0
            self.count += 1
        lasted = now - self.since
        if self.limit_ms and lasted >= self.limit_ms:
            raise OutageLimitExceeded(
                f"{self.what} {self.down} for {lasted} ms (outage_limit_ms = {self.limit_ms}): giving up; "
                f"last error: {reason}"
            )
        delay = min(self.backoff_max_ms, self.backoff_ms << min(self.failures, 40))
        if self.limit_ms:
            delay = min(delay, self.since + self.limit_ms - now)
        delay = max(1, delay)
        self.failures += 1
        if self.failures == 1:
            self.log(f"{self.what} {self.down}: {reason}; retrying in {delay} ms")
        return delay

    def succeeded(self) -> None:
        """A call went through: end the outage (one line) if there was one."""
        if self.since is None:
            return
        lasted = self.clock() - self.since
        self.log(f"{self.what} {self.up} after {lasted} ms ({self.failures} failed attempts)")
        self.since, self.failures = None, 0
