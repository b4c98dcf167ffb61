"""Retry topics and a dead-letter topic for consumers (seed 004's design, Spring-like headers).

A record whose handler fails is handed off to ``<topic>-retry-<n>`` (``n`` = the attempt that failed) with
the ``retry.*`` headers; a scheduler holds it until its due time and produces it back to ``<topic>``; after
``attempts`` failed deliveries (or a non-retryable error) it goes to ``<topic>-dlt``. See docs/retry.md.
"""

from minibroker.retry.policy import RetryPolicy, dlt_topic, retry_topic
from minibroker.retry.scheduler import RetryScheduler, WheelScheduler

__all__ = ["RetryPolicy", "RetryScheduler", "WheelScheduler", "dlt_topic", "retry_topic"]
