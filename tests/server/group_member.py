"""A kafka-python group member in its own process, for kill -9 tests.

Usage: python group_member.py BOOTSTRAP GROUP TOPIC SESSION_MS HEARTBEAT_MS
Prints ``assigned <partitions>`` (sorted, comma-separated) each time its assignment changes,
and polls until it is killed.
"""

from __future__ import annotations

import sys
import warnings


def main() -> None:
    bootstrap, group, topic, session, heartbeat = sys.argv[1:6]
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=int(session),
        heartbeat_interval_ms=int(heartbeat),
        auto_offset_reset="earliest",
    )
    seen = None
    while True:
        consumer.poll(timeout_ms=100)
        assigned = ",".join(str(tp.partition) for tp in sorted(consumer.assignment()))
        if assigned != seen:
            seen = assigned
            print(f"assigned {assigned}", flush=True)


if __name__ == "__main__":
    main()
