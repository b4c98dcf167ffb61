"""Network: in-process links between brokers, clients and the controller, with faults.

A message sent at ``t`` over a link with latency ``L`` arrives at ``t + L``, and a
link is FIFO: it never overtakes an earlier message, even after its latency is
lowered. Each link keeps its messages in flight in sending order and delivers
from the front: two messages due at the same ms arrive in the order they were
sent, whatever order the timer fires their tasks in (it does not order tasks
of one expiration). Delivery calls the receiver's ``deliver(src, message, respond)`` on the
scheduler, never inside the sender's call.

Requests pair with responses by correlation id. A requester hears back exactly
once: the response, or a ``NetworkError``:

- NETWORK_EXCEPTION when the destination is down at send time or crashes before
  answering (the connection resets; an answer already on the wire still lands);
- REQUEST_TIMED_OUT when nothing arrives within its timeout (e.g. a dropped link).

Bugs: by default an exception raised by an endpoint's ``deliver`` or a
requester's ``on_response`` propagates (ending the emulation: it is a bug). With
``on_error`` set (``minibroker serve``), it is contained to the message: a
request whose handling raised before it was answered gets a ``NetworkError``
UNKNOWN_SERVER_ERROR carrying the exception as ``cause``, and ``on_error(error,
requester)`` is told (``requester`` is the node whose request failed, or None);
every other message and link goes on.

Faults: ``set_latency`` (slow a link), ``drop``/``heal`` a link in both
directions, or with ``one_way`` only the direction from ``a`` to ``b`` (messages
sent that way are lost, including those in flight), and
``set_up(node, False)`` for a crashed node (messages to it are lost; messages it
already sent are still delivered, they are on the wire).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError
from minibroker.common.network import Endpoint, Node, Respond
from minibroker.runtime import Scheduler
from minibroker.timer import TimerTask
from minibroker.trace import NULL_TRACER, Tracer


class _Pending(TimerTask):
    """A request waiting for its answer: who asked whom and the callback. It is also the request's
    timeout task on the scheduler's timer (armed when the request is sent, cancelled when it resolves)."""

    __slots__ = ("src", "dst", "on_response", "answered", "_expire")

    def __init__(self, src: Node, dst: Node, on_response: Callable[[Any], None]) -> None:
        TimerTask.__init__(self, 0)
        self.src = src
        self.dst = dst
        self.on_response = on_response
        #: the response is on the wire
        self.answered = False
        #: what the timeout calls: the network's ``_time_out`` and its arguments
        self._expire: tuple[Any, ...] = ()

    def run(self) -> None:
        """The timeout: REQUEST_TIMED_OUT, unless the request resolved meanwhile."""
        time_out, *args = self._expire
        time_out(*args)


#: what a queued response carries in place of a ``respond`` callback: its correlation id resolves
_RESPONSE: Any = object()


class _Drain(TimerTask):
    """The scheduler task that delivers a link's due messages (one per message sent, as ``call_later``
    would arm; the link's queue, not the task, says which messages are delivered)."""

    __slots__ = ("_network", "_link")

    def __init__(self, delay_ms: int, network: Network, link: tuple[Node, Node]) -> None:
        TimerTask.__init__(self, delay_ms)
        self._network = network
        self._link = link

    def run(self) -> None:
        self._network._drain(self._link)


