"""The retry policy: attempts, backoff, retryable errors; topic naming."""

from __future__ import annotations

import attrs


def retry_topic(topic: str, attempt: int) -> str:
    """The retry topic a record enters after its ``attempt``-th delivery failed (``orders-retry-1``).

    Numbered by attempt, not by delay (Spring's ``-retry-<delay>``): with exponential backoff capped by a
    maximum, several attempts share one delay and the delay names would collide or need suffixes.
    """
    return f"{topic}-retry-{attempt}"


def dlt_topic(topic: str) -> str:
    """The dead-letter topic of ``topic``."""
    return f"{topic}-dlt"


@attrs.frozen
class RetryPolicy:
    """``attempts`` deliveries at most (the first one included); delay before delivery ``n + 1``.

    Invariant: ``attempts >= 1``; delays are non-negative and never above ``max_delay_ms``.
    """

    attempts: int = 3
    backoff: str = "fixed"  # "fixed" | "exponential"
    delay_ms: int = 1000
    multiplier: float = 2.0
    max_delay_ms: int = 30_000
    #: exception types worth retrying; anything else goes straight to the DLT (empty: every Exception)
    retryable: tuple[type[BaseException], ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retry.attempts: expected an integer >= 1, got {self.attempts}")
        if self.backoff not in ("fixed", "exponential"):
            raise ValueError(f"retry.backoff: expected fixed or exponential, got {self.backoff!r}")
        if self.delay_ms < 0 or self.max_delay_ms < 0:
            raise ValueError("retry.delay_ms / max_delay_ms: expected integers >= 0")
        if self.multiplier < 1:
            raise ValueError(f"retry.multiplier: expected a number >= 1, got {self.multiplier}")

    def delay_after(self, attempt: int) -> int:
        """The wait (ms) between failed delivery ``attempt`` (1-based) and the next delivery."""
        if self.backoff == "fixed":
            return min(self.delay_ms, self.max_delay_ms)
        return min(int(self.delay_ms * self.multiplier ** (attempt - 1)), self.max_delay_ms)

    def is_retryable(self, error: BaseException) -> bool:
        return not self.retryable or isinstance(error, self.retryable)

    def next_topic(self, topic: str, attempt: int, error: BaseException) -> str:
        """Where a record whose delivery ``attempt`` failed with ``error`` goes."""
        if attempt >= self.attempts or not self.is_retryable(error):
            return dlt_topic(topic)
        return retry_topic(topic, attempt)
