"""A confluent-kafka member with ``group.protocol=consumer`` in its own process, for kill -9 tests.

Usage: python consumer_protocol_member.py BOOTSTRAP GROUP TOPIC
Prints ``assigned <partitions>`` (sorted, comma-separated) each time its assignment changes,
and polls until it is killed.
"""

from __future__ import annotations

import sys


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    seen = None
    while True:
        consumer.poll(0.05)
        assigned = ",".join(
            str(tp.partition) for tp in sorted(consumer.assignment(), key=lambda x: x.partition)
        )
        if assigned != seen:
            seen = assigned
            print(f"assigned {assigned}", flush=True)


if __name__ == "__main__":
    main()
