"""Kafka's ``OffsetMetadataManager``: OffsetCommit, OffsetFetch, the offsets' part of DeleteGroups, expiry.

- OffsetCommit is validated as Kafka's ``ClassicGroup.validateOffsetCommit`` does
  (generation -1 on an Empty or missing group is an admin/simple commit, creating a
  group without protocol type); accepted offsets are appended to the group's
  ``__consumer_offsets`` partition as one acks=-1 write, a DelayedProduce in the
  broker's produce purgatory with ``offsets.commit.timeout.ms``, and answered (and
  applied) when it completes. A failed write answers as Kafka maps it:
  COORDINATOR_NOT_AVAILABLE (not enough replicas, timeout) or NOT_COORDINATOR.
- OffsetFetch reads the applied offsets; an unknown partition or group gives -1.
  With ``require_stable`` (KIP-447) the answer waits until the group's writes
  already in the log are answered (the context's ``when_written``), as Kafka's
  ``GroupCoordinatorService.fetchOffsets`` makes such a fetch a write operation with no
  records that completes once the pending offsets are committed: a member that
  fetches its position after a rejoin never reads an offset older than one it has
  already written. A partition with a pending transactional offset then answers
  UNSTABLE_OFFSET_COMMIT (the consumer asks again later).
- TxnOffsetCommit (KIP-98, KIP-447): a transactional producer's offsets are validated
  like a commit (the member and generation when given), written acks=-1 as one
  transactional batch of the producer (it holds the partition's LSO until the marker),
  and held pending per producer id; the transaction's marker on the
  group's partition applies them (COMMIT) or drops them (ABORT): ``complete_transaction``.
  Replaying the log does the same with the markers it meets.
- every ``offsets.retention.check.interval.ms`` the ``expire-offsets-<partition>``
  task removes offsets older than ``offsets.retention.minutes`` of Empty groups
  (counted from when the group became Empty) and of groups without a protocol type
  (from the commit), writing tombstones; an Empty group left without offsets is
  deleted. Kafka's expiry of unsubscribed topics in Stable classic groups is not done; in
  KIP-848 consumer groups the offsets of topics no member subscribes to expire that long
  after their commit, and an empty consumer group left without offsets is deleted.
- DeleteGroups (``GroupCoordinator.delete_groups``) takes a deleted group's offsets
  here: ``delete_all_offsets`` returns their tombstones, sorted by partition.
- replaying an offset record from the log applies it (a tombstone removes it); an
  offset of a group the manager does not know creates the group, without protocol type.

One manager per broker, for every ``__consumer_offsets`` partition the broker has
loaded. It sees the group side only through ``ClassicGroups`` (as Kafka's
``OffsetMetadataManager`` holds the ``GroupMetadataManager``): look a group up,
create one for a simple commit, re-arm a member's session on a commit, remove a
group whose last offset expired. The broker is reached through the
``CoordinatorContext``.
"""

from __future__ import annotations

from typing import Any, Protocol

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import records
from minibroker.coordinator.group.consumer_protocol import subscribed_topics
from minibroker.coordinator.group.coordinator_context import CoordinatorContext, write_error
from minibroker.coordinator.group.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Answer,
    ClassicGroup,
)
from minibroker.coordinator.group.messages import (
    CommitOffset,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchGroup,
    OffsetFetchResult,
    TxnOffsetCommitRequest,
)
from minibroker.coordinator.group.records import OffsetAndMetadata


class ClassicGroups(Protocol):
    """What the offsets need from the group side (``GroupMetadataManager`` provides it)."""

    def group(self, group_id: str) -> ClassicGroup | None: ...
    def create_group(self, group_id: str) -> ClassicGroup: ...
    def schedule_heartbeat(self, group_id: str, member_id: str, timeout_ms: int) -> None: ...
    def remove_group(self, group_id: str) -> None: ...


def commit_response(
    request: OffsetCommitRequest, errors: dict[TopicPartition, Errors], default: Errors = Errors.NONE
) -> OffsetCommitResponse:
    """The answer to ``request``: each partition's error from ``errors``, else ``default``."""
    return OffsetCommitResponse(
        tuple(
            (c.topic, c.partition, errors.get(TopicPartition(c.topic, c.partition), default))
            for c in request.offsets
        )
    )


