"""Control: act on a running ``serve`` from any thread, at once; the one facade tests and HTTP share.

Every method runs its work inside the server's trio run (``trio.from_thread``)
and returns when it is done, so the next line of a test already sees the
effect: a crashed broker refuses connections, a moved leader answers, a pushed
error is queued. Bad arguments raise ``ValueError`` with a one-line reason
(``ConfigError`` is one); the cluster is left as it was.

Actions are applied one at a time, in the order they reach the server's trio
run: each holds one lock there for its whole effect (a restart's awaits
included), so a crash sent while the same broker restarts takes effect after
the restart, and both answer.

Brokers are numbered 0..n-1. A link is two different nodes of the emulated
network: broker ids or ``"controller"`` (a node has no link to itself), dropped
both ways or one way. Client links (every connection of every Kafka client to a
broker) are set per broker: ``set_client_latency``, librdkafka's
``rd_kafka_mock_broker_set_rtt`` counterpart (here the latency is each way), and
``drop_client_links`` / ``heal_client_links`` (a partition between the clients and
that broker's listener).

Transactions: ``transactions`` / ``transaction`` read the coordinators' state;
``abort_transaction`` aborts an open one and fences its producer as Kafka's
``Admin.forceTerminateTransaction`` does (an InitProducerId to the id's coordinator);
``delay_markers`` holds the markers of any transaction ending meanwhile (to one partition
or all); ``crash_transaction_coordinator`` / ``move_transaction_coordinator`` act on the
leader of the id's ``__transaction_state`` partition.

Consumer protocol groups (KIP-848): ``consumer_group`` reads one group's epochs and its members'
epochs and assignments; ``fence_group_member`` fences a member as its session timeout would.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import trio

from minibroker.common.errors import ErrorCode, Errors
from minibroker.common.messages import TopicPartition
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.group.messages import partition_names
from minibroker.coordinator.share.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupOffsetsResponse,
)
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC, partition_for
from minibroker.coordinator.transaction.messages import InitProducerIdRequest
from minibroker.coordinator.transaction.transaction_metadata import ONGOING, VALID_PREVIOUS
from minibroker.server.codec import SUPPORTED
from minibroker.server.error_responses import PER_PARTITION, kind, pushable
from minibroker.server.fetch_sessions import session_figures
from minibroker.server.serve import Served
from minibroker.sim.share_view import expire_locks, share_partitions

#: how long ``abort_transaction`` retries its InitProducerId (each a write to ``__transaction_state``)
ABORT_WAIT_S = 35.0
#: the pause between its attempts (Kafka's admin client ``retry.backoff.ms``)
RETRY_BACKOFF_S = 0.1
#: InitProducerId answers after which the admin client tries again
_RETRIED = {Errors.CONCURRENT_TRANSACTIONS, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.NOT_COORDINATOR}


def _api_kind(api: str | int) -> str:
    """The queue name (``list_offsets``) of an API given by key (2), name (``ListOffsets``) or queue name."""
    wanted = str(api).strip().lower().replace("_", "")
    for key in sorted(SUPPORTED):
        if wanted in (str(key), SUPPORTED[key].name.lower()) and pushable(key):
            return kind(key)
    names = ", ".join(f"{SUPPORTED[k].name} ({k})" for k in sorted(SUPPORTED) if pushable(k))
    raise ValueError(f"api {api!r}: errors can be pushed for {names}")


def _protocol_errors() -> dict[str, int]:
    """Every error of Kafka's protocol by name: kafka-python's table, with Kafka's own names (and the
    aliases minibroker knows, e.g. RECORD_TOO_LARGE) from ``Errors``."""
    import kafka.errors as kafka_errors

    table = {
        cls.message: cls.errno
        for cls in vars(kafka_errors).values()
        if isinstance(cls, type) and issubclass(cls, kafka_errors.BrokerResponseError) and cls.errno
    }
    table.pop("UNKNOWN", None)
    return {**table, **{name: int(e) for name, e in Errors.__members__.items() if e is not Errors.NONE}}


def parse_error(error: str | int) -> Errors | ErrorCode:
    """A Kafka error by any of its names (``NOT_LEADER_OR_FOLLOWER``, ``MESSAGE_TOO_LARGE``) or its code (6).

    Any code of Kafka's protocol, on any API: one the emulator models is an ``Errors``, another an
    ``ErrorCode`` carrying Kafka's name (what a trace and a log line show).
    """
    table = _protocol_errors()
    text = str(error).strip().upper()
    code: int | None = None
    if isinstance(error, int) or text.lstrip("-").isdigit():
        if int(error) in table.values():
            code = int(error)
    elif text in table:
        code = table[text]
    if code is None:
        known = ", ".join(sorted(table, key=table.__getitem__))
        raise ValueError(f"error {error!r}: expected one of {known} (or its code)")
    if code in Errors._value2member_map_:
        return Errors(code)
    return ErrorCode(code, next(name for name, value in table.items() if value == code))


class Control:
    """Thread-safe actions and read-outs on ``served``, whose trio run has ``token``."""

    def __init__(self, served: Served, token: trio.lowlevel.TrioToken) -> None:
        self.served = served
        self._token = token
        self._acting = trio.Lock()
        #: partition (None: every partition) -> cluster time until which its markers are held
        self._marker_holds: dict[TopicPartition | None, int] = {}

    # --- plumbing ------------------------------------------------------------------------------
    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def _act(self, fn: Callable[..., Any], *args: Any) -> None:
        """Apply ``fn`` (sync or async) in the trio run, after every action that arrived before it."""

        async def in_turn() -> None:
            async with self._acting:
                result = fn(*args)
                if inspect.isawaitable(result):
                    await result

        trio.from_thread.run(in_turn, trio_token=self._token)

    @property
    def bootstrap_servers(self) -> str:
        return self.served.bootstrap_servers

    @property
    def brokers(self) -> int:
        return len(self.served.cluster.brokers)

    def _broker(self, broker: Any) -> int:
        if isinstance(broker, bool) or not isinstance(broker, int) or not 0 <= broker < self.brokers:
            raise ValueError(f"broker {broker!r}: expected a broker id 0..{self.brokers - 1}")
        return broker

    def _node(self, node: Any) -> Any:
        return CONTROLLER if node == "controller" else self._broker(node)

    def _link(self, a: Any, b: Any) -> tuple[Any, Any]:
        a, b = self._node(a), self._node(b)
        if a == b:
            node = "the controller" if a == CONTROLLER else f"broker {a}"
            raise ValueError(f"link {a!r}-{b!r}: {node} has no link to itself; name two different nodes")
        return a, b

    def _partition(self, topic: Any, partition: Any) -> TopicPartition:
        tp = TopicPartition(str(topic), partition if isinstance(partition, int) else -1)
        if not self._run(self.served.cluster.known, tp):
            raise ValueError(f"partition {topic!r} {partition!r}: no such topic partition")
        return tp

    @staticmethod
    def _millis(value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 3_600_000:
            raise ValueError(f"{what} {value!r}: expected whole milliseconds 0..3600000")
        return value

    # --- actions -------------------------------------------------------------------------------
    def pause_fetcher(self, broker: int) -> None:
        """The follower ``broker`` stops fetching from its leaders (it falls out of the ISR in time)."""
        self._act(self.served.cluster.pause_fetcher, self._broker(broker))

    def resume_fetcher(self, broker: int) -> None:
        self._act(self.served.cluster.resume_fetcher, self._broker(broker))

    def set_client_latency(self, broker: int, latency_ms: int) -> None:
        """Every client connection to ``broker`` (open now or later) takes ``latency_ms`` each way."""
        state = self.served.server.state
        self._act(state.set_client_latency, self._broker(broker), self._millis(latency_ms, "latency"))

    def set_link_latency(self, a: int | str, b: int | str, latency_ms: int) -> None:
        """The link between two brokers (or a broker and ``"controller"``), both ways."""
        self._act(self.served.cluster.set_latency, *self._link(a, b), self._millis(latency_ms, "latency"))

    def drop_link(self, a: int | str, b: int | str, one_way: bool = False) -> None:
        """Lose every message on the link, in flight or later, until ``heal_link``: both ways, or with
        ``one_way`` only those from ``a`` to ``b`` (``b``'s messages to ``a`` still arrive).

        Dropping a broker's messages to ``"controller"`` stops its heartbeats: the controller fences
        it at its last heartbeat's arrival + ``broker.session.timeout.ms`` and moves its leadership away.
        """
        self._act(self.served.cluster.drop_link, *self._link(a, b), self._one_way(one_way))

    def heal_link(self, a: int | str, b: int | str, one_way: bool = False) -> None:
        """Stop losing messages on the link: both ways, or with ``one_way`` only from ``a`` to ``b``."""
        self._act(self.served.cluster.heal_link, *self._link(a, b), self._one_way(one_way))

    @staticmethod
    def _one_way(one_way: Any) -> bool:
        if not isinstance(one_way, bool):
            raise ValueError(f"one_way {one_way!r}: expected true or false")
        return one_way

    def drop_client_links(self, broker: int) -> None:
        """Partition every Kafka client from ``broker``'s listener until ``heal_client_links``.

        As a network partition looks to a client: its connections (open now or made meanwhile: the
        operating system still accepts them) stop answering. Nothing sent either way is processed or
        delivered; requests wait (as TCP's retransmissions would) and are answered after the heal if
        the client is still there, or the client times out (``request.timeout.ms``) and reconnects.
        The brokers' links to each other and to the controller are not affected.
        """
        self._act(self.served.server.state.drop_client_links, self._broker(broker))

    def heal_client_links(self, broker: int) -> None:
        """End ``drop_client_links``: held requests are processed in order and answered."""
        self._act(self.served.server.state.heal_client_links, self._broker(broker))

    def crash(self, broker: int) -> None:
        """Kill ``broker`` (its listener and connections close; the controller fails its partitions over)."""
        self._act(self.served.cluster.crash, self._broker(broker))

    def restart(self, broker: int) -> None:
        """Start a crashed or shut-down ``broker`` again (nothing if it is up)."""
        broker = self._broker(broker)
        self._act(self.served.cluster.restart, broker)

    def shutdown(self, broker: int) -> None:
        """Controlled shutdown: leadership moves off ``broker`` first, then it stops."""
        self._act(self.served.cluster.shutdown, self._broker(broker))

    def move_leader(self, topic: str, partition: int, broker: int) -> None:
        """Elect ``broker`` (alive, in the ISR) leader of the partition now."""
        tp = self._partition(topic, partition)
        self._act(self.served.cluster.move_leader, tp, self._broker(broker))

    def set_config(self, settings: Mapping[str, Any], broker: int | None = None) -> None:
        """Change broker settings by Kafka's names on ``broker`` (None: every broker)."""
        if not isinstance(settings, Mapping) or not settings:
            raise ValueError(f"settings {settings!r}: expected a non-empty mapping of Kafka config names")
        brokers = range(self.brokers) if broker is None else [self._broker(broker)]
        for broker_id in brokers:
            self._act(self.served.cluster.set_broker_config, broker_id, dict(settings))

    def push_errors(
        self,
        api: str | int,
        errors: Iterable[str | int],
        broker: int,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """The next ``len(errors)`` ``api`` requests on ``broker`` fail, one error each.

        ``api``: any API the broker answers, by key (2), name (``ListOffsets``) or snake name
        (``list_offsets``). ``errors``: any of Kafka's, by code or name. The request has no effect and
        is answered in its API's shape.
        With ``topic`` and ``partition`` (Produce, Fetch, Metadata, ListOffsets,
        OffsetForLeaderEpoch, OffsetFetch, OffsetCommit, DeleteRecords): only that partition's part
        of the requests fails, once per request that names it; nothing is written for it.
        """
        api_kind = _api_kind(api)
        if isinstance(errors, str | int):
            errors = [errors]
        parsed = [parse_error(error) for error in errors]
        if not parsed:
            raise ValueError("errors: expected at least one error")
        broker = self._broker(broker)
        if (topic is None) != (partition is None):
            raise ValueError("topic and partition: give both (one partition) or neither (whole requests)")
        if topic is not None and api_kind not in PER_PARTITION:
            raise ValueError(f"api {api!r}: its errors are per request; push without topic and partition")
        tp = self._partition(topic, partition) if topic is not None else None

        def push() -> None:
            manager = self.served.cluster.brokers[broker].replica_manager
            if manager is None:
                raise ValueError(f"broker {broker} is down")
            manager.pushed_errors.push(api_kind, tp, parsed)

        self._act(push)

    # --- transactions --------------------------------------------------------------------------
    @staticmethod
    def _transactional_id(transactional_id: Any) -> str:
        if not isinstance(transactional_id, str) or not transactional_id:
            raise ValueError(f"transactional_id {transactional_id!r}: expected a non-empty string")
        return transactional_id

    def _coordinator_of(self, transactional_id: str) -> int:
        """The broker leading the id's ``__transaction_state`` partition (run in the trio run)."""
        cluster = self.served.cluster
        spec = cluster.topics.get(TRANSACTION_STATE_TOPIC)
        if spec is None:
            raise ValueError(
                f"transactional id {transactional_id!r}: {TRANSACTION_STATE_TOPIC} does not exist yet "
                "(no transactional producer has looked for its coordinator)"
            )
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(transactional_id, spec.partitions))
        leader = cluster.leader_of(tp)
        if leader < 0:
            raise ValueError(f"transactional id {transactional_id!r}: its partition {tp} has no leader now")
        return leader

    def _transaction_views(self) -> list[dict[str, Any]]:
        """Every transactional id the live coordinators hold, by id (run in the trio run)."""
        cluster = self.served.cluster
        now = cluster.now()
        views = []
        for broker in cluster.brokers:
            coordinator = broker.transaction_coordinator
            if coordinator is None:
                continue
            for txn_id, meta in coordinator.transactions.items():
                ongoing = meta.state == ONGOING and meta.start_ms >= 0
                views.append(
                    {
                        "transactional_id": txn_id,
                        "coordinator": broker.broker_id,
                        "state": meta.state,
                        "pending_state": meta.pending,
                        "producer_id": meta.producer_id,
                        "producer_epoch": meta.producer_epoch,
                        "timeout_ms": meta.timeout_ms,
                        "partitions": sorted(f"{topic}-{p}" for topic, p in meta.partitions),
                        "open_ms": now - meta.start_ms if ongoing else None,
                        "timeout_remaining_ms": (
                            max(0, meta.start_ms + meta.timeout_ms - now) if ongoing else None
                        ),
                        "markers_pending": sorted(str(tp) for tp in coordinator.markers.get(txn_id, ())),
                    }
                )
        return sorted(views, key=lambda view: view["transactional_id"])

    def transactions(self, state: str | None = None) -> list[dict[str, Any]]:
        """Every transactional id the coordinators hold now (or those in ``state``), as ``transaction``."""
        if state is not None and state not in VALID_PREVIOUS:
            raise ValueError(f"state {state!r}: expected one of {', '.join(sorted(VALID_PREVIOUS))}")
        views = self._run(self._transaction_views)
        return [view for view in views if state is None or view["state"] == state]

    def transaction(self, transactional_id: str) -> dict[str, Any]:
        """One id's coordinator, state, producer id and epoch, partitions, how long its transaction has
        been open and how long until its timeout, and the partitions still waiting for its marker."""
        txn_id = self._transactional_id(transactional_id)
        for view in self._run(self._transaction_views):
            if view["transactional_id"] == txn_id:
                return view
        raise ValueError(f"transactional id {txn_id!r}: no live coordinator holds it")

    def abort_transaction(self, transactional_id: str) -> None:
        """Abort the id's open transaction and fence its producer as Kafka's
        ``Admin.forceTerminateTransaction`` (KIP-939) does: an InitProducerId for the id, sent to its
        coordinator again every ``RETRY_BACKOFF_S`` while it answers CONCURRENT_TRANSACTIONS. The
        coordinator aborts the open transaction with an epoch bump (PrepareAbort, the ABORT markers,
        CompleteAbort), then bumps the epoch once more for the InitProducerId: the id is Empty at
        epoch + 2 when the call returns, and the producer's next request meets PRODUCER_FENCED."""
        txn_id = self._transactional_id(transactional_id)
        deadline = time.monotonic() + ABORT_WAIT_S
        while True:
            error = self._init_producer_id(txn_id)
            if error is Errors.NONE:
                return
            if error not in _RETRIED:
                raise ValueError(f"transactional id {txn_id!r}: InitProducerId answered {error.name}")
            if time.monotonic() > deadline:
                raise ValueError(
                    f"transactional id {txn_id!r}: still {error.name} after {ABORT_WAIT_S:g} s "
                    "(are its markers held by delay_markers?)"
                )
            time.sleep(RETRY_BACKOFF_S)

    def _init_producer_id(self, txn_id: str) -> Errors:
        """One InitProducerId for ``txn_id`` to its coordinator, as an admin client sends it."""
        answer: list[Errors] = []

        async def send() -> None:
            coordinator = self.served.cluster.brokers[self._coordinator_of(txn_id)].transaction_coordinator
            meta = coordinator.transactions.get(txn_id) if coordinator is not None else None
            if meta is None:
                loading = coordinator is not None and bool(coordinator.loading)
                if not loading:
                    raise ValueError(f"transactional id {txn_id!r}: no live coordinator holds it")
                answer.append(Errors.COORDINATOR_LOAD_IN_PROGRESS)
                return
            answered = trio.Event()

            def respond(response: Any) -> None:
                answer.append(response.error)
                answered.set()

            coordinator.handle(InitProducerIdRequest(txn_id, meta.timeout_ms), respond)
            with trio.move_on_after(ABORT_WAIT_S):
                await answered.wait()
            if not answer:
                answer.append(Errors.REQUEST_TIMED_OUT)

        self._act(send)
        return answer[0]

    def delay_markers(self, delay_ms: int, topic: str | None = None, partition: int | None = None) -> None:
        """Hold the transaction markers sent from now on to the partition (or, without one, to every
        partition) for ``delay_ms``: a transaction ending meanwhile stays in PrepareCommit/PrepareAbort
        and holds those partitions' LSO until its held markers go out. A new call replaces the hold;
        ``delay_ms`` 0 ends it for markers sent later (markers held already wait their time)."""
        delay_ms = self._millis(delay_ms, "delay_ms")
        if (topic is None) != (partition is None):
            raise ValueError("topic and partition: give both (one partition) or neither (every partition)")
        tp = self._partition(topic, partition) if topic is not None else None
        cluster = self.served.cluster

        def hold() -> None:
            holds = self._marker_holds
            holds[tp] = cluster.now() + delay_ms

            def remaining(target: TopicPartition) -> int:
                until = max(holds.get(target, 0), holds.get(None, 0))
                return max(0, until - cluster.now())

            for broker in cluster.brokers:
                broker.marker_hold = remaining

        self._act(hold)

    def crash_transaction_coordinator(self, transactional_id: str) -> int:
        """Crash the broker leading the id's ``__transaction_state`` partition; returns its id
        (``restart`` brings it back). Another replica of the partition becomes the coordinator and
        reloads the id's state from the log."""
        txn_id = self._transactional_id(transactional_id)
        crashed: list[int] = []

        def crash() -> None:
            broker = self._coordinator_of(txn_id)
            self.served.cluster.crash(broker)
            crashed.append(broker)

        self._act(crash)
        return crashed[0]

    def move_transaction_coordinator(self, transactional_id: str, broker: int) -> None:
        """Elect ``broker`` (alive, in the ISR) leader of the id's ``__transaction_state`` partition."""
        txn_id = self._transactional_id(transactional_id)
        broker = self._broker(broker)

        def move() -> None:
            self._coordinator_of(txn_id)  # the topic exists
            spec = self.served.cluster.topics[TRANSACTION_STATE_TOPIC]
            tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition_for(txn_id, spec.partitions))
            self.served.cluster.move_leader(tp, broker)

        self._act(move)

    # --- share groups --------------------------------------------------------------------------
    def _share_target(self, topic: Any, partition: Any) -> TopicPartition | None:
        if (topic is None) != (partition is None):
            raise ValueError("topic and partition: give both (one partition) or neither (every partition)")
        return self._partition(topic, partition) if topic is not None else None

    @staticmethod
    def _group(group: Any) -> str:
        if not isinstance(group, str) or not group:
            raise ValueError(f"group {group!r}: expected a non-empty string (a share group's id)")
        return group

    def expire_share_locks(self, group: str, topic: str | None = None, partition: int | None = None) -> int:
        """Expire now every acquisition lock of the share group's partitions (of one partition when
        given), as if each had reached its deadline: their records become Available again (Archived at
        the delivery-count limit). Returns how many records were released."""
        group = self._group(group)
        tp = self._share_target(topic, partition)
        released: list[int] = []
        self._act(lambda: released.append(expire_locks(self.served.cluster, group, tp)))
        return released[0]

    def share_partitions(
        self, group: str | None = None, topic: str | None = None, partition: int | None = None
    ) -> list[dict[str, Any]]:
        """Every share partition on its leader now (of ``group``; of one partition): SPSO, SPEO, each
        in-flight record's state, delivery count, holder and lock deadline, and its running totals."""
        group = self._group(group) if group is not None else None
        tp = self._share_target(topic, partition)
        views = self._run(share_partitions, self.served.cluster, group, tp)
        return [attrs.asdict(view) for view in views]

    def _share_offsets(self, request: Any) -> ShareGroupOffsetsResponse:
        """One share-group offsets admin call to the group's coordinator, answered as an admin client
        hears it; a group-level error is a ValueError naming it."""
        answer: list[ShareGroupOffsetsResponse] = []

        async def send() -> None:
            cluster = self.served.cluster
            broker = cluster.coordinator_for(request.group_id) if OFFSETS_TOPIC in cluster.topics else -1
            coordinator = cluster.brokers[broker].share_coordinator if broker >= 0 else None
            if coordinator is None:
                answer.append(ShareGroupOffsetsResponse(Errors.COORDINATOR_NOT_AVAILABLE))
                return
            answered = trio.Event()

            def respond(response: ShareGroupOffsetsResponse) -> None:
                answer.append(response)
                answered.set()

            coordinator.handle(request, respond)
            with trio.move_on_after(ABORT_WAIT_S):
                await answered.wait()
            if not answer:
                answer.append(ShareGroupOffsetsResponse(Errors.REQUEST_TIMED_OUT))

        self._act(send)
        if answer[0].error is not Errors.NONE:
            raise ValueError(f"group {request.group_id!r}: {answer[0].error.name}")
        return answer[0]

    def share_group_offsets(self, group: str, topic: str | None = None) -> list[dict[str, Any]]:
        """The share group's start offset (SPSO) on each partition it has state on (of ``topic``'s
        partitions), from the share coordinators, as DescribeShareGroupOffsets answers: -1 without state."""
        group = self._group(group)
        wanted = None
        if topic is not None:
            spec = self._run(lambda: self.served.cluster.topics.get(str(topic)))
            if spec is None:
                raise ValueError(f"topic {topic!r}: no such topic")
            wanted = tuple(TopicPartition(topic, p) for p in range(spec.partitions))
        answer = self._share_offsets(DescribeShareGroupOffsetsRequest(group, wanted))
        return [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "start_offset": o.start_offset,
                "error": o.error.name,
            }
            for tp, o in answer.partitions.items()
        ]

    def alter_share_group_offsets(self, group: str, topic: str, partition: int, start_offset: int) -> None:
        """Move the share group's start offset (SPSO) on one partition, as AlterShareGroupOffsets does:
        only while the group has no members; the partition's in-flight records are dropped."""
        group = self._group(group)
        tp = self._partition(topic, partition)
        if isinstance(start_offset, bool) or not isinstance(start_offset, int) or start_offset < 0:
            raise ValueError(f"start_offset {start_offset!r}: expected an offset >= 0")
        answer = self._share_offsets(AlterShareGroupOffsetsRequest(group, {tp: start_offset}))
        error = answer.partitions[tp].error
        if error is not Errors.NONE:
            raise ValueError(f"group {group!r} on {tp}: {error.name}")

    def delete_share_group_offsets(self, group: str, topic: str) -> None:
        """Forget the share group's state on every partition of ``topic``, as DeleteShareGroupOffsets
        does: only while the group has no members."""
        group = self._group(group)
        if not isinstance(topic, str) or not self._run(lambda: topic in self.served.cluster.topics):
            raise ValueError(f"topic {topic!r}: no such topic")
        answer = self._share_offsets(DeleteShareGroupOffsetsRequest(group, (topic,)))
        failed = [
            f"{tp}: {o.error.name}" for tp, o in answer.partitions.items() if o.error is not Errors.NONE
        ]
        if failed:
            raise ValueError(f"group {group!r}: {', '.join(failed)}")

    # --- consumer groups (KIP-848) -------------------------------------------------------------
    @staticmethod
    def _group_id(group_id: Any) -> str:
        if not isinstance(group_id, str) or not group_id:
            raise ValueError(f"group_id {group_id!r}: expected a non-empty string")
        return group_id

    def _consumer_group_manager(self, group_id: str) -> Any:
        """The consumer group manager of the broker coordinating ``group_id`` (run in the trio run)."""
        cluster = self.served.cluster
        if OFFSETS_TOPIC not in cluster.topics:
            raise ValueError(f"group {group_id!r}: {OFFSETS_TOPIC} does not exist yet (no group has formed)")
        broker = cluster.coordinator_for(group_id)
        coordinator = cluster.brokers[broker].coordinator if broker >= 0 else None
        if coordinator is None or group_id not in coordinator.consumer_group_manager.groups:
            raise ValueError(
                f"group {group_id!r}: no live coordinator holds a consumer protocol group of that id"
            )
        return coordinator.consumer_group_manager

    def consumer_group(self, group_id: str) -> dict[str, Any]:
        """A consumer protocol group (KIP-848) on its coordinator: its state, group epoch, assignment
        epoch and assignor, and each member's epoch, state, assigned, revoking and target partitions and
        how long until its session and rebalance timeouts (None when not armed)."""
        group_id = self._group_id(group_id)
        cluster = self.served.cluster

        def read() -> dict[str, Any]:
            manager = self._consumer_group_manager(group_id)
            [view] = [g for g in manager.snapshot() if g.group_id == group_id]
            now = cluster.now()

            def remaining(deadline: int) -> int | None:
                return max(0, deadline - now) if deadline >= 0 else None

            return {
                "group_id": group_id,
                "coordinator": cluster.coordinator_for(group_id),
                "state": view.state,
                "group_epoch": view.group_epoch,
                "assignment_epoch": view.assignment_epoch,
                "assignor": view.assignor,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "instance_id": m.instance_id,
                        "member_epoch": m.member_epoch,
                        "state": m.state,
                        "assigned": partition_names(m.assigned),
                        "pending_revocation": partition_names(m.pending_revocation),
                        "target": partition_names(m.target),
                        "session_remaining_ms": remaining(m.session_deadline_ms),
                        "rebalance_remaining_ms": remaining(m.rebalance_deadline_ms),
                    }
                    for m in sorted(view.members, key=lambda m: m.member_id)
                ],
            }

        return self._run(read)

    def fence_group_member(self, group_id: str, member_id: str) -> None:
        """Fence one member of a consumer protocol group now, as its session timeout would: it is
        removed, its partitions are free for the next target assignment (the group epoch is bumped),
        and its next heartbeat is answered UNKNOWN_MEMBER_ID, after which it joins again."""
        group_id = self._group_id(group_id)
        if not isinstance(member_id, str) or not member_id:
            raise ValueError(f"member_id {member_id!r}: expected a non-empty string")

        def fence() -> None:
            if not self._consumer_group_manager(group_id).fence(group_id, member_id):
                raise ValueError(f"group {group_id!r}: no member {member_id!r}")

        self._act(fence)

    # --- read-outs -----------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> dict[str, Any]:
        """Leader, epochs, ISR, HW and LSO (the leader's), and each replica's LEO/HW/log start offset,
        as the cluster has them now."""
        tp = self._partition(topic, partition)
        label = str(tp)
        cluster = self.served.cluster

        def read() -> tuple[Any, int]:
            view = cluster.snapshot().partition(label)
            log = cluster.brokers[view.leader].logs.get(tp) if view.leader >= 0 else None
            return view, log.last_stable_offset if log is not None else -1

        view, last_stable_offset = self._run(read)
        return {
            "partition": label,
            "leader": view.leader,
            "leader_epoch": view.leader_epoch,
            "isr": list(view.isr),
            "high_watermark": view.replica(view.leader).high_watermark if view.leader >= 0 else -1,
            "last_stable_offset": last_stable_offset,
            "replicas": [
                {
                    "broker": r.broker,
                    "log_end_offset": r.log_end_offset,
                    "high_watermark": r.high_watermark,
                    "log_start_offset": r.log_start_offset,
                    "alive": r.alive,
                }
                for r in view.replicas
            ],
        }

    def purgatories(self, broker: int) -> dict[str, dict[str, int]]:
        """Each purgatory's figures on ``broker`` (PurgatorySize, NumDelayedOperations, completions, ...)."""
        view = self._run(self.served.cluster.snapshot).broker(self._broker(broker))
        return {
            p.name: {
                "watched": p.watched,
                "num_delayed": p.num_delayed,
                "completions": p.completions,
                "expirations": p.expirations,
                "purges": p.purges,
            }
            for p in view.purgatories
        }

    def requests(self, broker: int | None = None) -> dict[str, int]:
        """Requests decoded so far by API name, on ``broker`` or (None) on all of them."""
        state = self.served.server.state
        if broker is None:
            return dict(self._run(lambda: dict(state.requests)))
        broker = self._broker(broker)
        counts = self._run(lambda: dict(state.broker_requests))
        return {name: n for (b, name), n in counts.items() if b == broker}

    def fetch_sessions(self, broker: int) -> dict[str, int]:
        """``broker``'s fetch sessions (count, partitions cached, evictions) and Fetch requests by kind.

        Kinds: ``full_fetches`` (epoch 0: a session is created if there is room), ``incremental_fetches``,
        ``sessionless_fetches`` (epoch -1 or Fetch < v7: librdkafka's way) and ``error_fetches``.
        """
        broker = self._broker(broker)
        return self._run(session_figures, self.served.server.state, broker)

    def pending_errors(self, broker: int) -> dict[str, int]:
        """Pushed errors not handed out yet on ``broker``: 'produce t-0' (or 'list_offsets *') -> count."""
        broker = self._broker(broker)

        def read() -> dict[str, int]:
            manager = self.served.cluster.brokers[broker].replica_manager
            return manager.pushed_errors.pending() if manager is not None else {}

        return self._run(read)
