"""What a request handler sees: the server's shared state and its own connection.

A wire connection is a client node of the emulated network (``wire-b<broker>-c<n>``)
talking to one broker, so latency, dropped links and crashes in scenarios apply
to it: produce and fetch go through ``Network.request`` like the emulator's own
clients. Metadata, ListOffsets and OffsetForLeaderEpoch read the controller's
and the leader's state directly (as Kafka answers them from its metadata cache
and log without a purgatory), but only while the broker is reachable.

Kafka error codes the cluster never produces itself live here too.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import trio

from minibroker.broker.replica_manager import ReplicaManager
from minibroker.common.messages import NetworkError
from minibroker.server.authorizer import ANONYMOUS, SUPPORTED_OPERATIONS, Authorizer
from minibroker.sim.cluster import Cluster

# Kafka error codes used only on the wire (the cluster's own are in minibroker.common.errors)
UNKNOWN_SERVER_ERROR = -1
INVALID_TOPIC_EXCEPTION = 17
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42

#: how long past a request's own deadline a connection waits for the emulated broker's answer
RESPONSE_GRACE_MS = 5_000
#: a repeated log line (same broker, same reason) is written at most once per this many seconds
LOG_INTERVAL_S = 1.0


class CloseConnection(Exception):
    """The connection must close (Kafka closes it, or the broker went away); the message says why."""


@attrs.define
class ServerState:
    """Shared by every connection of one ``minibroker serve``."""

    cluster: Cluster
    #: broker id -> (host, port) as Metadata advertises it
    listeners: dict[int, tuple[str, int]]
    #: wall-clock ms at the cluster's time 0 (timestamps of batches built from scenario steps)
    epoch_origin_ms: int
    log: Callable[[str], None]
    cluster_id: str = "minibroker"
    #: InitProducerId's ids (a data dir's ``ProducerIdBlocks`` keeps them unique across restarts)
    producer_ids: Iterator[int] = attrs.Factory(lambda: itertools.count(1000))
    connections: itertools.count = attrs.Factory(lambda: itertools.count(1))
    #: topics Metadata requests auto-created (bounded by minibroker.auto.create.topics.max)
    auto_created: int = 0
    #: auto-creations refused past that bound (the first is logged, the rest only counted)
    auto_create_refusals: int = 0
    #: requests decoded so far, by API name (what a benchmark or a summary counts)
    requests: collections.Counter[str] = attrs.Factory(collections.Counter)
    #: requests decoded so far, by broker and API name (the testing handle's read-out)
    broker_requests: collections.Counter[tuple[int, str]] = attrs.Factory(collections.Counter)
    #: open client connections: node name on the emulated network -> broker id
    nodes: dict[str, int] = attrs.Factory(dict)
    #: broker id -> latency (ms, each way) of every client connection to it, present and future
    client_latency_ms: dict[int, int] = attrs.Factory(dict)
    #: broker id -> the event its partitioned client connections wait for (set by the heal)
    client_partitions: dict[int, trio.Event] = attrs.Factory(dict)
    #: broker id -> (its replica manager, its fetch session cache): a restart starts an empty cache
    fetch_sessions: dict[int, tuple[Any, Any]] = attrs.Factory(dict)
    #: Fetch requests answered, by broker and session kind (full, incremental, sessionless, error)
    fetch_contexts: collections.Counter[tuple[int, str]] = attrs.Factory(collections.Counter)
    #: the cluster's ACLs (CreateAcls, ...), checked when the brokers have ``authorizer.class.name`` set
    authorizer: Authorizer = attrs.Factory(Authorizer)
    #: SCRAM credentials (AlterUserScramCredentials): user -> mechanism -> iterations
    scram_credentials: dict[str, dict[int, int]] = attrs.Factory(dict)
    #: key -> (trio time of the last line written, lines held back since)
    _limited: dict[Any, tuple[float, int]] = attrs.Factory(dict)

    def connected(self, node: str, broker_id: int) -> None:
        """A client connection opened: it gets the broker's client latency, if one is set."""
        self.nodes[node] = broker_id
        if broker_id in self.client_latency_ms:
            self.cluster.network.set_latency(node, broker_id, self.client_latency_ms[broker_id])

    def disconnected(self, node: str) -> None:
        self.nodes.pop(node, None)

    def set_client_latency(self, broker_id: int, latency_ms: int) -> None:
        """Every client link to ``broker_id`` (open now or later) takes ``latency_ms`` each way."""
        self.client_latency_ms[broker_id] = latency_ms
        for node, broker in self.nodes.items():
            if broker == broker_id:
                self.cluster.network.set_latency(node, broker_id, latency_ms)

    def drop_client_links(self, broker_id: int) -> None:
        """Partition every client connection to ``broker_id`` (open now or later) until healed."""
        if broker_id not in self.client_partitions:
            self.client_partitions[broker_id] = trio.Event()
            self.log(f"broker {broker_id}: client connections partitioned (nothing answered until healed)")

    def heal_client_links(self, broker_id: int) -> None:
        healed = self.client_partitions.pop(broker_id, None)
        if healed is not None:
            healed.set()
            self.log(f"broker {broker_id}: client connections healed")

    async def wait_client_links(self, broker_id: int) -> None:
        """Return once ``broker_id``'s client links are not partitioned (at once if they are not)."""
        while (partition := self.client_partitions.get(broker_id)) is not None:
            await partition.wait()

    def log_limited(self, key: Any, line: str) -> bool:
        """Log ``line`` unless a line of the same ``key`` went out within ``LOG_INTERVAL_S``.

        Lines held back are counted and the count is added to the next line of that key that goes
        out, so a client reconnecting in a loop costs one line a second, not one per connection.
        Returns whether the line was written.
        """
        now = trio.current_time()
        last, held = self._limited.get(key, (None, 0))
        if last is not None and now - last < LOG_INTERVAL_S:
            self._limited[key] = (last, held + 1)
            return False
        if held:
            line += f" ({held} more like this in the last {now - last:.1f} s were not logged)"
        self._limited[key] = (now, 0)
        self.log(line)
        return True


