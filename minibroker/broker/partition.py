"""Partition: one broker's replica of a topic partition, with the leader's HW and ISR rules.

On the leader it keeps, per follower, a ``ReplicaState`` updated from each
follower fetch, and applies the rules of Kafka's ``Partition`` and ``Replica``
(https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/cluster/Partition.scala;
docs/kafka-model.md, "4. Replication: high watermark and ISR"):

- caught up: the follower's LEO equals the leader's, or it caught up within
  ``replica.lag.time.max.ms`` (``now - last_caught_up <= lag``);
- ``last_caught_up`` on a fetch at ``t`` of offset ``f`` with leader LEO ``L``:
  ``f >= L`` -> max(old, t); else ``f >=`` the leader LEO seen at the previous
  fetch -> max(old, previous fetch time); else unchanged;
- HW: never advanced while under min ISR (committed ISR smaller than
  ``min(min.insync.replicas, replicas)``; Kafka >= 3.7, KAFKA-15583; switch it off
  with ``minibroker.hw.freeze.under.min.isr=false`` to replay older Kafka, where a
  shrink below min ISR lets a waiting produce end NOT_ENOUGH_REPLICAS_AFTER_APPEND);
  otherwise the minimum LEO over the leader, the maximal ISR, and caught-up
  followers that are ISR-eligible (``isr_eligible``: the broker is neither fenced
  nor in controlled shutdown, KIP-841; a crashed follower out of the ISR never
  holds the HW, however recently it caught up); it only rises;
- shrink: ISR members (not the leader) that are *not* caught up, strictly
  ``now - last_caught_up > lag``, with LEO below the leader's; expand: a
  ISR-eligible follower outside the ISR whose LEO reached the HW and the start
  of the leader epoch. A change is proposed to the controller and stays *pending*
  (the maximal ISR is the union) until committed; no second change meanwhile.
- low watermark (DeleteRecords): the minimum log start offset over the leader and
  the followers on live (unfenced) brokers, as each last reported in a fetch; -1
  (unknown) for a follower that has not fetched since this broker became leader.

Errors are raised as ``PartitionError(Errors.X)``.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from minibroker.broker.log import Log, LogOffsetMetadata
from minibroker.broker.producer_state import ProducerStateError
from minibroker.common.errors import Errors
from minibroker.common.messages import HIGH_WATERMARK, LOG_END, TXN_COMMITTED, TopicPartition
from minibroker.common.record_batch import ProducerBatch, RecordBatch


class PartitionError(Exception):
    """A request on a partition failed with a Kafka error code."""

    def __init__(self, error: Errors, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error


#: "never caught up": Kafka resets to 0, which its wall clock puts decades ago; virtual time starts at 0
NEVER = -(2**62)


@attrs.define(slots=True)
class ReplicaState:
    """The leader's view of one follower."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = NEVER
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = NEVER
    #: the follower's log start offset as its last fetch said (-1: not known yet)
    log_start_offset: int = -1

    def update_fetch_state(self, fetch_offset: int, now_ms: int, leader_end_offset: int) -> None:
        # the caught-up time and the leader's end offset only grow (comparisons, not max(): every
        # partition of every follower fetch passes here)
        if fetch_offset >= leader_end_offset:
            if now_ms > self.last_caught_up_time_ms:
                self.last_caught_up_time_ms = now_ms
        elif (
            fetch_offset >= self.last_fetch_leader_log_end_offset
            and self.last_fetch_time_ms > self.last_caught_up_time_ms
        ):
            self.last_caught_up_time_ms = self.last_fetch_time_ms
        if leader_end_offset > self.last_fetch_leader_log_end_offset:
            self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms
        self.log_end_offset = fetch_offset

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_ms: int) -> bool:
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_time_ms <= lag_ms

    def reset(self, now_ms: int, in_isr: bool) -> None:
        """On becoming leader: LEO unknown; caught up now if in the ISR, else never."""
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_caught_up_time_ms = now_ms if in_isr else NEVER
        self.last_fetch_leader_log_end_offset = 0
        self.last_fetch_time_ms = NEVER


@attrs.frozen(slots=True)
class PendingIsrChange:
    kind: str  # "expand" or "shrink"
    proposed: tuple[int, ...]


