"""AcquisitionLock: the timer task that releases a share partition's acquired records when it expires.

Kafka's ``AcquisitionLockTimerTask`` (https://github.com/apache/kafka/blob/trunk/core/src/main/java/kafka/server/share/SharePartition.java,
``scheduleAcquisitionLockTimeout``): one task per acquisition, on the broker's SystemTimer, due exactly
``record.lock.duration.ms`` after the records were acquired. ``remaining`` counts the records still Acquired
under it; the share partition cancels the task when that reaches 0; ``on_expire(lock)`` runs when it fires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.timer import TimerTask


class AcquisitionLock(TimerTask):
    """A lock on ``offsets`` held by ``member_id`` until ``deadline_ms``; ``label`` names it in traces."""

    __slots__ = ("on_expire", "label", "member_id", "offsets", "remaining", "deadline_ms")

    def __init__(
        self,
        on_expire: Callable[[AcquisitionLock], Any],
        label: str,
        member_id: str,
        offsets: list[int],
        delay_ms: int,
        deadline_ms: int,
    ) -> None:
        super().__init__(delay_ms)
        self.on_expire = on_expire
        self.label = label
        self.member_id = member_id
        self.offsets = offsets
        self.remaining = len(offsets)
        self.deadline_ms = deadline_ms

    @property
    def op_id(self) -> str:
        """How the timer's trace events name the lock: ``lock-<group>-<partition>-<first offset>``."""
        return f"lock-{self.label}-{self.offsets[0]}"

    def run(self) -> None:
        self.on_expire(self)
