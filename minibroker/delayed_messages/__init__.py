"""Delayed messages on the emulated cluster: delay levels with a DelayService per broker, the file wheel.

Services beside the brokers (the services layer): they use the cluster's client API (``Producer``,
``Consumer``) and the cluster's clock, never a broker's internals. Not to be confused with Kafka's
delayed operations (``minibroker.purgatory`` and the broker's Delayed* operations).
"""

from minibroker.delayed_messages.config import DelayConfig
from minibroker.delayed_messages.headers import DUE_MS, MESSAGE_ID, REAL_PARTITION, REAL_TOPIC, DelayedMessage
from minibroker.delayed_messages.levels import DEFAULT_LEVELS, DelayError, DelayLevels
from minibroker.delayed_messages.offsets import DELAY_OFFSETS_TOPIC
from minibroker.delayed_messages.service import DelayService
from minibroker.delayed_messages.services import DelayServices
from minibroker.delayed_messages.stats import DelayStats, Delivery

__all__ = [
    "DEFAULT_LEVELS",
    "DELAY_OFFSETS_TOPIC",
    "DUE_MS",
    "MESSAGE_ID",
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