class Network:
    """Links with latency and faults; one-way ``send`` and request/response ``request``.

    The ``common.network.NetworkClient`` that brokers, the controller and clients send through.
    """

    def __init__(
        self, scheduler: Scheduler, default_latency_ms: int = 0, tracer: Tracer = NULL_TRACER
    ) -> None:
        self.scheduler = scheduler
        self.default_latency_ms = default_latency_ms
        self.tracer = tracer
        self._endpoints: dict[Node, Endpoint] = {}
        self._down: set[Node] = set()
        self._latency: dict[tuple[Node, Node], int] = {}
        #: directions (src, dst) on which every message is lost; a two-way drop holds both
        self._dropped: set[tuple[Node, Node]] = set()
        #: per link, the messages in flight in sending order: (arrival ms, message, respond, correlation),
        #: ``respond`` being ``_RESPONSE`` for a response; arrival times never decrease along a queue, so
        #: its last one bounds the next message's
        self._in_flight: dict[tuple[Node, Node], deque[tuple[int, Any, Any, int | None]]] = {}
        self._pending: dict[int, _Pending] = {}
        self._correlation = itertools.count()
        self.sent = 0
        self.delivered = 0
        self.lost = 0
        #: receives (exception, requester) raised by a delivery or a response callback (None: they propagate)
        self.on_error: Callable[[Exception, Node | None], object] | None = None

    # --- topology and faults -----------------------------------------------------------------
    def register(self, node: Node, endpoint: Endpoint) -> None:
        self._endpoints[node] = endpoint

    def unregister(self, node: Node) -> None:
        """Forget a node that is gone for good (a closed client connection) and its requests."""
        self._endpoints.pop(node, None)
        self._down.discard(node)
        for correlation, pending in list(self._pending.items()):
            if pending.src == node:
                self._forget(correlation)
        for key in [key for key in self._latency if node in key]:
            del self._latency[key]

    def is_up(self, node: Node) -> bool:
        return node in self._endpoints and node not in self._down

    def set_up(self, node: Node, up: bool) -> None:
        """Bring a node up or down; going down resets every connection that waits on it."""
        if up:
            self._down.discard(node)
            return
        self._down.add(node)
        for correlation, pending in list(self._pending.items()):
            if pending.dst == node and not pending.answered:
                self._fail(correlation, Errors.NETWORK_EXCEPTION, f"connection to {node} reset")
            elif pending.src == node:
                self._forget(correlation)

    def latency(self, src: Node, dst: Node) -> int:
        return self._latency.get((src, dst), self.default_latency_ms)

    def set_latency(self, a: Node, b: Node, latency_ms: int, both_ways: bool = True) -> None:
        self._latency[(a, b)] = latency_ms
        if both_ways:
            self._latency[(b, a)] = latency_ms

    def drop(self, a: Node, b: Node, one_way: bool = False) -> None:
        """Lose every message from ``a`` to ``b`` and (unless ``one_way``) from ``b`` to ``a``."""
        self._dropped.add((a, b))
        if not one_way:
            self._dropped.add((b, a))

    def heal(self, a: Node, b: Node, one_way: bool = False) -> None:
        """Stop losing messages from ``a`` to ``b`` and (unless ``one_way``) from ``b`` to ``a``."""
        self._dropped.discard((a, b))
        if not one_way:
            self._dropped.discard((b, a))

    def is_dropped(self, src: Node, dst: Node) -> bool:
        """Whether a message from ``src`` to ``dst`` is lost now."""
        return bool(self._dropped) and (src, dst) in self._dropped

    # --- messages ----------------------------------------------------------------------------
    def send(self, src: Node, dst: Node, message: Any, respond: Respond | None = None) -> bool:
        """Send one message to ``dst``'s endpoint; False if it was lost at once."""
        return self._transmit(src, dst, message, respond, None)

    def _deliver(
        self, src: Node, dst: Node, message: Any, respond: Respond | None, correlation: int | None = None
    ) -> None:
        try:
            self._endpoints[dst].deliver(src, message, respond)
        except Exception as error:
            if self.on_error is None:
                raise
            pending = self._pending.get(correlation) if correlation is not None else None
            if pending is None or pending.answered:
                self.on_error(error, None)
                return
            reason = f"{dst} failed on {type(message).__name__}: {type(error).__name__}: {error}"
            self._resolve(correlation, NetworkError(Errors.UNKNOWN_SERVER_ERROR, reason, error))
            self.on_error(error, src)

    def _transmit(self, src: Node, dst: Node, message: Any, respond: Any, correlation: int | None) -> bool:
        """Queue ``message`` on the link and arm its delivery; ``respond`` is ``_RESPONSE`` for a response
        (delivered by resolving ``correlation``), else what the receiver may answer through."""
        self.sent += 1
        link = (src, dst)
        # is_up, is_dropped and latency inlined: every message passes here
        if dst not in self._endpoints or dst in self._down or (self._dropped and link in self._dropped):
            self._lose(src, dst, message)
            return False
        timer = self.scheduler.timer
        now = self.scheduler.clock.now_ms()
        queue = self._in_flight.get(link)
        if queue is None:
            queue = self._in_flight[link] = deque()
        arrival = now + self._latency.get(link, self.default_latency_ms)
        if queue:
            last = queue[-1][0]
            if last > arrival:
                arrival = last
        queue.append((arrival, message, respond, correlation))
        timer.add(_Drain(arrival - now, self, link))
        return True

    def _drain(self, link: tuple[Node, Node]) -> None:
        """Deliver the link's due messages from the front (those sent meanwhile have their own task)."""
        queue = self._in_flight.get(link)
        if not queue:
            return
        now = self.scheduler.clock.now_ms()
        due = 0
        count = len(queue)
        while due < count and queue[due][0] <= now:
            due += 1
        src, dst = link
        endpoints, down, popleft = self._endpoints, self._down, queue.popleft
        for _ in range(due):
            _, message, respond, correlation = popleft()
            # the receiver may have gone, crashed or been cut off since the message was sent
            if dst not in endpoints or dst in down or (self._dropped and link in self._dropped):
                self._lose(src, dst, message)
                continue
            self.delivered += 1
            if respond is _RESPONSE:
                self._resolve(correlation, message)  # type: ignore[arg-type]
            elif self.on_error is None:
                endpoints[dst].deliver(src, message, respond)
            else:
                self._deliver(src, dst, message, respond, correlation)
        if not queue:
            del self._in_flight[link]

    def _lose(self, src: Node, dst: Node, message: Any) -> None:
        self.lost += 1
        if self.tracer.enabled:
            self.tracer.emit("net.lost", src=str(src), dst=str(dst), message=type(message).__name__)

    def request(
        self,
        src: Node,
        dst: Node,
        message: Any,
        timeout_ms: int,
        on_response: Callable[[Any], None],
    ) -> int:
        """Send a request; ``on_response`` gets the response or a ``NetworkError``, exactly once."""
        correlation = next(self._correlation)
        pending = _Pending(src, dst, on_response)
        self._pending[correlation] = pending
        if dst not in self._endpoints or dst in self._down:
            reason = f"{dst} is not reachable"
            self.scheduler.call_later(0, self._fail, correlation, Errors.NETWORK_EXCEPTION, reason)
            return correlation
        pending.delay_ms = timeout_ms if timeout_ms > 0 else 0
        pending._expire = (self._time_out, correlation, dst, timeout_ms)
        self.scheduler.timer.add(pending)  # the timeout

        def respond(response: Any) -> None:
            pending.answered = self._transmit(dst, src, response, _RESPONSE, correlation)

        self._transmit(src, dst, message, respond, correlation)
        return correlation

    async def call(self, src: Node, dst: Node, message: Any, timeout_ms: int) -> Any:
        """``request`` for trio tasks: await the response or the ``NetworkError``."""
        done = trio.Event()
        box: list[Any] = []

        def on_response(response: Any) -> None:
            box.append(response)
            done.set()

        self.request(src, dst, message, timeout_ms, on_response)
        await done.wait()
        return box[0]

    def _resolve(self, correlation: int, response: Any) -> None:
        pending = self._pending.pop(correlation, None)
        if pending is None:
            return
        pending.cancel()  # the timeout (a no-op when it never was armed)
        if self.on_error is None:
            pending.on_response(response)
            return
        try:
            pending.on_response(response)
        except Exception as error:
            self.on_error(error, None)

    def _fail(self, correlation: int, error: Errors, reason: str) -> None:
        self._resolve(correlation, NetworkError(error, reason))

    def _time_out(self, correlation: int, dst: Node, timeout_ms: int) -> None:
        self._fail(correlation, Errors.REQUEST_TIMED_OUT, f"no response from {dst} in {timeout_ms} ms")

    def _forget(self, correlation: int) -> None:
        pending = self._pending.pop(correlation, None)
        if pending is not None:
            pending.cancel()

    @property
    def outstanding(self) -> int:
        return len(self._pending)
