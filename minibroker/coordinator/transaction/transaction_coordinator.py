"""The transaction coordinator of one broker: Kafka's ``TransactionCoordinator`` (KIP-98).

It owns the transactional ids of the ``__transaction_state`` partitions its broker leads
(``partition_for``), answers InitProducerId, AddPartitionsToTxn (AddOffsetsToTxn arrives as
the group's ``__consumer_offsets`` partition) and EndTxn, and drives each transaction through
``transaction_metadata``'s states. Every change is first written, acks=-1, to the id's
``__transaction_state`` partition through the produce purgatory, and applied when the ISR has
it (a failed write leaves the state as it was and answers ``write_error``'s code). While a
change is in flight the id answers CONCURRENT_TRANSACTIONS.

EndTxn: PrepareCommit/PrepareAbort is written, the producer is answered, then the markers
(``TransactionMarkerChannelManager``'s job): one acks=-1 Produce of a control batch per
partition to each partition's leader over the emulated network, retried every
``MARKER_RETRY_BACKOFF_MS`` while a leader is missing or refuses; when every partition has its
marker, CompleteCommit/CompleteAbort is written.

InitProducerId: a new id gets a fresh producer id at epoch 0; an existing one has its epoch
bumped (a new producer id when the epoch is exhausted). An open transaction is aborted with
a bumped epoch first, which fences the old producer: its writes and EndTxn meet the higher
epoch (INVALID_PRODUCER_EPOCH on Produce, PRODUCER_FENCED here), and the new one is answered
CONCURRENT_TRANSACTIONS until the abort completes (it retries).

Expiry: every ``transaction.remove.expired.transaction.cleanup.interval.ms`` an id idle for
``transactional.id.expiration.ms`` in Empty or Complete* is forgotten, by a tombstone.

Timeouts: every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` a task on the
broker's SystemTimer aborts, with an epoch bump, each Ongoing transaction whose start plus
its timeout lies before now (Kafka's ``abortTimedOutTransactions``, strictly before). The
task is armed when the broker first leads a ``__transaction_state`` partition.

Operators (the control API): ``marker_hold`` holds a partition's markers back for a while (they
are sent when it ends), as a marker channel stuck on an unreachable leader would.

Failover: a broker that becomes leader of a ``__transaction_state`` partition reads its
records (the last one per id wins) and finishes the markers of every Prepare* transaction
(Kafka's ``TransactionStateManager.loadTransactionsForTxnTopicPartition``). The read takes
``minibroker.coordinator.load.ms.per.record`` per record, as the group coordinator's; its ids
answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. It reads to the log end, as Kafka does, so an id's
last record may lie above the HW (``uncommitted``): a record the next leader may never have.
Whatever would let data be appended on the strength of it (a verification, an AddPartitionsToTxn
whose partitions are already in, a Prepare* transaction's markers) waits in the produce purgatory
until the HW passes it (``_held``; a ``txn.wait`` event), as it would follow that record's acks=-1
write in steady state; NOT_COORDINATOR if the partition moves away meanwhile. Deviations: producer
ids come from a per-broker block instead of the controller's; the wait above (Kafka answers from
the loaded state at once).

KIP-890: with transaction protocol version 2 (EndTxn v5+) every EndTxn bumps the epoch at
PrepareCommit/PrepareAbort, the markers carry the bumped epoch (which fences a late write of the
old one on each partition) and the client is answered the producer id and epoch to continue with;
a retried EndTxn with the epoch before the bump gets the same answer. A verify-only
AddPartitionsToTxn (a partition leader's, before a transaction's first batch there) answers per
partition whether it is in the open transaction, adding nothing; a partition leader serving a
Produce v12+ sends a plain one, which adds the partition as a client's would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError, ProduceData, ProduceRequest, TopicPartition
from minibroker.common.record_batch import ABORT_MARKER, COMMIT_MARKER, ProducerBatch, build_control_batch
from minibroker.coordinator.group.coordinator_context import write_error
from minibroker.coordinator.transaction import messages as m
from minibroker.coordinator.transaction.transaction_context import (
    TRANSACTION_STATE_TOPIC,
    TransactionContext,
)
from minibroker.coordinator.transaction.transaction_metadata import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    VALID_PREVIOUS,
    TransactionMetadata,
)
from minibroker.coordinator.transaction.views import TransactionCoordinatorView, TransactionView, abort_time

#: how long the coordinator waits before sending a marker again to a partition that refused it
MARKER_RETRY_BACKOFF_MS = 100

Respond = Callable[[Any], None]


def marker_data(
    producer_id: int, epoch: int, committed: bool, coordinator_epoch: int, now_ms: int
) -> ProduceData:
    """One partition's transaction marker as a leader appends it: a control batch of one record."""
    marker = COMMIT_MARKER if committed else ABORT_MARKER
    raw = build_control_batch(producer_id, epoch, marker, coordinator_epoch, now_ms)
    producers = (ProducerBatch(producer_id, epoch, -1, -1, 0, 0, True, marker, coordinator_epoch),)
    return ProduceData(1, len(raw), raw=raw, producers=producers)


