"""Retry topics and a dead-letter topic for consumers: non-blocking retries with a scheduler.

The pattern is Spring Kafka's non-blocking retries (retry topics, a dead-letter topic, headers that carry
the record's origin, attempt and due time: https://docs.spring.io/spring-kafka/reference/retrytopic.html).
Unlike Spring, whose retry-topic listener pauses until a record is due and handles it there, a scheduler
(in memory, or a Redis sorted set scored by due time) holds the record and produces it back to its source
topic.

A record whose handler fails is handed off to ``<topic>-retry-<n>`` (``n`` = the attempt that failed) with
the ``retry.*`` headers; a scheduler holds it until its due time and produces it back to ``<topic>``; after
``attempts`` failed deliveries (or a non-retryable error) it goes to ``<topic>-dlt``. See docs/retry.md.
"""

from minibroker.retry.policy import RetryPolicy, dlt_topic, retry_topic
from minibroker.retry.scheduler import RetryScheduler, WheelScheduler

__all__ = ["RetryPolicy", "RetryScheduler", "WheelScheduler", "dlt_topic", "retry_topic"]