@attrs.define
class Connection:
    """One client connection to broker ``broker_id``; ``node`` is its name on the emulated network."""

    state: ServerState
    broker_id: int
    node: str
    peer: str

    @property
    def cluster(self) -> Cluster:
        return self.state.cluster

    def log(self, message: str) -> None:
        self.state.log(f"broker {self.broker_id}: {self.peer}: {message}")

    def unreachable(self) -> str | None:
        """Why the broker cannot be reached from this connection now, or None."""
        network = self.cluster.network
        if not network.is_up(self.broker_id):
            return f"broker {self.broker_id} is down"
        if network.is_dropped(self.node, self.broker_id):
            return f"the link {self.node} - broker {self.broker_id} is dropped"
        return None

    @property
    def host(self) -> str:
        """The client's address, as an ACL's host names it."""
        return self.peer.rsplit(":", 1)[0].strip("[]")

    def authorize(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether this connection (User:ANONYMOUS) may do ``operation``; True without an authorizer."""
        config = self.cluster.brokers[self.broker_id].config
        if not config.authorizer_class_name:
            return True
        return self.state.authorizer.authorize(
            ANONYMOUS,
            self.host,
            operation,
            resource_type,
            name,
            super_users=frozenset(p.strip() for p in config.super_users.split(";") if p.strip()),
            allow_if_no_acl=config.allow_everyone_if_no_acl_found,
        )

    def authorized_operations(self, resource_type: int, name: str) -> set[int]:
        """Kafka's ``AuthHelper.authorizedOperations`` (all supported ones without an authorizer).

        The operation codes; the response's bitfield (``to_bitfield``) is written from them.
        """
        return {op for op in SUPPORTED_OPERATIONS[resource_type] if self.authorize(op, resource_type, name)}

    def replica_manager(self) -> ReplicaManager:
        manager = self.cluster.brokers[self.broker_id].replica_manager
        if manager is None:
            raise CloseConnection(f"broker {self.broker_id} is down")
        return manager

    def request_id(self, correlation_id: int) -> str:
        return f"{self.node}#{correlation_id}"

    async def call(self, message: Any, timeout_ms: int) -> Any:
        """Send ``message`` to the broker over the emulated network and wait for its answer."""
        done = trio.Event()
        box: list[Any] = []

        def on_response(response: Any) -> None:
            box.append(response)
            done.set()

        self.cluster.network.request(self.node, self.broker_id, message, timeout_ms, on_response)
        await done.wait()
        response = box[0]
        if isinstance(response, NetworkError):
            if response.cause is not None:
                # the broker raised while handling it: the request fails as if its handler had raised
                raise response.cause
            raise CloseConnection(f"{response.error.name}: {response.reason}")
        return response

    def send(self, message: Any) -> None:
        """Send without waiting for an answer (acks=0)."""
        self.cluster.network.send(self.node, self.broker_id, message)

    def deliver(self, src: Any, message: Any, respond: Any) -> None:
        """Network endpoint: nobody sends requests to a client connection."""
        raise TypeError(f"{self.node} does not serve requests")
