"""Delayed messages on the emulated cluster: delay levels with a DelayService per broker.

Kafka has no delayed messages; this builds them from topics, in the manner of RocketMQ's delay levels (a
fixed list of delays; RocketMQ holds one queue per level, minibroker one internal topic per level, each
drained by a service beside its broker):
https://github.com/apache/rocketmq/blob/develop/store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java
(``messageDelayLevel``). ``file_wheel`` is the other design, arbitrary delays on a timing wheel on disk.

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
