"""Delayed messages on the emulated cluster (seed 002): delay levels with a DelayService per broker.

Services beside the brokers: they use the cluster's client API (``Producer``,
``Consumer``) and the cluster's clock, never a broker's internals.
"""

from minibroker.delay.config import DelayConfig
from minibroker.delay.headers import DUE_MS, MESSAGE_ID, REAL_PARTITION, REAL_TOPIC, DelayedMessage
from minibroker.delay.levels import DEFAULT_LEVELS, DelayError, DelayLevels
from minibroker.delay.offsets import OFFSETS_TOPIC
from minibroker.delay.service import DelayService
from minibroker.delay.services import DelayServices
from minibroker.delay.stats import DelayStats, Delivery

__all__ = [
    "DEFAULT_LEVELS",
    "DUE_MS",
    "MESSAGE_ID",
    "OFFSETS_TOPIC",
    "REAL_PARTITION",
    "REAL_TOPIC",
    "DelayConfig",
    "DelayError",
    "DelayLevels",
    "DelayService",
    "DelayServices",
    "DelayStats",
    "DelayedMessage",
    "Delivery",
]
