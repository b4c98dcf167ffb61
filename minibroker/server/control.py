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
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from minibroker.common.errors import ErrorCode, Errors
from minibroker.common.messages import TopicPartition
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.server.codec import SUPPORTED
from minibroker.server.error_responses import PER_PARTITION, kind, pushable
from minibroker.server.fetch_sessions import session_figures
from minibroker.server.serve import Served


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

    # --- read-outs -----------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> dict[str, Any]:
        """Leader, epochs, ISR and each replica's LEO/HW/log start offset, as the cluster has them now."""
        label = str(self._partition(topic, partition))
        view = self._run(self.served.cluster.snapshot).partition(label)
        return {
            "partition": label,
            "leader": view.leader,
            "leader_epoch": view.leader_epoch,
            "isr": list(view.isr),
            "high_watermark": view.replica(view.leader).high_watermark if view.leader >= 0 else -1,
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
