"""OffsetCommit, OffsetFetch, DeleteGroups and the expiry of committed offsets.

- OffsetCommit is validated as Kafka's ``ClassicGroup.validateOffsetCommit`` does
  (generation -1 on an Empty or missing group is an admin/simple commit, creating a
  group without protocol type); accepted offsets are appended to the group's
  ``__consumer_offsets`` partition as one acks=-1 write, a DelayedProduce in the
  broker's produce purgatory with ``offsets.commit.timeout.ms``, and answered (and
  applied) when it completes. A failed write answers as Kafka maps it:
  COORDINATOR_NOT_AVAILABLE (not enough replicas, timeout) or NOT_COORDINATOR.
- OffsetFetch reads the applied offsets; an unknown partition or group gives -1.
  ``require_stable`` has nothing to wait for: there are no transactional offsets.
- every ``offsets.retention.check.interval.ms`` the ``expire-offsets-<partition>``
  task removes offsets older than ``offsets.retention.minutes`` of Empty groups
  (counted from when the group became Empty) and of groups without a protocol type
  (from the commit), writing tombstones; an Empty group left without offsets is
  deleted. Kafka's expiry of unsubscribed topics in Stable consumer groups is not done.
"""

from __future__ import annotations

from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import records
from minibroker.coordinator.group.classic_base import ClassicBase, heartbeat_key, write_error
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
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchGroup,
    OffsetFetchResult,
)
from minibroker.coordinator.group.records import OffsetAndMetadata


