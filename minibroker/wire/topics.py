"""Kafka's rules for topic names, shared with the cluster's admin operations."""

from __future__ import annotations

from minibroker.common.topic_names import topic_error

__all__ = ["topic_error"]
