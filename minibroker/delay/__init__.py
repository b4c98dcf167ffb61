"""Deprecated name of the delayed messages package, kept for one release.

Import ``minibroker.delayed_messages``.

Importing this one warns once (DeprecationWarning) and gives the names it always exported.
"""

import warnings

warnings.warn(
    "minibroker.delay is deprecated and will be removed in the next release: "
    "import delayed messages from minibroker.delayed_messages",
    DeprecationWarning,
    stacklevel=2,
)

from minibroker.delayed_messages import (  # noqa: E402
    DEFAULT_LEVELS,
    DUE_MS,
    MESSAGE_ID,
    OFFSETS_TOPIC,
    REAL_PARTITION,
    REAL_TOPIC,
    DelayConfig,
    DelayedMessage,
    DelayError,
    DelayLevels,
    DelayService,
    DelayServices,
    DelayStats,
    Delivery,
)

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
