"""The emulator's transactional producer: Kafka's ``KafkaProducer`` with a ``transactional.id`` and
its ``TransactionManager`` (KIP-98, KIP-447).

``cluster.transactional_producer(client_id, config)`` makes one (``transactional.id`` set). Its
operations are Kafka's: ``init_transactions``, ``begin_transaction``, ``send``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``, and ``crash`` (the
process dies: no EndTxn is sent). Each returns at once and runs in call order in a task of the
cluster's nursery; each but ``begin_transaction`` returns a ``ClientRequest`` completed when it ends:

- ``init_transactions`` (kind ``init_producer_id``): InitProducerId to the transactional id's
  coordinator, the leader of its ``__transaction_state`` partition; the answer is the producer id and
  epoch every later request carries;
- ``send`` (kind ``produce``): before the first record to a partition in a transaction,
  AddPartitionsToTxn, one for the new partitions of this send and of every send queued right
  behind it (Kafka's producer adds all partitions with records waiting in one request); then a
  transactional batch (producer id, epoch, sequence) to the leader. The produce carries the
  transactional id, as Kafka's producer's does, so the leader verifies the partition with the
  coordinator before the transaction's first batch there (KIP-890). A batch
  answered NOT_ENOUGH_REPLICAS (also a leader's answer when it could not verify), or
  OUT_OF_ORDER_SEQUENCE_NUMBER while a send of a lower sequence to its partition is unanswered, is
  sent again after ``retry.backoff.ms`` until ``delivery.timeout.ms`` from the call;
- ``send_offsets_to_transaction`` (kind ``send_offsets``): AddOffsetsToTxn (the group's
  ``__consumer_offsets`` partition joins the transaction), then TxnOffsetCommit to the group
  coordinator;
- ``commit_transaction`` / ``abort_transaction`` (kind ``end_txn``): wait for the transaction's
  sends, then EndTxn. A transaction that added no partition ends without a request, as Kafka's does.

Transaction protocol version 2 (KIP-890) with ``minibroker.transaction.version = 2`` (default 1):
Kafka's producer reads the brokers' finalized ``transaction.version`` feature (ApiVersions) and
speaks version 2 when it is 2; the emulated producer is told by this setting. Then ``send`` sends
no AddPartitionsToTxn: its produce (Produce v12) has the leader add the partition to the
transaction; EndTxn (v5) has the coordinator bump the epoch at the end, and the producer continues
with the producer id and epoch of its answer (sequences from 0 again).

Coordinator requests refused with NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS or CONCURRENT_TRANSACTIONS, or lost on the network, are sent again
after ``retry.backoff.ms`` (the coordinator is looked up again each time; a transaction's first
AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS after at most
``ADD_PARTITIONS_RETRY_BACKOFF_MS``, as Kafka's ``TransactionManager``), until ``max.block.ms``
from the call has passed (then REQUEST_TIMED_OUT, cause ``expiry``, at that instant at the latest).
PRODUCER_FENCED and INVALID_PRODUCER_EPOCH from the coordinator (and the other refusals) are fatal:
every later operation fails at once with that error. A failed send makes the transaction abortable,
and so does a send or ``send_offsets_to_transaction`` whose coordinator requests ran out of
``max.block.ms`` (an init that did can be called again; a commit or abort that did leaves the
producer committing or aborting, where sends and ``begin_transaction`` fail and only the same end
may be called again, as Kafka's ``TransactionManager`` allows): commit fails at once with the
send's error, abort is sent (INVALID_PRODUCER_EPOCH on a send is abortable, KIP-588, and so are a
verification's INVALID_TXN_STATE and TRANSACTION_ABORTABLE; the abort's EndTxn then learns whether
the producer was fenced); PRODUCER_FENCED and INVALID_PRODUCER_ID_MAPPING on a send are fatal.

Deviations from the Java client: the coordinator is read from the controller's state instead of
being asked with FindCoordinator key type 1 (as the emulator's other clients learn leaders), the
retry backoff is fixed (no exponential growth nor jitter: exact times), sends are retried only on
those two answers and not batched (one request per ``send``), and with transaction version 2
``send_offsets_to_transaction`` still sends AddOffsetsToTxn (Kafka's producer lets TxnOffsetCommit v5
add the group's partition). Kafka's producer keeps a timed-out TxnOffsetCommit queued ahead of the
EndTxn (a commit then includes the offsets or fails); the emulated one gives up on it and makes the
transaction abortable, so it, too, never commits the records without the offsets.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from minibroker.broker.config import ConfigError, ProducerConfig
from minibroker.clients.producer import Producer
from minibroker.clients.request import ClientContext, ClientRequest
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    ADD_PARTITION,
    GENERIC_ERROR_SUPPORTED,
    NetworkError,
    ProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from minibroker.common.record_batch import ProducerBatch
from minibroker.coordinator.group import OFFSETS_TOPIC, partition_for
from minibroker.coordinator.group import messages as groups
from minibroker.coordinator.transaction import messages as txn

# the client's transaction states (Kafka's TransactionManager.State)
UNINITIALIZED = "UNINITIALIZED"
INITIALIZING = "INITIALIZING"
READY = "READY"
IN_TRANSACTION = "IN_TRANSACTION"
COMMITTING = "COMMITTING_TRANSACTION"
ABORTING = "ABORTING_TRANSACTION"
ABORTABLE_ERROR = "ABORTABLE_ERROR"
FATAL_ERROR = "FATAL_ERROR"
#: the process died (``crash``): nothing more is sent
CRASHED = "CRASHED"

#: refusals a coordinator request is sent again after (the coordinator looked up again)
RETRIABLE = frozenset(
    {
        Errors.NOT_COORDINATOR,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.CONCURRENT_TRANSACTIONS,
        Errors.NETWORK_EXCEPTION,
        Errors.REQUEST_TIMED_OUT,
    }
)
#: TxnOffsetCommit also retries these (Kafka's TxnOffsetCommitHandler)
_RETRIABLE_OFFSETS = RETRIABLE | {Errors.UNKNOWN_TOPIC_OR_PARTITION}
#: refusals that leave the transaction abortable instead of the producer unusable
_ABORTABLE = frozenset(
    {
        Errors.ILLEGAL_GENERATION,
        Errors.UNKNOWN_MEMBER_ID,
        Errors.FENCED_INSTANCE_ID,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
)

#: a leader's answer to a transactional batch that the producer sends again after ``retry.backoff.ms``
#: (NOT_ENOUGH_REPLICAS is also what a leader answers when it could not verify the partition with the
#: transaction coordinator, KIP-890), until ``delivery.timeout.ms`` from the call
_RETRIABLE_PRODUCE = frozenset({Errors.NOT_ENOUGH_REPLICAS})
#: a leader's answers that make the producer unusable (Kafka's ``TransactionManager``); any other
#: failed send (INVALID_TXN_STATE, TRANSACTION_ABORTABLE, INVALID_PRODUCER_EPOCH, ...) is abortable
_FATAL_PRODUCE = frozenset({Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_ID_MAPPING})

_NONE = Errors.NONE.name

#: the backoff of a transaction's first AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS (the
#: previous transaction's markers are still being written), when ``retry.backoff.ms`` is longer
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20

Work = Callable[[ClientRequest], Awaitable[None]]


class TransactionalProducer(Producer):
    """A producer whose sends belong to transactions of ``config.transactional_id``."""

    def __init__(self, cluster: ClientContext, client_id: str, config: ProducerConfig) -> None:
        if not config.transactional_id:
            raise ConfigError(f"producer {client_id}: a transactional producer needs a transactional.id")
        if config.acks != -1:
            raise ConfigError(f"producer {client_id}: a transactional producer needs acks = all")
        super().__init__(cluster, client_id, config)
        self.transactional_id = config.transactional_id
        #: the transaction protocol version spoken (``minibroker.transaction.version``, KIP-890)
        self.transaction_version = config.transaction_version
        self.state = UNINITIALIZED
        self.producer_id = -1
        self.epoch = -1
        #: partitions added to the open transaction (``__consumer_offsets`` ones by send_offsets)
        self.partitions: set[TopicPartition] = set()
        #: the error that made the transaction abortable or the producer unusable
        self.error: Errors | None = None
        #: every error a coordinator answered and each retried send's (api Produce): (ms, api, error)
        self.errors: list[tuple[int, str, str]] = []
        self._sequences: dict[TopicPartition, int] = {}
        self._sends: list[ClientRequest] = []
        #: each send's ProduceRequest, sent again as it was on a retriable answer
        self._batches: dict[str, ProduceRequest] = {}
        #: sends waiting out ``retry.backoff.ms`` before they go again (in the client, not on the network)
        self._backing_off: dict[ClientRequest, None] = {}  # in the order they were answered
        self._queue: collections.deque[tuple[ClientRequest | None, Work]] = collections.deque()
        self._current: ClientRequest | None = None
        self._scope: trio.CancelScope | None = None

    # --- the application's calls ---------------------------------------------------------------
    def init_transactions(self, name: str | None = None) -> ClientRequest:
        """InitProducerId: fence earlier producers of the id and get this one's producer id and epoch."""
        request = self._operation("init_producer_id", (), name, {"txn": self.transactional_id})
        return self._enqueue(request, self._init)

    def begin_transaction(self) -> None:
        """Start a transaction (local: the coordinator hears of it with the first AddPartitionsToTxn).

        It takes effect after the calls before it; refused (the producer not ready), it is recorded
        in ``errors`` and the sends that follow fail."""
        self._emit("client.txn.begin")
        self._enqueue(None, self._begin)

    def send(  # type: ignore[override]
        self, topic: str, partition: int = 0, count: int = 1, size: int = 100, name: str | None = None
    ) -> ClientRequest:
        """Send ``count`` records of ``size`` bytes in all to one partition, in the open transaction."""
        tp = self._topic_partition(topic, partition)
        # _operation for a send: the request goes to the partition's leader
        request = self._new_request("produce", self.cluster.leader_of(tp), self._singleton(tp), name, False)
        self._trace(
            "client.produce",
            request,
            lambda: {
                "keys": [str(tp)],
                "acks": self.config.acks,
                "records": count,
                "txn": self.transactional_id,
            },
        )
        return self._enqueue(request, lambda request: self._send_records(request, tp, count, size))

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_id: str, name: str | None = None
    ) -> ClientRequest:
        """Commit ``offsets`` for ``group_id`` with the transaction (AddOffsetsToTxn, TxnOffsetCommit)."""
        wanted = dict(sorted(offsets.items()))
        fields = {"txn": self.transactional_id, "group": group_id}
        request = self._operation("send_offsets", tuple(wanted), name, fields)
        return self._enqueue(request, lambda request: self._send_offsets(request, wanted, group_id))

    def commit_transaction(self, name: str | None = None) -> ClientRequest:
        return self._end(True, name)

    def abort_transaction(self, name: str | None = None) -> ClientRequest:
        return self._end(False, name)

    def produce(
        self, data: Mapping[TopicPartition, ProduceData], name: str | None = None
    ) -> list[ClientRequest]:
        raise TypeError(f"producer {self.client_id} is transactional: send records with send()")

    def crash(self) -> None:
        """The producer's process dies: no more requests, its open transaction is left to time out.

        Operations not yet done end with NETWORK_EXCEPTION (cause ``network``), sends waiting out
        their retry backoff included; sends already on the network still reach their leaders.
        """
        if self.state == CRASHED:
            return
        self._emit("client.txn.crash", state=self.state)
        self.state = CRASHED
        if self._scope is not None:
            self._scope.cancel()
        pending = [self._current, *(request for request, _ in self._queue), *self._backing_off]
        self._queue.clear()
        self._backing_off.clear()
        for request in pending:
            if request is not None and not request.completed:
                self._fail_all(request, Errors.NETWORK_EXCEPTION, "network")

    # --- the operations, one at a time ---------------------------------------------------------
    def _end(self, commit: bool, name: str | None) -> ClientRequest:
        fields = {"txn": self.transactional_id, "commit": commit}
        request = self._operation("end_txn", (), name, fields)
        return self._enqueue(request, lambda request: self._end_txn(request, commit))

    def _operation(
        self, kind: str, tps: tuple[TopicPartition, ...], name: str | None, fields: dict[str, Any]
    ) -> ClientRequest:
        """A request record for a coordinator operation, with the coordinator it would go to now
        (``send`` makes its own, to the partition's leader); ``broker`` becomes the one it is sent to."""
        request = self._new_request(kind, self._coordinator(), tps, name, False)
        self._trace(f"client.{kind}", request, lambda: {"keys": self._keys(request), **fields})
        return request

    def _keys(self, request: ClientRequest) -> list[str]:
        return [str(tp) for tp in request.partitions] or [self.transactional_id]

    def _enqueue(self, request: ClientRequest | None, work: Work) -> Any:
        if self.state == CRASHED:
            if request is not None:
                self._fail_all(request, Errors.NETWORK_EXCEPTION, "network")
            return request
        self._queue.append((request, work))
        if self._scope is None:
            self._scope = trio.CancelScope()
            self.cluster.nursery.start_soon(self._drain, self._scope)
        return request

    async def _drain(self, scope: trio.CancelScope) -> None:
        with scope:
            while self._queue:
                request, work = self._queue.popleft()
                self._current = request
                if request is None or self.state != FATAL_ERROR or self._usable(request):
                    await work(request)  # type: ignore[arg-type]
                self._current = None
        if self._scope is scope:
            self._scope = None

    def _usable(self, request: ClientRequest) -> bool:
        """False (the request failed at once) when the producer can no longer send anything."""
        if self.state == FATAL_ERROR:
            self._fail(request, self.error or Errors.UNKNOWN_SERVER_ERROR, "immediate")
            return False
        return True

    def _fail(self, request: ClientRequest, error: Errors, cause: str) -> None:
        if not request.completed:
            self._fail_all(request, error, cause)

    def _fail_all(self, request: ClientRequest, error: Errors, cause: str) -> None:
        if request.partitions:
            super()._fail_all(request, error, cause)
        else:
            request.errors[self.transactional_id] = error.name
            self._finish(request, cause)

    async def _init(self, request: ClientRequest) -> None:
        if self.state not in (UNINITIALIZED, READY):
            return self._fail(request, Errors.INVALID_TXN_STATE, "immediate")
        self.state = INITIALIZING
        message = txn.InitProducerIdRequest(
            self.transactional_id, self.config.transaction_timeout_ms, self.producer_id, self.epoch
        )
        answer = await self._call(request, "InitProducerId", self._coordinator, lambda: message, RETRIABLE)
        if isinstance(answer, txn.InitProducerIdResponse) and answer.error is Errors.NONE:
            self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
            self._sequences.clear()
            self.state = READY
            request.errors[self.transactional_id] = Errors.NONE.name
            return self._finish(request, "immediate")
        self._end_in(request, self._error_of(answer), fatal=True)

    async def _begin(self, request: None) -> None:
        if self.state != READY:
            error = self.error or Errors.INVALID_TXN_STATE
            self.errors.append((self.cluster.now(), "BeginTransaction", error.name))
            return
        self.state = IN_TRANSACTION
        self.partitions = set()
        self._sends = []
        self._batches = {}

    def _in_transaction(self, request: ClientRequest) -> bool:
        """True when sends may join the open transaction; else the request fails at once."""
        if self.state == IN_TRANSACTION:
            return True
        self._fail(request, self.error or Errors.INVALID_TXN_STATE, "immediate")
        return False

    async def _add_partitions(self, request: ClientRequest, tps: list[TopicPartition], api: str) -> bool:
        """AddPartitionsToTxn (AddOffsetsToTxn for a group's partition) for the ``tps`` not added yet."""
        new = [tp for tp in dict.fromkeys(tps) if tp not in self.partitions]
        if not new:
            return True
        message = txn.AddPartitionsToTxnRequest(
            self.transactional_id,
            self.producer_id,
            self.epoch,
            tuple((tp.topic, tp.partition) for tp in new),
            transaction_version=self.transaction_version,
        )
        answer = await self._call(request, api, self._coordinator, lambda: message, RETRIABLE)
        error = self._error_of(answer)
        if error is not Errors.NONE:
            self._end_in(request, error, fatal=error not in _ABORTABLE)
            return False
        self.partitions.update(new)
        return True

    def _queued_send_partitions(self) -> list[TopicPartition]:
        """The partitions of the sends queued right behind the current one (up to the first other
        operation): Kafka's producer adds every partition with records waiting in one
        AddPartitionsToTxn (``TransactionManager``'s ``newPartitionsInTransaction``)."""
        found: list[TopicPartition] = []
        for queued, _ in self._queue:
            if queued is None or queued.kind != "produce":
                break
            found.extend(queued.partitions)
        return found

    async def _send_records(self, request: ClientRequest, tp: TopicPartition, count: int, size: int) -> None:
        if self.state != IN_TRANSACTION and not self._in_transaction(request):
            return
        if self.transaction_version >= 2:
            self.partitions.add(tp)  # the produce adds it: its leader asks the coordinator (KIP-890)
        elif tp not in self.partitions and not await self._add_partitions(
            request, [tp, *self._queued_send_partitions()], "AddPartitionsToTxn"
        ):
            return
        request.broker = self.cluster.leader_of(tp)
        if request.broker < 0:
            self._become_abortable(Errors.LEADER_NOT_AVAILABLE)
            return self._fail(request, Errors.LEADER_NOT_AVAILABLE, "immediate")
        config = self.config
        first = self._sequences.get(tp, 0)
        self._sequences[tp] = first + count
        batch = ProducerBatch(self.producer_id, self.epoch, first, first + count - 1, 0, count - 1, True)
        message = ProduceRequest(
            config.acks,
            config.request_timeout_ms,
            {tp: ProduceData(count, size, None, None, (batch,))},
            request.id,
            self.transactional_id,
            # Produce v11 (its leader answers TRANSACTION_ABORTABLE for a partition not in the
            # transaction), v12+ with transaction version 2 (its leader adds the partition)
            ADD_PARTITION if self.transaction_version >= 2 else GENERIC_ERROR_SUPPORTED,
        )
        self._sends.append(request)
        self._batches[request.id] = message
        self._send(request, message, config.request_timeout_ms, config.response_grace_ms)

    def _on_response(self, request: ClientRequest, response: Any) -> None:
        if isinstance(response, ProduceResponse) and self._retry_produce(request, response):
            return
        super()._on_response(request, response)
        failed = [Errors[name] for name in request.errors.values() if name != _NONE]
        if failed and request in self._sends:
            fatal = [error for error in failed if error in _FATAL_PRODUCE]
            if fatal:
                self._become_fatal(fatal[0])
            else:
                self._become_abortable(failed[0])

    def _retry_produce(self, request: ClientRequest, response: ProduceResponse) -> bool:
        """True when the batch is sent again ``retry.backoff.ms`` later (a retriable answer, time left)."""
        ((tp, part),) = response.partitions.items()
        if part.error not in _RETRIABLE_PRODUCE and not self._behind_earlier_send(request, tp, part.error):
            return False
        config = self.config
        resend_at = self.cluster.now() + config.retry_backoff_ms
        if self.state == CRASHED or resend_at >= request.created_ms + config.delivery_timeout_ms:
            return False
        self._trace(
            "client.txn.retry",
            request,
            lambda: {"api": "Produce", "error": part.error.name, "backoff_ms": config.retry_backoff_ms},
        )
        self.errors.append((self.cluster.now(), "Produce", part.error.name))

        async def resend() -> None:
            await self.cluster.clock.sleep_until(resend_at)
            self._backing_off.pop(request, None)
            if self.state == CRASHED or request.completed:
                return
            request.broker = self.cluster.leader_of(tp)
            if request.broker < 0:
                self._become_abortable(Errors.LEADER_NOT_AVAILABLE)
                return self._fail(request, Errors.LEADER_NOT_AVAILABLE, "immediate")
            message = self._batches[request.id]
            self._send(request, message, config.request_timeout_ms, config.response_grace_ms)

        self._backing_off[request] = None
        self.cluster.nursery.start_soon(resend)
        return True

    def _behind_earlier_send(self, request: ClientRequest, tp: TopicPartition, error: Errors) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch while a send of a lower sequence to the same
        partition is still unanswered or being retried: the leader took this one first (Kafka's
        ``TransactionManager.canRetry``: not the next sequence, so sent again after the earlier one)."""
        if error is not Errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return False
        mine = self._batches[request.id]
        ((batch,),) = (data.producers for data in mine.data.values())
        for sent in self._sends:
            if sent is request or sent.completed:
                continue
            other = self._batches.get(sent.id)
            data = other.data.get(tp) if other is not None else None
            if data is not None and any(
                b.epoch == batch.epoch and b.first_seq < batch.first_seq for b in data.producers
            ):
                return True
        return False

    async def _send_offsets(
        self, request: ClientRequest, offsets: dict[TopicPartition, int], group_id: str
    ) -> None:
        if not self._in_transaction(request):
            return
        spec = self.cluster.ensure_offsets_topic()
        group_tp = TopicPartition(OFFSETS_TOPIC, partition_for(group_id, spec.partitions))
        if not await self._add_partitions(request, [group_tp], "AddOffsetsToTxn"):
            return
        message = groups.TxnOffsetCommitRequest(
            group_id,
            self.producer_id,
            self.epoch,
            tuple(groups.CommitOffset(tp.topic, tp.partition, offset) for tp, offset in offsets.items()),
        )
        answer = await self._call(
            request,
            "TxnOffsetCommit",
            lambda: self.cluster.coordinator_for(group_id),
            lambda: message,
            _RETRIABLE_OFFSETS,
        )
        error = self._error_of(answer)
        if error is not Errors.NONE:
            return self._end_in(request, error, fatal=error not in _ABORTABLE)
        for tp in request.partitions:
            request.errors[str(tp)] = Errors.NONE.name
        self._finish(request, "immediate")

    async def _end_txn(self, request: ClientRequest, commit: bool) -> None:
        if self.state == ABORTABLE_ERROR and commit:
            return self._fail(request, self.error or Errors.INVALID_TXN_STATE, "immediate")
        again = self.state == (COMMITTING if commit else ABORTING)  # the same end, after it timed out
        if self.state not in (IN_TRANSACTION, ABORTABLE_ERROR) and not again:
            return self._fail(request, self.error or Errors.INVALID_TXN_STATE, "immediate")
        self.state = COMMITTING if commit else ABORTING
        for sent in list(self._sends):
            await sent.wait()
        if commit and self.state == ABORTABLE_ERROR:  # a send failed meanwhile
            return self._fail(request, self.error or Errors.INVALID_TXN_STATE, "immediate")
        if self.state == FATAL_ERROR:
            return self._fail(request, self.error or Errors.PRODUCER_FENCED, "immediate")
        if self.partitions:
            message = txn.EndTxnRequest(
                self.transactional_id, self.producer_id, self.epoch, commit, self.transaction_version
            )
            answer = await self._call(request, "EndTxn", self._coordinator, lambda: message, RETRIABLE)
            error = self._error_of(answer)
            if error is not Errors.NONE:
                return self._end_in(request, error, fatal=True)
            if self.transaction_version >= 2 and answer.producer_id >= 0:
                # the coordinator bumped the epoch at the end (KIP-890): the next transaction uses it
                self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
                self._sequences.clear()
        self.state = READY
        self.error = None
        self.partitions = set()
        self._sends = []
        self._batches = {}
        request.errors[self.transactional_id] = Errors.NONE.name
        self._finish(request, "immediate")

    # --- coordinator requests ------------------------------------------------------------------
    def _coordinator(self) -> int:
        return self.cluster.transaction_coordinator_for(self.transactional_id)

    async def _call(
        self,
        request: ClientRequest,
        api: str,
        find: Callable[[], int],
        make: Callable[[], Any],
        retriable: frozenset[Errors],
    ) -> Any:
        """Send to the coordinator ``find`` names until it answers other than ``retriable``, or
        ``max.block.ms`` from the call has passed (then REQUEST_TIMED_OUT); return its answer or error."""
        config = self.config
        deadline = request.created_ms + config.max_block_ms
        while True:
            broker = find()
            if broker < 0:
                answer: Any = Errors.COORDINATOR_NOT_AVAILABLE
            else:
                request.broker = broker
                # an answer is awaited until max.block.ms from the call at the latest
                wait = min(
                    config.request_timeout_ms + config.response_grace_ms, deadline - self.cluster.now()
                )
                answer = await self.cluster.network.call(self.client_id, broker, make(), max(wait, 1))
            error = self._error_of(answer)
            if error is not Errors.NONE:
                self.errors.append((self.cluster.now(), api, error.name))
            if error not in retriable:
                return answer
            backoff = config.retry_backoff_ms
            if (
                api == "AddPartitionsToTxn"
                and error is Errors.CONCURRENT_TRANSACTIONS
                and not self.partitions
            ):
                # the previous transaction is still completing: retry sooner (Kafka's TransactionManager)
                backoff = min(backoff, ADD_PARTITIONS_RETRY_BACKOFF_MS)
            if self.cluster.now() + backoff > deadline:
                return Errors.REQUEST_TIMED_OUT
            self._trace(
                "client.txn.retry",
                request,
                lambda error=error, backoff=backoff: {"api": api, "error": error.name, "backoff_ms": backoff},
            )
            await self.cluster.clock.sleep_until(self.cluster.now() + backoff)

    @staticmethod
    def _error_of(answer: Any) -> Errors:
        if isinstance(answer, Errors):
            return answer
        if isinstance(answer, NetworkError):
            return answer.error
        if isinstance(answer, groups.OffsetCommitResponse):
            failed = [error for _, _, error in answer.partitions if error is not Errors.NONE]
            return failed[0] if failed else Errors.NONE
        return answer.error

    def _end_in(self, request: ClientRequest, error: Errors, fatal: bool) -> None:
        """The operation failed with ``error``: the producer becomes unusable or its transaction abortable.
        After ``max.block.ms`` (REQUEST_TIMED_OUT) an init is where it was before the call, to call
        again; an end stays committing (aborting), as Kafka's ``TransactionManager`` does: only the same
        end may be called again; a send or ``send_offsets_to_transaction`` leaves the transaction
        abortable: what it carried is not in the transaction, which must not commit without it."""
        if error is Errors.REQUEST_TIMED_OUT:
            if self.state == INITIALIZING:
                self.state = READY if self.producer_id >= 0 else UNINITIALIZED
            elif self.state not in (COMMITTING, ABORTING):
                self._become_abortable(error)
            # an end stays COMMITTING / ABORTING: its EndTxn may have reached the coordinator, so
            # only the same end may be called again (sends and begin fail meanwhile)
            return self._fail(request, error, "expiry")
        if fatal:
            self._become_fatal(error)
        else:
            self._become_abortable(error)
        self._fail(request, error, "immediate")

    def _become_abortable(self, error: Errors) -> None:
        if self.state in (IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR):
            if self.state != ABORTING:
                self.state = ABORTABLE_ERROR
            self.error = self.error or error
            self._emit("client.txn.error", error=error.name, fatal=False)

    def _become_fatal(self, error: Errors) -> None:
        if self.state != FATAL_ERROR:
            self.state = FATAL_ERROR
            self.error = error
            self._emit("client.txn.error", error=error.name, fatal=True)

    def _emit(self, kind: str, **fields: Any) -> None:
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(kind, client=self.client_id, txn=self.transactional_id, **fields)