class OffsetMetadataManager:
    """The committed offsets of one broker's loaded ``__consumer_offsets`` partitions, by group id."""

    def __init__(self, context: CoordinatorContext, groups: ClassicGroups) -> None:
        self.context = context
        self.groups = groups
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        #: KIP-848's consumer groups by id and their manager (the coordinator sets both): their commits
        #: and fetches are checked against member epochs, and no classic group is made for them
        self.consumer_groups: dict[str, Any] = {}
        self.consumer_group_manager: Any = None
        #: producer id -> group -> offsets of its open transaction (pendingTransactionalOffsetCommits)
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        #: offsets removed by the retention checks so far
        self.expired_offsets = 0

    # ==========================================================================================
    # OffsetCommit
    # ==========================================================================================
    def commit_offsets(self, request: OffsetCommitRequest, answer: Answer) -> None:
        gid = request.group_id
        error = self._validate_commit(request)
        if error is not None:
            return answer(commit_response(request, {}, error))
        consumer = self.consumer_groups.get(gid)
        if consumer is not None:
            accepted_in = consumer.group_epoch
        else:
            group = self.groups.group(gid)
            if group is None:  # a simple commit: generation -1 on a missing group
                group = self.groups.create_group(gid)
            member = group.members.get(request.member_id)
            accepted_in = group.generation_id  # the generation the commit was validated against
            if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
                self.groups.schedule_heartbeat(gid, member.member_id, member.session_timeout_ms)
        now = self.context.now()
        expire = None if request.retention_ms < 0 else now + request.retention_ms
        errors, accepted = self._check_offsets(request.offsets, now, expire)
        if not accepted:
            return answer(commit_response(request, errors))
        values = [records.offset_record(gid, tp.topic, tp.partition, value) for tp, value in accepted.items()]

        def done(write: Errors) -> None:
            if write is Errors.NONE:
                self.offsets.setdefault(gid, {}).update(accepted)
            for tp in accepted:
                errors[tp] = write_error(write)
            self.context.emit(
                "group.commit",
                group=gid,
                member=request.member_id,
                generation=request.generation_id,
                group_generation=accepted_in,
                error=write_error(write).name,
                offsets={str(tp): v.offset for tp, v in accepted.items()},
            )
            answer(commit_response(request, errors))

        self.context.write(gid, values, done)

    def commit_transactional_offsets(self, request: TxnOffsetCommitRequest, answer: Answer) -> None:
        """TxnOffsetCommit: write the offsets tagged with the producer id; pending until the marker."""
        gid = request.group_id
        error = self._validate_txn_commit(request)
        if error is not None:
            return answer(commit_response(request, {}, error))
        if self.groups.group(gid) is None and gid not in self.consumer_groups:
            self.groups.create_group(gid)
        errors, accepted = self._check_offsets(request.offsets, self.context.now(), None)
        if not accepted:
            return answer(commit_response(request, errors))
        pid = request.producer_id
        values = [
            records.txn_offset_record(gid, tp.topic, tp.partition, value, pid)
            for tp, value in accepted.items()
        ]

        def done(write: Errors) -> None:
            if write is Errors.NONE:
                self.pending.setdefault(pid, {}).setdefault(gid, {}).update(accepted)
            for tp in accepted:
                errors[tp] = write_error(write)
            self.context.emit(
                "group.txn_commit",
                group=gid,
                producer_id=pid,
                error=write_error(write).name,
                offsets={str(tp): v.offset for tp, v in accepted.items()},
            )
            answer(commit_response(request, errors))

        self.context.write(gid, values, done, (pid, request.producer_epoch))

    def _validate_txn_commit(self, request: TxnOffsetCommitRequest) -> Errors | None:
        """Kafka's validateTxnOffsetCommit: the member and generation are checked only when given."""
        if not request.group_id:
            return Errors.INVALID_GROUP_ID
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            return self.consumer_group_manager.validate_offset_commit(
                consumer, request.member_id, request.generation_id, 9, transactional=True
            )
        group = self.groups.group(request.group_id)
        if group is None:
            return None
        if group.state == DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if request.generation_id < 0 and not request.member_id:
            return None
        error = group.validate_member(request.member_id, request.instance_id)
        if error is not None:
            return error
        if request.generation_id >= 0 and request.generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        return None

    def complete_transaction(self, producer_id: int, committed: bool) -> None:
        """A transaction marker reached a group partition: apply (COMMIT) or drop (ABORT) its offsets."""
        for gid, offsets in self.pending.pop(producer_id, {}).items():
            if committed:
                self.offsets.setdefault(gid, {}).update(offsets)
            self.context.emit(
                "group.txn_offsets",
                group=gid,
                producer_id=producer_id,
                committed=committed,
                partitions=len(offsets),
            )

    def _check_offsets(
        self, offsets: tuple[CommitOffset, ...], now: int, expire: int | None
    ) -> tuple[dict[TopicPartition, Errors], dict[TopicPartition, OffsetAndMetadata]]:
        """Each offset's error (unknown partition, metadata too large), and the accepted ones."""
        errors: dict[TopicPartition, Errors] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.context.config.offset_metadata_max_bytes
        for commit in offsets:
            tp = TopicPartition(commit.topic, commit.partition)
            if not self.context.known(tp):
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif commit.metadata is not None and len(commit.metadata.encode()) > limit:
                errors[tp] = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = OffsetAndMetadata(
                    commit.offset, commit.leader_epoch, commit.metadata, now, expire
                )
        return errors, accepted

    def _validate_commit(self, request: OffsetCommitRequest) -> Errors | None:
        """Kafka's validateOffsetCommit: the error of every partition, or None."""
        if not request.group_id:
            return Errors.INVALID_GROUP_ID
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            return self.consumer_group_manager.validate_offset_commit(
                consumer, request.member_id, request.generation_id, request.api_version, transactional=False
            )
        group = self.groups.group(request.group_id)
        generation = request.generation_id
        if group is None:
            if generation < 0:
                return None
            return Errors.GROUP_ID_NOT_FOUND if request.api_version >= 9 else Errors.ILLEGAL_GENERATION
        if group.state == DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state == EMPTY:
            return None
        if generation >= 0 or request.member_id or request.instance_id is not None:
            error = group.validate_member(request.member_id, request.instance_id)
            if error is not None:
                return error
            if generation != group.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif group.state != EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        if group.state == COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return None

    # ==========================================================================================
    # OffsetFetch
    # ==========================================================================================
    def fetch_offsets(self, request: OffsetFetchGroup, require_stable: bool = False) -> OffsetFetchResult:
        gid = request.group_id
        if not gid:
            return OffsetFetchResult(gid, Errors.INVALID_GROUP_ID)
        consumer = self.consumer_groups.get(gid)
        if consumer is not None:
            error = self.consumer_group_manager.validate_offset_fetch(
                consumer, request.member_id, request.member_epoch
            )
            if error is not None:
                return OffsetFetchResult(gid, error)
        committed = self.offsets.get(gid, {})
        if request.topics is None:
            wanted = sorted(committed)
        else:
            wanted = [TopicPartition(topic, p) for topic, partitions in request.topics for p in partitions]
        result = []
        unstable = (
            {tp for groups in self.pending.values() for tp in groups.get(gid, {})}
            if require_stable
            else set()
        )
        for tp in wanted:
            value = committed.get(tp)
            if tp in unstable:
                result.append(FetchedOffset(tp.topic, tp.partition, error=Errors.UNSTABLE_OFFSET_COMMIT))
            elif value is None:
                result.append(FetchedOffset(tp.topic, tp.partition))
            else:
                result.append(
                    FetchedOffset(tp.topic, tp.partition, value.offset, value.leader_epoch, value.metadata)
                )
        return OffsetFetchResult(gid, Errors.NONE, tuple(result))

    # ==========================================================================================
    # DeleteGroups, replay, unload
    # ==========================================================================================
    def delete_all_offsets(self, group_id: str) -> list[bytes]:
        """Kafka's deleteAllOffsets: forget ``group_id``'s offsets; return their tombstones, by partition."""
        committed = self.offsets.pop(group_id, {})
        return [records.offset_record(group_id, tp.topic, tp.partition, None) for tp in sorted(committed)]

    def replay(self, record: dict[str, Any]) -> None:
        """Apply one offset record read from the log (a tombstone removes the offset)."""
        gid = record["group"]
        value = record["value"]
        tp = TopicPartition(record["topic"], record["partition"])
        if "producer_id" in record:
            self.pending.setdefault(record["producer_id"], {}).setdefault(gid, {})[tp] = OffsetAndMetadata(
                **value
            )
            return
        if value is None:
            committed = self.offsets.get(gid, {})
            committed.pop(tp, None)
            if not committed:
                self.offsets.pop(gid, None)
            return
        if self.groups.group(gid) is None and gid not in self.consumer_groups:
            self.groups.create_group(gid)
        self.offsets.setdefault(gid, {})[tp] = OffsetAndMetadata(**value)

    def unload(self, group_ids: list[str]) -> None:
        """Forget the offsets of ``group_ids`` (their partition is no longer led here)."""
        for gid in group_ids:
            self.offsets.pop(gid, None)

    # ==========================================================================================
    # Expiry of committed offsets
    # ==========================================================================================
    def expire_offsets(self, group_ids: list[str]) -> int:
        """One retention check over ``group_ids``: write tombstones, return how many offsets expired."""
        now = self.context.now()
        retention = self.context.config.offsets_retention_minutes * 60_000
        expired_total = 0
        for gid in group_ids:
            if gid in self.consumer_groups:
                expired_total += self._expire_consumer_group_offsets(gid, now, retention)
                continue
            group = self.groups.group(gid)
            committed = self.offsets.get(gid)
            if group is None or not committed:
                if group is not None and group.state == EMPTY and not group.pending_members and not committed:
                    self.context.write(gid, [records.group_record(gid, None)], lambda error: None)
                    self._remove_group(gid)
                continue
            if group.protocol_type is not None and group.state != EMPTY:
                continue
            expired = []
            for tp, value in committed.items():
                if value.expire_ms is not None:
                    due = now >= value.expire_ms
                else:
                    base = group.state_timestamp_ms if group.protocol_type is not None else value.commit_ms
                    due = now - base >= retention
                if due:
                    expired.append(tp)
            if not expired:
                continue
            values = [records.offset_record(gid, tp.topic, tp.partition, None) for tp in sorted(expired)]
            for tp in expired:
                del committed[tp]
            expired_total += len(expired)
            self.context.emit(
                "group.offsets.expire", group=gid, partitions=[str(tp) for tp in sorted(expired)]
            )
            if not committed and group.state == EMPTY:
                values.append(records.group_record(gid, None))
                self.context.write(gid, values, lambda error: None)
                self._remove_group(gid)
            else:
                self.context.write(gid, values, lambda error: None)
        self.expired_offsets += expired_total
        return expired_total

    def delete_offsets(
        self, request: OffsetDeleteRequest, group: ClassicGroup | None, answer: Answer
    ) -> None:
        """Kafka's ``OffsetMetadataManager.deleteOffsets`` for a classic group (OffsetDelete, KIP-496).

        GROUP_ID_NOT_FOUND for a group that does not exist, NON_EMPTY_GROUP for a non-empty group
        not using the consumer protocol; a topic the members subscribe to keeps its offsets
        (GROUP_SUBSCRIBED_TO_TOPIC per partition); the other partitions' offsets are deleted (one
        write of their tombstones, whose error is theirs), an offset never committed included.
        """
        gid = request.group_id
        if group is None or group.state == DEAD:
            return answer(OffsetDeleteResponse(Errors.GROUP_ID_NOT_FOUND))
        if group.state != EMPTY and group.protocol_type != "consumer":
            return answer(OffsetDeleteResponse(Errors.NON_EMPTY_GROUP))
        subscribed: set[str] = set()
        if group.state != EMPTY and group.protocol_name is not None:
            for member in group.members.values():
                try:
                    subscribed.update(subscribed_topics(member.metadata(group.protocol_name)))
                except (KeyError, ValueError):
                    continue
        committed = self.offsets.get(gid, {})
        results: dict[TopicPartition, Errors] = {}
        deleted: list[TopicPartition] = []
        for tp in request.partitions:
            if tp.topic in subscribed:
                results[tp] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = Errors.NONE
                if tp in committed and tp not in deleted:
                    deleted.append(tp)

        def finish(error: Errors = Errors.NONE) -> None:
            written = write_error(error)
            parts = tuple(
                (tp, written if results[tp] is Errors.NONE and tp in deleted else results[tp])
                for tp in request.partitions
            )
            answer(OffsetDeleteResponse(Errors.NONE, parts))

        if not deleted:
            return finish()
        for tp in deleted:
            del committed[tp]
        if not committed:
            self.offsets.pop(gid, None)
        values = [records.offset_record(gid, tp.topic, tp.partition, None) for tp in sorted(deleted)]
        self.context.write(gid, values, finish)

    def _expire_consumer_group_offsets(self, group_id: str, now: int, retention: int) -> int:
        """A consumer group's retention check (Kafka's ConsumerGroup.offsetExpirationCondition): offsets
        of topics no member subscribes to expire ``offsets.retention.minutes`` after their commit; an
        empty group left without offsets is deleted."""
        group = self.consumer_groups[group_id]
        committed = self.offsets.get(group_id, {})
        subscribed = set(group.subscription_metadata) | {
            t for m in group.members.values() for t in m.subscribed_topic_names
        }
        expired = sorted(
            tp
            for tp, value in committed.items()
            if tp.topic not in subscribed
            and (
                now >= value.expire_ms if value.expire_ms is not None else now - value.commit_ms >= retention
            )
        )
        values = [records.offset_record(group_id, tp.topic, tp.partition, None) for tp in expired]
        for tp in expired:
            del committed[tp]
        if expired:
            self.context.emit("group.offsets.expire", group=group_id, partitions=[str(tp) for tp in expired])
        if not committed and not group.members:
            self.offsets.pop(group_id, None)
            values.append(self.consumer_group_manager.delete(group_id))
        if values:
            self.context.write(group_id, values, lambda error: None)
        return len(expired)

    def _remove_group(self, group_id: str) -> None:
        """An Empty group left without offsets is deleted, offsets and metadata."""
        self.offsets.pop(group_id, None)
        self.groups.remove_group(group_id)
