"""The records a coordinator writes to ``__consumer_offsets``, and replaying them.

Two kinds, keyed like Kafka's (an offset commit by group, topic and partition; a
group's metadata by group), each with a value or ``None`` (a tombstone):

- ``offset``: committed offset, leader epoch, metadata, commit time, optional expire time;
- ``group``: protocol type, generation, protocol, leader, state timestamp and every
  member with its timeouts, subscription and assignment;
- ``consumer_group`` (KIP-848, keyed by group): group epoch, assignment epoch, assignor,
  subscribed topics' partition counts;
- ``consumer_member`` (keyed by group and member): the member's subscription, epochs,
  state, current assignment, partitions pending revocation and target assignment;
- ``share_group`` (KIP-932, keyed by group): the share group's epoch (Kafka's ShareGroupMetadata);
- ``share_member`` (keyed by group and member): client, rack, subscribed topics, member epoch, previous
  epoch and current assignment (Kafka's ShareGroupMemberMetadata and ShareGroupCurrentMemberAssignment);
- ``share_target`` (keyed by group): the assignment epoch and every member's target assignment (Kafka's
  ShareGroupTargetAssignmentMetadata and its per-member ShareGroupTargetAssignmentMember, in one record);
- ``share_state_partitions`` (keyed by group): the topics the group has share-partition state on (Kafka's
  ShareGroupStatePartitionMetadata, its initialized topics).

Deviation: the bytes are canonical JSON (bytes fields in base64), not Kafka's binary
schemas, so a real client that reads ``__consumer_offsets`` sees our own format.
A record is one value of a batch; ``decode`` raises ``ValueError`` on anything else.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import attrs

#: the record types, by their ``type`` field
TYPES = (
    "offset",
    "group",
    "consumer_group",
    "consumer_member",
    "share_group",
    "share_member",
    "share_target",
    "share_state_partitions",
)


@attrs.frozen
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_ms: int
    expire_ms: int | None = None


def offset_record(group: str, topic: str, partition: int, value: OffsetAndMetadata | None) -> bytes:
    body = None if value is None else attrs.asdict(value)
    return _dump({"type": "offset", "group": group, "topic": topic, "partition": partition, "value": body})


def txn_offset_record(
    group: str, topic: str, partition: int, value: OffsetAndMetadata, producer_id: int
) -> bytes:
    """A transactional producer's offset: it counts once its transaction's commit marker follows."""
    body = attrs.asdict(value)
    return _dump(
        {
            "type": "offset",
            "group": group,
            "topic": topic,
            "partition": partition,
            "value": body,
            "producer_id": producer_id,
        }
    )


def group_record(group: str, value: dict[str, Any] | None) -> bytes:
    return _dump({"type": "group", "group": group, "value": value})


def consumer_group_record(group: str, value: dict[str, Any] | None) -> bytes:
    return _dump({"type": "consumer_group", "group": group, "value": value})


def consumer_member_record(group: str, member: str, value: dict[str, Any] | None) -> bytes:
    return _dump({"type": "consumer_member", "group": group, "member": member, "value": value})


def share_record(kind: str, group: str, value: dict[str, Any] | None, member: str | None = None) -> bytes:
    """A share group's record of type ``kind`` (``share_member`` names its ``member``)."""
    record: dict[str, Any] = {"type": kind, "group": group, "value": value}
    if member is not None:
        record["member"] = member
    return _dump(record)


def member_value(member: Any, protocol: str | None, assignment: bytes) -> dict[str, Any]:
    subscription = member.metadata(protocol) if protocol is not None else b""
    return {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "session_timeout_ms": member.session_timeout_ms,
        "subscription": base64.b64encode(subscription).decode(),
        "assignment": base64.b64encode(assignment).decode(),
    }


def b64(text: str) -> bytes:
    return base64.b64decode(text.encode())


def decode(data: bytes) -> dict[str, Any]:
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"not a coordinator record: {error}") from None
    if not isinstance(record, dict) or record.get("type") not in TYPES:
        raise ValueError("not a coordinator record")
    return record


#: the fields of a record that make its key (the rest: by type and group)
_KEY_FIELDS = {
    "offset": ("type", "group", "topic", "partition"),
    "consumer_member": ("type", "group", "member"),
    "share_member": ("type", "group", "member"),
}


def compaction_key(data: bytes) -> tuple[bytes, bool] | None:
    """The log cleaner's key of a record (Kafka's record key) and whether it is a tombstone.

    An offset is keyed by group, topic and partition, a consumer or share group member by group and
    member, a group's other records by type and group. A transactional
    offset (``producer_id``) and anything unknown get None: the cleaner keeps them.
    """
    try:
        record = decode(data)
    except ValueError:
        return None
    if "producer_id" in record:
        return None
    fields = _KEY_FIELDS.get(record["type"], ("type", "group"))
    return _dump({name: record.get(name) for name in fields}), record.get("value") is None


def _dump(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
