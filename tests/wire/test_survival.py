"""No request ends the server: a request that finds a bug is answered UNKNOWN_SERVER_ERROR; the rest go on.

Real clients on loopback against ``ServedThread`` servers (real time, every wait bounded).
"""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from tests.wire.conftest import scenario


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition of ``t`` -> offset) as a consumer with assigned partitions does."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("t", p) for p in offsets])
        consumer.commit({TopicPartition("t", p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def test_deleting_two_empty_groups_with_offsets_on_one_broker_answers_both(serve):
    # one broker, ISR of one: each group's tombstone write completes inside the request
    server = serve(scenario(brokers=1, topics='name = "t"\npartitions = 2'))
    for group in ("g1", "g2"):
        commit(server.bootstrap, group, {0: 5, 1: 6})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        deleted = admin.delete_groups(["g1", "g2", "nobody"])
        assert deleted == {"g1": "OK", "g2": "OK", "nobody": "GroupIdNotFoundError"}
        assert admin.delete_groups(["g2"]) == {"g2": "GroupIdNotFoundError"}
        assert admin.list_group_offsets("g1") == {"g1": {}}
    finally:
        admin.close()
    assert server.call(lambda: sorted(server.cluster.brokers[0].coordinator.groups)) == []
    assert server.logs == []