class Partition:
    """A replica of ``tp`` on broker ``broker_id``; leader or follower."""

    def __init__(
        self,
        tp: TopicPartition,
        broker_id: int,
        replicas: tuple[int, ...],
        log: Log,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = 30_000,
        freeze_hw_under_min_isr: bool = True,
        isr_eligible: Callable[[int], bool] = lambda broker: True,
        broker_alive: Callable[[int], bool] = lambda broker: True,
    ) -> None:
        self.tp = tp
        self.broker_id = broker_id
        self.replicas = replicas
        self.log = log
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.freeze_hw_under_min_isr = freeze_hw_under_min_isr
        #: the metadata cache's answer: may this broker's replica be in the ISR (not fenced or shutting down)?
        self.isr_eligible = isr_eligible
        #: the metadata cache's answer: is this broker alive (registered and not fenced)?
        self.broker_alive = broker_alive
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.pending: PendingIsrChange | None = None
        self.remote: dict[int, ReplicaState] = {}
        self.leader_epoch_start_offset = 0

    # --- state -----------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus any pending addition (a pending shrink still counts the old ISR)."""
        if self.pending is None:
            return self.isr
        members = set(self.isr) | set(self.pending.proposed)
        return tuple(b for b in self.replicas if b in members)

    @property
    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # --- leadership ------------------------------------------------------------------------
    def make_leader(self, epoch: int, isr: tuple[int, ...], partition_epoch: int, now_ms: int) -> bool:
        """Become leader of ``epoch``; reset follower states; True if the HW rose."""
        self.leader_id = self.broker_id
        self.leader_epoch = epoch
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.pending = None
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.record_epoch_start(epoch)
        self.remote = {b: ReplicaState(b) for b in self.replicas if b != self.broker_id}
        for state in self.remote.values():
            state.reset(now_ms, state.broker_id in isr)
        return self.maybe_increment_leader_hw(now_ms)

    def update_replicas(self, replicas: tuple[int, ...], now_ms: int) -> None:
        """The controller changed the replicas (a reassignment): a leader tracks the added followers
        (not caught up, unless in the ISR) and forgets the removed ones."""
        self.replicas = replicas
        if not self.is_leader:
            return
        for broker in replicas:
            if broker != self.broker_id and broker not in self.remote:
                state = ReplicaState(broker)
                state.reset(now_ms, broker in self.isr)
                self.remote[broker] = state
        for broker in [b for b in self.remote if b not in replicas]:
            del self.remote[broker]

    def make_follower(self, leader: int, epoch: int, isr: tuple[int, ...], partition_epoch: int) -> None:
        self.leader_id = leader
        self.leader_epoch = epoch
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.pending = None
        self.remote = {}

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Kafka's epoch fencing: an older epoch is fenced, a newer one is unknown here."""
        if requested_epoch < 0:
            return
        if requested_epoch < self.leader_epoch:
            raise PartitionError(Errors.FENCED_LEADER_EPOCH)
        if requested_epoch > self.leader_epoch:
            raise PartitionError(Errors.UNKNOWN_LEADER_EPOCH)

    def require_leader(self) -> None:
        if not self.is_leader:
            raise PartitionError(Errors.NOT_LEADER_OR_FOLLOWER)

    # --- produce ---------------------------------------------------------------------------
    def append_records_to_leader(
        self,
        count: int,
        size: int,
        acks: int,
        now_ms: int,
        values: tuple[bytes, ...] | None = None,
        raw: bytes | None = None,
        producers: tuple[ProducerBatch, ...] = (),
    ) -> tuple[RecordBatch, bool, bool]:
        """Append as leader; return the batch, whether the HW rose, and whether it was a duplicate.

        An idempotent producer's retried batch (``producer_state``) is not appended: the batch
        returned then stands for the one already in the log (its offsets; no bytes).
        """
        if self.leader_id != self.broker_id:  # require_leader
            raise PartitionError(Errors.NOT_LEADER_OR_FOLLOWER)
        if acks == -1 and len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
            raise PartitionError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"ISR {list(self.isr)} is smaller than min.insync.replicas {self.effective_min_isr}",
            )
        if producers:
            try:
                duplicate = self.log.producer_state.check(producers)
            except ProducerStateError as refused:
                raise PartitionError(refused.error, str(refused)) from None
            if duplicate is not None:
                first, last = duplicate.first_offset, duplicate.last_offset
                return RecordBatch(first, last - first + 1, 0, self.leader_epoch, now_ms), False, True
        batch = self.log.append_as_leader(count, size, self.leader_epoch, now_ms, values, raw, producers)
        return batch, self.maybe_increment_leader_hw(now_ms), False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """DelayedProduce's question: has the HW reached ``required_offset``, and with enough ISR?"""
        if not self.is_leader:
            return False, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if self.effective_min_isr <= len(self.maximal_isr):
                return True, Errors.NONE
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, Errors.NONE

    # --- delete records --------------------------------------------------------------------
    def delete_records_on_leader(self, offset: int) -> int:
        """Move the leader's log start offset to ``offset`` (-1: the HW); return the offset asked for.

        OFFSET_OUT_OF_RANGE for an offset below -1 or above the HW (Kafka's
        ``maybeIncrementLogStartOffset``); an offset at or below the log start changes nothing.
        """
        self.require_leader()
        converted = self.log.high_watermark if offset == -1 else offset
        if converted < 0 or converted > self.log.high_watermark:
            raise PartitionError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside 0..the high watermark {self.log.high_watermark}",
            )
        self.log.maybe_increment_log_start_offset(converted)
        return converted

    def low_watermark(self) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the least log start offset over live replicas."""
        self.require_leader()
        low = self.log.log_start_offset
        for state in self.remote.values():
            if state.log_start_offset < low and self.broker_alive(state.broker_id):
                low = state.log_start_offset
        return low

    # --- high watermark --------------------------------------------------------------------
    def maybe_increment_leader_hw(self, now_ms: int) -> bool:
        # is_under_min_isr and maximal_isr inlined: every append and follower fetch passes here
        if self.freeze_hw_under_min_isr and len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
            return False
        leader_end = self.log.log_end_offset
        candidate = leader_end
        maximal = self.isr if self.pending is None else self.maximal_isr
        lag = self.replica_lag_time_max_ms
        for state in self.remote.values():
            if state.log_end_offset < candidate and (
                state.broker_id in maximal
                or (state.is_caught_up(leader_end, now_ms, lag) and self.isr_eligible(state.broker_id))
            ):
                candidate = state.log_end_offset
        if candidate < 0:
            return False
        return self.log.maybe_increment_high_watermark(candidate)

    # --- follower fetches ------------------------------------------------------------------
    def update_follower_fetch_state(
        self, follower: int, fetch_offset: int, now_ms: int, log_start_offset: int = 0, *, low: bool = False
    ) -> tuple[bool, bool]:
        """Record a follower fetch: (did the HW rise, did the low watermark rise).

        The low watermark is compared only with ``low`` (DeleteRecords are waiting: Kafka too
        computes it only then); otherwise the second answer is False.
        """
        state = self.remote.get(follower)
        if state is None:
            raise PartitionError(Errors.NOT_LEADER_OR_FOLLOWER, f"broker {follower} is not a replica")
        low_before = self.low_watermark() if low else 0
        previous = state.log_end_offset
        state.update_fetch_state(fetch_offset, now_ms, self.log.log_end_offset)
        state.log_start_offset = log_start_offset
        low_raised = low and self.low_watermark() > low_before
        if previous == state.log_end_offset:
            return False, low_raised
        return self.maybe_increment_leader_hw(now_ms), low_raised

    def isr_expansion_candidate(self, follower: int) -> tuple[int, ...] | None:
        """The ISR to propose if ``follower`` may join now, else None."""
        if self.pending is not None or follower in self.isr or not self.is_leader:
            return None
        if not self.isr_eligible(follower):
            return None
        state = self.remote.get(follower)
        if state is None:
            return None
        if (
            state.log_end_offset >= self.log.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        ):
            members = set(self.isr) | {follower}
            return tuple(b for b in self.replicas if b in members)
        return None

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        """ISR followers that are not caught up: LEO below the leader's and lagging strictly longer."""
        leader_end = self.log.log_end_offset
        lag = self.replica_lag_time_max_ms
        return [
            b
            for b in self.isr
            if b != self.broker_id
            and (state := self.remote.get(b)) is not None
            and state.log_end_offset != leader_end
            and now_ms - state.last_caught_up_time_ms > lag
        ]

    def isr_shrink_candidate(self, now_ms: int) -> tuple[int, ...] | None:
        if not self.is_leader or self.pending is not None:
            return None
        out = set(self.out_of_sync_replicas(now_ms))
        if not out:
            return None
        return tuple(b for b in self.isr if b not in out)

    def propose(self, kind: str, proposed: tuple[int, ...]) -> None:
        self.pending = PendingIsrChange(kind, proposed)

    def commit_isr(self, isr: tuple[int, ...], partition_epoch: int, now_ms: int) -> bool:
        """The controller committed an ISR; True if the HW rose."""
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending = None
        return self.maybe_increment_leader_hw(now_ms)

    # --- reads -----------------------------------------------------------------------------
    def end_offset_metadata(self, isolation: str) -> LogOffsetMetadata:
        """Where a fetch of this isolation may read up to (``max_offset``)."""
        return self.log.offset_metadata(self.max_offset(isolation))

    def max_offset(self, isolation: str) -> int:
        """The LEO for followers, the LSO for READ_COMMITTED, else the HW."""
        if isolation == LOG_END:
            return self.log.log_end_offset
        if isolation == TXN_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    def isolation_for(self, from_follower: bool, requested: str) -> str:
        return LOG_END if from_follower else (requested if requested != LOG_END else HIGH_WATERMARK)

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (
            f"Partition({self.tp}, broker {self.broker_id}, {role}, epoch {self.leader_epoch}, "
            f"isr={list(self.isr)}, hw={self.log.high_watermark}, leo={self.log.log_end_offset})"
        )