#: TransactionMetadata's fields, copied from a written transition onto the id's metadata
_FIELDS = tuple(field.name for field in attrs.fields(TransactionMetadata))


class TransactionCoordinator:
    """Transactional id -> ``TransactionMetadata`` for the ``__transaction_state`` partitions led here."""

    def __init__(self, context: TransactionContext) -> None:
        self.context = context
        self.transactions: dict[str, TransactionMetadata] = {}
        #: __transaction_state partition led here -> its leader epoch (Kafka's coordinator epoch)
        self.led: dict[int, int] = {}
        #: __transaction_state partition being read -> its leader epoch and the task that ends the read
        self.loading: dict[int, tuple[int, Any]] = {}
        #: transactional id -> partitions still waiting for their marker
        self.markers: dict[str, set[TopicPartition]] = {}
        #: transactional id -> the offset of its loaded record while the HW has not passed it
        self.uncommitted: dict[str, int] = {}
        #: ms a partition's marker is held back from now (0: send it); set by the control API
        self.marker_hold: Callable[[TopicPartition], int] = lambda tp: 0
        self._cleanup: Any = None
        #: when the armed timeout check runs (-1 before the first ``__transaction_state`` leadership)
        self.next_check_ms = -1

    # --- requests ----------------------------------------------------------------------------
    def handle(self, message: m.TxnRequest, respond: Respond) -> None:
        if isinstance(message, m.InitProducerIdRequest):
            self._init_producer_id(message, respond)
        elif isinstance(message, m.AddPartitionsToTxnRequest):
            self._add_partitions(message, respond)
        elif isinstance(message, m.EndTxnRequest):
            self._end_txn(message, respond)
        elif isinstance(message, m.DescribeTransactionsRequest):
            respond(
                m.DescribeTransactionsResponse(tuple(self._describe(t) for t in message.transactional_ids))
            )
        elif isinstance(message, m.ListTransactionsRequest):
            respond(self._list(message))
        else:
            raise TypeError(f"the transaction coordinator cannot handle {type(message).__name__}")

    def _not_here(self, transactional_id: str) -> Errors | None:
        """NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when this broker cannot answer for the id now."""
        partition = self.context.partition_of(transactional_id)
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        return None if partition in self.led else Errors.NOT_COORDINATOR

    def _describe(self, txn_id: str) -> m.DescribedTransaction:
        """DescribeTransactions (KIP-664) for one id: its state, or why it cannot be described here."""
        refused = self._not_here(txn_id)
        if refused is not None:
            return m.DescribedTransaction(txn_id, refused)
        meta = self.transactions.get(txn_id)
        if meta is None:
            return m.DescribedTransaction(txn_id, Errors.TRANSACTIONAL_ID_NOT_FOUND)
        return m.DescribedTransaction(
            txn_id,
            Errors.NONE,
            meta.state,
            meta.timeout_ms,
            meta.start_ms,
            meta.producer_id,
            meta.producer_epoch,
            tuple(sorted(meta.partitions)),
        )

    def _list(self, request: m.ListTransactionsRequest) -> m.ListTransactionsResponse:
        """ListTransactions (KIP-664): the ids coordinated here that pass every filter given."""
        if self.loading:
            return m.ListTransactionsResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        known = set(VALID_PREVIOUS)
        unknown = tuple(s for s in request.states if s not in known)
        now = self.context.now()
        listed = []
        for txn_id, meta in sorted(self.transactions.items()):
            if request.states and meta.state not in request.states:
                continue
            if request.producer_ids and meta.producer_id not in request.producer_ids:
                continue
            if request.duration_ms >= 0 and (meta.start_ms < 0 or now - meta.start_ms < request.duration_ms):
                continue
            listed.append((txn_id, meta.producer_id, meta.state))
        return m.ListTransactionsResponse(Errors.NONE, unknown, tuple(listed))

    def _init_producer_id(self, request: m.InitProducerIdRequest, respond: Respond) -> None:
        def fail(error: Errors) -> None:
            respond(m.InitProducerIdResponse(error))

        txn_id = request.transactional_id
        if not 0 < request.timeout_ms <= self.context.config.transaction_max_timeout_ms:
            return fail(Errors.INVALID_TRANSACTION_TIMEOUT)
        refused = self._not_here(txn_id)
        if refused is not None:
            return fail(refused)
        now = self.context.now()
        meta = self.transactions.get(txn_id)
        if meta is None:
            meta = TransactionMetadata(
                txn_id, self.context.next_producer_id(), -1, request.timeout_ms, EMPTY, update_ms=now
            )
            self.transactions[txn_id] = meta
        if meta.pending is not None or meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
            return fail(Errors.CONCURRENT_TRANSACTIONS)
        given = (request.producer_id, request.producer_epoch)
        if request.producer_id >= 0 and given != (meta.producer_id, meta.producer_epoch):
            if given == (meta.last_producer_id, meta.last_producer_epoch) and meta.state == EMPTY:
                # a retry of the request that bumped the epoch (KIP-360): the same answer again
                return respond(m.InitProducerIdResponse(Errors.NONE, meta.producer_id, meta.producer_epoch))
            return fail(Errors.PRODUCER_FENCED)
        if meta.state == ONGOING:
            # fence the producer of the open transaction: abort it with a bumped epoch; the caller retries
            busy = Errors.CONCURRENT_TRANSACTIONS
            return self._prepare_end(meta, False, lambda error: fail(error or busy), bump=True, fence=True)
        pid, epoch = meta.producer_id, meta.producer_epoch + 1
        last_pid, last_epoch = meta.producer_id, meta.producer_epoch
        if epoch > MAX_EPOCH:
            pid, epoch = self.context.next_producer_id(), 0
        transit = attrs.evolve(
            meta,
            producer_id=pid,
            producer_epoch=epoch,
            last_producer_id=last_pid,
            last_producer_epoch=last_epoch,
            timeout_ms=request.timeout_ms,
            state=EMPTY,
            partitions=set(),
            start_ms=-1,
            update_ms=now,
        )

        def done(error: Errors) -> None:
            if error is not Errors.NONE:
                return fail(error)
            respond(m.InitProducerIdResponse(Errors.NONE, pid, epoch))

        self._write(meta, transit, done)

    def _check_producer(self, txn_id: str, producer_id: int, epoch: int) -> TransactionMetadata | Errors:
        refused = self._not_here(txn_id)
        if refused is not None:
            return refused
        meta = self.transactions.get(txn_id)
        if meta is None or meta.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return Errors.PRODUCER_FENCED
        return meta

    def _add_partitions(self, request: m.AddPartitionsToTxnRequest, respond: Respond) -> None:
        found = self._check_producer(request.transactional_id, request.producer_id, request.producer_epoch)
        if isinstance(found, Errors):
            return respond(m.TxnResponse(found))
        meta = found
        wanted = set(request.partitions)
        # answers that let a leader append without a write of their own (a refusal does not wait)
        confirms = meta.state == ONGOING and (
            not wanted.isdisjoint(meta.partitions)
            if request.verify_only
            else meta.pending is None and wanted <= meta.partitions
        )
        if confirms and self._held(
            meta, lambda: self._add_partitions(request, respond), lambda error: respond(m.TxnResponse(error))
        ):
            return
        if request.verify_only:
            # Kafka's handleVerifyPartitionsInTransaction: a partition not in the open transaction is
            # TRANSACTION_ABORTABLE (its leader translates that for older clients). A state change in
            # flight does not matter here (Kafka does not check it: partitions enter the metadata when
            # their AddPartitionsToTxn is written), so concurrent sends are not refused meanwhile.
            errors = tuple(
                (
                    tp,
                    Errors.NONE
                    if meta.state == ONGOING and tp in meta.partitions
                    else Errors.TRANSACTION_ABORTABLE,
                )
                for tp in request.partitions
            )
            return respond(m.TxnResponse(Errors.NONE, errors))
        if meta.pending is not None or meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
            return respond(m.TxnResponse(Errors.CONCURRENT_TRANSACTIONS))
        if meta.state == ONGOING and wanted <= meta.partitions:
            return respond(m.TxnResponse(Errors.NONE))
        now = self.context.now()
        ongoing = meta.state == ONGOING
        transit = attrs.evolve(
            meta,
            state=ONGOING,
            partitions=meta.partitions | wanted,
            start_ms=meta.start_ms if ongoing else now,
            update_ms=now,
            transaction_version=(
                max(meta.transaction_version, request.transaction_version)
                if ongoing
                else request.transaction_version
            ),
        )
        self._write(meta, transit, lambda error: respond(m.TxnResponse(error)))

    def _held(
        self, meta: TransactionMetadata, again: Callable[[], Any], fail: Callable[[Errors], Any]
    ) -> bool:
        """Whether what lets data be appended (a verification, the partitions already added, the
        markers) must wait: the id's state was loaded from a record the HW has not passed yet. Then it
        waits in the produce purgatory until the HW passes it and ``again()`` runs; ``fail(error)``
        instead when the partition moves away meanwhile (NOT_COORDINATOR) or after
        ``request.timeout.ms`` (COORDINATOR_NOT_AVAILABLE)."""
        txn_id = meta.transactional_id
        offset = self.uncommitted.get(txn_id)
        if offset is None:
            return False
        partition = self.context.partition_of(txn_id)
        hw = self.context.high_watermark(partition)
        if hw > offset:
            del self.uncommitted[txn_id]
            return False
        self.context.emit("txn.wait", txn=txn_id, partition=partition, offset=offset, hw=hw)

        def committed(error: Errors) -> None:
            if self.transactions.get(txn_id) is not meta:
                return fail(Errors.NOT_COORDINATOR)
            if self.context.high_watermark(partition) <= offset:
                return fail(write_error(error))
            self.uncommitted.pop(txn_id, None)
            again()

        self.context.when_committed(partition, offset, committed)
        return True

    def _end_txn(self, request: m.EndTxnRequest, respond: Respond) -> None:
        tv2 = request.transaction_version >= 2
        found = self._check_producer(request.transactional_id, request.producer_id, request.producer_epoch)
        meta = self.transactions.get(request.transactional_id)
        # transaction version 2: a retry of the EndTxn that bumped the epoch comes with the epoch before it
        retried = (
            tv2
            and found is Errors.PRODUCER_FENCED
            and meta is not None
            and meta.transaction_version >= 2
            and request.producer_epoch + 1 == meta.producer_epoch
            and meta.state in (PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)
        )
        if isinstance(found, Errors) and not retried:
            return respond(m.TxnResponse(found))
        assert meta is not None
        commit = request.committed

        def answer(error: Errors) -> None:
            if tv2 and error is Errors.NONE:  # the client continues with the bumped epoch
                return respond(
                    m.TxnResponse(error, producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
                )
            respond(m.TxnResponse(error))

        if meta.pending is not None:
            return respond(m.TxnResponse(Errors.CONCURRENT_TRANSACTIONS))
        state = meta.state
        if state == ONGOING and not retried:
            meta.transaction_version = request.transaction_version
            return self._prepare_end(meta, commit, answer, bump=tv2, fence=False)
        if state in (COMPLETE_COMMIT, COMPLETE_ABORT):  # a retried EndTxn: the same outcome is fine
            same = (state == COMPLETE_COMMIT) == commit
            return answer(Errors.NONE if same else Errors.INVALID_TXN_STATE)
        if state in (PREPARE_COMMIT, PREPARE_ABORT):
            same = (state == PREPARE_COMMIT) == commit
            error = Errors.CONCURRENT_TRANSACTIONS if same else Errors.INVALID_TXN_STATE
            return respond(m.TxnResponse(error))
        respond(m.TxnResponse(Errors.INVALID_TXN_STATE))  # Empty, PrepareEpochFence

    # --- ending a transaction ----------------------------------------------------------------
    def _prepare_end(
        self,
        meta: TransactionMetadata,
        commit: bool,
        on_done: Callable[[Errors], Any],
        *,
        bump: bool,
        fence: bool,
    ) -> None:
        """Write PrepareCommit/PrepareAbort, with the epoch bumped for a fencing abort (``fence``) and
        for every end with transaction version 2; then send the markers (they carry that epoch)."""
        epoch = meta.producer_epoch
        before = meta.state
        if bump and epoch < MAX_EPOCH:
            if fence:
                meta.state = PREPARE_EPOCH_FENCE  # in memory only, as Kafka's prepareFenceProducerEpoch
            epoch += 1
        transit = attrs.evolve(
            meta,
            state=PREPARE_COMMIT if commit else PREPARE_ABORT,
            producer_epoch=epoch,
            update_ms=self.context.now(),
        )

        def done(error: Errors) -> None:
            if error is not Errors.NONE:
                if meta.state == PREPARE_EPOCH_FENCE:
                    meta.state = ONGOING
                return on_done(error)
            on_done(Errors.NONE)
            self._send_markers(meta)

        self.context.emit(
            "txn.end", txn=meta.transactional_id, state=transit.state, fenced=fence, previous=before
        )
        self._write(meta, transit, done)

    def _send_markers(self, meta: TransactionMetadata) -> None:
        remaining = {TopicPartition(topic, p) for topic, p in meta.partitions}
        self.markers[meta.transactional_id] = remaining
        self._send_markers_to(meta, remaining, sorted(remaining))

    def _send_markers_to(
        self, meta: TransactionMetadata, remaining: set[TopicPartition], tps: list[TopicPartition]
    ) -> None:
        """Send the marker to the leaders of ``tps``; ``remaining`` is this round's set of partitions
        still without it (a response to an earlier round finds another set and is ignored)."""
        txn_id = meta.transactional_id
        if self.markers.get(txn_id) is not remaining or self.transactions.get(txn_id) is not meta:
            return  # no longer coordinated here, or already completed
        by_leader: dict[int, list[TopicPartition]] = {}
        later: list[TopicPartition] = []
        held: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            if not self.context.known(tp):
                remaining.discard(tp)  # a deleted topic gets no marker
                continue
            hold_ms = self.marker_hold(tp)
            if hold_ms > 0:
                held.setdefault(hold_ms, []).append(tp)
                continue
            leader = self.context.leader_of(tp)
            if leader < 0:
                later.append(tp)
            else:
                by_leader.setdefault(leader, []).append(tp)
        if not remaining:
            return self._complete(meta)
        committed = meta.state == PREPARE_COMMIT
        marker = COMMIT_MARKER if committed else ABORT_MARKER
        coordinator_epoch = self.led.get(self.context.partition_of(txn_id), 0)
        one = marker_data(
            meta.producer_id, meta.producer_epoch, committed, coordinator_epoch, self.context.now()
        )
        timeout = self.context.config.request_timeout_ms
        for leader, sent in by_leader.items():
            data = dict.fromkeys(sent, one)
            request = ProduceRequest(-1, timeout, data, self.context.next_request_id("txn-marker"))
            self.context.emit(
                "txn.markers", txn=txn_id, leader=leader, partitions=[str(tp) for tp in sent], marker=marker
            )
            self.context.send(
                leader,
                request,
                timeout,
                lambda response, sent=sent: self._on_markers(meta, remaining, sent, response),
            )
        if later:
            self._retry_markers(meta, remaining, later)
        for hold_ms, waiting in held.items():
            self.context.schedule(
                hold_ms, lambda waiting=waiting: self._send_markers_to(meta, remaining, waiting)
            )

    def _retry_markers(
        self, meta: TransactionMetadata, remaining: set[TopicPartition], tps: list[TopicPartition]
    ) -> None:
        self.context.schedule(MARKER_RETRY_BACKOFF_MS, lambda: self._send_markers_to(meta, remaining, tps))

    def _on_markers(
        self,
        meta: TransactionMetadata,
        remaining: set[TopicPartition],
        sent: list[TopicPartition],
        response: Any,
    ) -> None:
        txn_id = meta.transactional_id
        if self.markers.get(txn_id) is not remaining or self.transactions.get(txn_id) is not meta:
            return
        failed = []
        for tp in sent:
            error = (
                Errors.NETWORK_EXCEPTION
                if isinstance(response, NetworkError)
                else response.partitions[tp].error
            )
            if error is Errors.TRANSACTION_COORDINATOR_FENCED:
                # a newer coordinator wrote this producer's marker there: this one is stale and stops
                # (Kafka's marker handler drops the transaction; the new coordinator completes it)
                self.markers.pop(txn_id, None)
                self.context.emit("txn.markers.fenced", txn=txn_id, partition=str(tp))
                return
            # INVALID_PRODUCER_EPOCH: the partition has a newer epoch of the producer, a newer marker
            if error in (Errors.NONE, Errors.INVALID_PRODUCER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION):
                remaining.discard(tp)
            else:
                failed.append(tp)
        if not remaining:
            self._complete(meta)
        elif failed:
            self._retry_markers(meta, remaining, failed)

    def _complete(self, meta: TransactionMetadata) -> None:
        """Every marker is written: CompleteCommit/CompleteAbort (retried while the write fails)."""
        if meta.pending is not None:
            return
        self.markers.pop(meta.transactional_id, None)
        state = COMPLETE_COMMIT if meta.state == PREPARE_COMMIT else COMPLETE_ABORT
        transit = attrs.evolve(meta, state=state, partitions=set(), start_ms=-1, update_ms=self.context.now())

        def done(error: Errors) -> None:
            if error is not Errors.NONE and error is not Errors.NOT_COORDINATOR:
                self.context.schedule(MARKER_RETRY_BACKOFF_MS, lambda: self._complete(meta))

        self._write(meta, transit, done)

    # --- writes ------------------------------------------------------------------------------
    def _write(self, meta: TransactionMetadata, transit: TransactionMetadata, on_done: Respond) -> None:
        """Write ``transit`` to the id's partition; apply it to ``meta`` once the ISR has it."""
        assert meta.state in VALID_PREVIOUS[transit.state], f"{meta.state} -> {transit.state}"
        txn_id = meta.transactional_id
        partition = self.context.partition_of(txn_id)
        meta.pending = transit.state
        transit.pending = None

        def written(error: Errors) -> None:
            meta.pending = None
            if self.transactions.get(txn_id) is not meta:
                return on_done(Errors.NOT_COORDINATOR)  # the partition moved away meanwhile
            error = write_error(error)
            if error is Errors.NONE:
                self.uncommitted.pop(txn_id, None)  # the HW passed this record, so every one before it
                for name in _FIELDS:
                    setattr(meta, name, getattr(transit, name))
                self.context.emit(
                    "txn.state",
                    txn=txn_id,
                    state=meta.state,
                    producer_id=meta.producer_id,
                    epoch=meta.producer_epoch,
                    partitions=len(meta.partitions),
                )
            elif meta.producer_epoch < 0:
                del self.transactions[txn_id]  # a new id whose first write failed is not kept
            on_done(error)

        self.context.write(partition, transit.record(self.context.origin_ms), written)

    def snapshot(self) -> TransactionCoordinatorView:
        """The partitions led and loading, the next timeout check, every id with its abort time."""
        interval = self.context.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        views = []
        for txn_id, meta in sorted(self.transactions.items()):
            ongoing = meta.state == ONGOING and meta.start_ms >= 0
            views.append(
                TransactionView(
                    txn_id,
                    meta.state,
                    meta.pending,
                    meta.producer_id,
                    meta.producer_epoch,
                    tuple(sorted(f"{topic}-{partition}" for topic, partition in meta.partitions)),
                    meta.timeout_ms,
                    meta.start_ms if ongoing else -1,
                    abort_time(meta.start_ms, meta.timeout_ms, self.next_check_ms, interval)
                    if ongoing
                    else -1,
                )
            )
        return TransactionCoordinatorView(
            tuple(sorted(self.led)), tuple(sorted(self.loading)), self.next_check_ms, interval, tuple(views)
        )

    # --- leadership and timeouts -------------------------------------------------------------
    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        """Become or stop being the coordinator of a ``__transaction_state`` partition's ids."""
        if tp.topic != TRANSACTION_STATE_TOPIC:
            return
        partition = tp.partition
        if not leader:
            reading = self.loading.pop(partition, None)
            if reading is not None:
                reading[1].cancel()
            if self.led.pop(partition, None) is not None:
                for txn_id in [t for t in self.transactions if self.context.partition_of(t) == partition]:
                    del self.transactions[txn_id]
                    self.markers.pop(txn_id, None)
                    self.uncommitted.pop(txn_id, None)
            return
        if partition in self.led or partition in self.loading:
            return  # still the leader (a new leader epoch): the state in memory is current
        values = self.context.state_records(partition)
        delay = len(values) * self.context.config.coordinator_load_ms_per_record
        self.context.emit("txn.load.start", partition=partition, records=len(values), load_ms=delay)
        if delay <= 0:
            self._load(partition, epoch, values)
        else:
            task = self.context.schedule(delay, lambda: self._load(partition, epoch, values))
            self.loading[partition] = (epoch, task)
        if self._cleanup is None:
            self._arm_cleanup()

    def _load(self, partition: int, epoch: int, values: list[tuple[int, bytes]]) -> None:
        """The partition is read to its end: serve its ids and finish the markers of their Prepare*
        transactions. An id whose last record the HW has not passed yet is ``uncommitted`` (``_held``)."""
        self.loading.pop(partition, None)
        self.led[partition] = epoch
        loaded: dict[str, TransactionMetadata] = {}
        offsets: dict[str, int] = {}
        for offset, value in values:
            try:
                meta = TransactionMetadata.from_record(value, self.context.origin_ms)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not a record the coordinator wrote
            if isinstance(meta, str):
                loaded.pop(meta, None)  # a tombstone: the id expired
            else:
                loaded[meta.transactional_id] = meta
                offsets[meta.transactional_id] = offset
        self.transactions.update(loaded)
        hw = self.context.high_watermark(partition)
        self.uncommitted.update((txn_id, offsets[txn_id]) for txn_id in loaded if offsets[txn_id] >= hw)
        self.context.emit("txn.load", partition=partition, transactions=len(loaded))
        for meta in loaded.values():
            if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._send_loaded_markers(meta)

    def _send_loaded_markers(self, meta: TransactionMetadata) -> None:
        """The markers of a loaded Prepare* transaction, once the HW has passed its record (as they
        follow the acks=-1 write of PrepareCommit/PrepareAbort otherwise); waiting again after a timeout."""

        def failed(error: Errors) -> None:
            if error is not Errors.NOT_COORDINATOR:
                self._send_loaded_markers(meta)

        if not self._held(meta, lambda: self._send_markers(meta), failed):
            self._send_markers(meta)

    def _arm_cleanup(self) -> None:
        config = self.context.config
        interval = config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        self._cleanup = self.context.schedule(interval, self._abort_timed_out)
        self.next_check_ms = self.context.now() + interval
        self._arm_expiry(config.transaction_remove_expired_transaction_cleanup_interval_ms)

    def _arm_expiry(self, interval: int) -> None:
        self.context.schedule(interval, lambda: (self._remove_expired(), self._arm_expiry(interval)))

    def _remove_expired(self) -> None:
        """Kafka's ``removeExpiredTransactionalIds``: forget ids idle ``transactional.id.expiration.ms``
        in Empty or Complete*, each by a tombstone written acks=-1 (kept if the write fails)."""
        now = self.context.now()
        expiration = self.context.config.transactional_id_expiration_ms
        for meta in sorted(self.transactions.values(), key=lambda t: t.transactional_id):
            idle = meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and meta.pending is None
            if not idle or meta.update_ms > now - expiration:
                continue
            meta.pending = DEAD
            txn_id = meta.transactional_id

            def removed(error: Errors, meta: TransactionMetadata = meta, txn_id: str = txn_id) -> None:
                meta.pending = None
                if error is Errors.NONE and self.transactions.get(txn_id) is meta:
                    del self.transactions[txn_id]
                    self.uncommitted.pop(txn_id, None)
                    self.context.emit("txn.expire", txn=txn_id, producer_id=meta.producer_id)

            self.context.write(self.context.partition_of(txn_id), meta.tombstone(), removed)

    def _abort_timed_out(self) -> None:
        """Kafka's ``abortTimedOutTransactions``: fence and abort every expired Ongoing transaction."""
        now = self.context.now()
        for meta in sorted(self.transactions.values(), key=lambda t: t.transactional_id):
            if meta.state == ONGOING and meta.pending is None and meta.start_ms + meta.timeout_ms < now:
                self.context.emit("txn.timeout", txn=meta.transactional_id, started=meta.start_ms)
                self._prepare_end(meta, False, lambda error: None, bump=True, fence=True)
        self._arm_cleanup()