class OffsetsManager(ClassicBase):
    """Mixin of ``GroupCoordinator``: committed offsets."""

    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]]

    def known(self, tp: TopicPartition) -> bool: ...
    def create_group(self, group_id: str) -> ClassicGroup: ...
    def partition_of(self, group_id: str) -> int: ...
    def schedule_heartbeat(self, group_id: str, member_id: str, timeout_ms: int) -> None: ...

    # --- OffsetCommit ------------------------------------------------------------------------
    def commit_offsets(self, request: OffsetCommitRequest, answer: Answer) -> None:
        gid = request.group_id
        error = self._validate_commit(request)
        if error is not None:
            return answer(self._commit_response(request, {}, error))
        group = self.groups.get(gid)
        if group is None:  # a simple commit: generation -1 on a missing group
            group = self.create_group(gid)
        member = group.members.get(request.member_id)
        accepted_in = group.generation_id  # the generation the commit was validated against
        if member is not None and group.state in (STABLE, PREPARING_REBALANCE):
            self.schedule_heartbeat(gid, member.member_id, member.session_timeout_ms)
        now = self.now()
        expire = None if request.retention_ms < 0 else now + request.retention_ms
        errors: dict[TopicPartition, Errors] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        limit = self.config.offset_metadata_max_bytes
        for commit in request.offsets:
            tp = TopicPartition(commit.topic, commit.partition)
            if not self.known(tp):
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif commit.metadata is not None and len(commit.metadata.encode()) > limit:
                errors[tp] = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = OffsetAndMetadata(
                    commit.offset, commit.leader_epoch, commit.metadata, now, expire
                )
        if not accepted:
            return answer(self._commit_response(request, errors))
        values = [records.offset_record(gid, tp.topic, tp.partition, value) for tp, value in accepted.items()]

        def done(write: Errors) -> None:
            if write is Errors.NONE:
                self.offsets.setdefault(gid, {}).update(accepted)
            for tp in accepted:
                errors[tp] = write_error(write)
            self.emit(
                "group.commit",
                group=gid,
                member=request.member_id,
                generation=request.generation_id,
                group_generation=accepted_in,
                error=write_error(write).name,
                offsets={str(tp): v.offset for tp, v in accepted.items()},
            )
            answer(self._commit_response(request, errors))

        self.write(gid, values, done)

    def _validate_commit(self, request: OffsetCommitRequest) -> Errors | None:
        """Kafka's validateOffsetCommit: the error of every partition, or None."""
        if not request.group_id:
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(request.group_id)
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

    @staticmethod
    def _commit_response(
        request: OffsetCommitRequest, errors: dict[TopicPartition, Errors], default: Errors = Errors.NONE
    ) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            tuple(
                (c.topic, c.partition, errors.get(TopicPartition(c.topic, c.partition), default))
                for c in request.offsets
            )
        )

    # --- OffsetFetch -------------------------------------------------------------------------
    def fetch_offsets(self, request: OffsetFetchGroup) -> OffsetFetchResult:
        gid = request.group_id
        if not gid:
            return OffsetFetchResult(gid, Errors.INVALID_GROUP_ID)
        committed = self.offsets.get(gid, {})
        if request.topics is None:
            wanted = sorted(committed)
        else:
            wanted = [TopicPartition(topic, p) for topic, partitions in request.topics for p in partitions]
        result = []
        for tp in wanted:
            value = committed.get(tp)
            if value is None:
                result.append(FetchedOffset(tp.topic, tp.partition))
            else:
                result.append(
                    FetchedOffset(tp.topic, tp.partition, value.offset, value.leader_epoch, value.metadata)
                )
        return OffsetFetchResult(gid, Errors.NONE, tuple(result))

    # --- DeleteGroups ------------------------------------------------------------------------
    def delete_groups(self, request: DeleteGroupsRequest, answer: Answer, refusal: Any) -> None:
        """Delete each Empty group; answer once, in request order, when every deletion is written.

        As Kafka's ``GroupCoordinatorShard.deleteGroups``: a group's error (INVALID_GROUP_ID,
        NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is its own;
        the deletable groups of one ``__consumer_offsets`` partition are one write of their tombstones,
        and that write's error is each of theirs. A group named twice is deleted once and both entries
        carry its result. Every write is counted before the first is issued: a write may complete
        inside ``write`` (an ISR of one), and the answer must wait for the others.
        """
        results: dict[str, Errors] = {}
        writes: dict[int, tuple[list[str], list[bytes]]] = {}
        for gid in dict.fromkeys(request.group_ids):
            error = self._delete_error(gid, refusal)
            if error is not None:
                results[gid] = error
                continue
            gids, values = writes.setdefault(self.partition_of(gid), ([], []))
            gids.append(gid)
            values += self._tombstones(gid)
            self.remove_group(gid)
        waiting = len(writes)

        def finish() -> None:
            answer(DeleteGroupsResponse(tuple((gid, results[gid]) for gid in request.group_ids)))

        for gids, values in writes.values():

            def done(error: Errors, gids: list[str] = gids) -> None:
                nonlocal waiting
                for gid in gids:
                    results[gid] = write_error(error)
                waiting -= 1
                if waiting == 0:
                    finish()

            self.write(gids[0], values, done)
        if not writes:
            finish()

    def _delete_error(self, gid: str, refusal: Any) -> Errors | None:
        if not gid:
            return Errors.INVALID_GROUP_ID
        refused = refusal(gid)
        if refused is not None:
            return refused
        group = self.groups.get(gid)
        if group is None or group.state == DEAD:
            return Errors.GROUP_ID_NOT_FOUND
        if group.state != EMPTY:
            return Errors.NON_EMPTY_GROUP
        return None

    def _tombstones(self, gid: str) -> list[bytes]:
        values = [
            records.offset_record(gid, tp.topic, tp.partition, None)
            for tp in sorted(self.offsets.get(gid, {}))
        ]
        values.append(records.group_record(gid, None))
        return values

    def remove_group(self, gid: str) -> None:
        group = self.groups.pop(gid, None)
        self.offsets.pop(gid, None)
        if group is not None:
            if group.state != DEAD:
                group.transition(DEAD, self.now())
            self.timer.cancel_all(f"join-{gid}")
            self.timer.cancel_all(f"sync-{gid}")
            for member_id in list(group.members) + list(group.pending_members):
                self.timer.cancel(heartbeat_key(gid, member_id))
            self.emit("group.state", group=gid, state=DEAD, generation=group.generation_id, reason="deleted")

    # --- expiry ------------------------------------------------------------------------------
    def expire_offsets(self, group_ids: list[str]) -> int:
        """One retention check over ``group_ids``: write tombstones, return how many offsets expired."""
        now = self.now()
        retention = self.config.offsets_retention_minutes * 60_000
        expired_total = 0
        for gid in group_ids:
            group = self.groups.get(gid)
            committed = self.offsets.get(gid)
            if group is None or not committed:
                if group is not None and group.state == EMPTY and not group.pending_members and not committed:
                    self.write(gid, [records.group_record(gid, None)], lambda error: None)
                    self.remove_group(gid)
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
            self.emit("group.offsets.expire", group=gid, partitions=[str(tp) for tp in sorted(expired)])
            if not committed and group.state == EMPTY:
                values.append(records.group_record(gid, None))
                self.write(gid, values, lambda error: None)
                self.remove_group(gid)
            else:
                self.write(gid, values, lambda error: None)
        return expired_total
