"""How a node sees the emulated network: an endpoint that receives, a client that sends.

Brokers, the controller and the emulator's clients are nodes. A node registers an ``Endpoint`` whose
``deliver(src, message, respond)`` receives requests (``respond`` answers one, ``None`` for one-way
messages), and sends through a ``NetworkClient``: ``send`` one way, ``request`` with a timeout and a
callback that hears exactly once (the response or a ``messages.NetworkError``), ``call`` for trio tasks.
The emulated network with latencies and faults (``minibroker.sim.network.Network``) is the one
implementation; these protocols let the broker and the controller use it without importing it, as
Kafka's broker sends through ``org.apache.kafka.clients.KafkaClient``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

#: a broker id, the controller's node id, or a client id
Node = Hashable
Respond = Callable[[Any], None]


class Endpoint(Protocol):
    def deliver(self, src: Node, message: Any, respond: Respond | None) -> None: ...


class NetworkClient(Protocol):
    """What a node uses of the network: join it, go down and up, send and request."""

    #: receives (exception, requester) raised by a delivery or a response callback (None: they propagate)
    on_error: Callable[[Exception, Node | None], object] | None

    def register(self, node: Node, endpoint: Endpoint) -> None: ...

    def set_up(self, node: Node, up: bool) -> None: ...

    def send(self, src: Node, dst: Node, message: Any, respond: Respond | None = None) -> bool: ...

    def request(
        self, src: Node, dst: Node, message: Any, timeout_ms: int, on_response: Callable[[Any], None]
    ) -> int: ...

    async def call(self, src: Node, dst: Node, message: Any, timeout_ms: int) -> Any: ...
