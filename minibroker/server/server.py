"""trio TCP listeners speaking Kafka's protocol, one per emulated broker.

``WireServer(cluster, host, port).run`` listens on ``port + i`` for broker ``i``
(or on an ephemeral port each when ``port`` is 0) and advertises those
addresses in Metadata. Each connection has two tasks:

- the reader splits the byte stream into frames (``FrameReader``, with the
  broker's ``socket.request.max.bytes``) and queues them (at most
  ``queue_size``; a full queue stops reading, which pushes back on the client);
- the processor answers the queued requests **one at a time, in order**, as
  Kafka does (its network layer mutes a connection until the response to its
  current request is sent), so responses always go out in request order.

A connection closes, with one line on the log naming the broker, the peer and
the problem, when: a frame's size is negative or too large (requests already
read are answered first), a request cannot be decoded, its api key is unknown
or its version unsupported (except ApiVersions, answered with
UNSUPPORTED_VERSION and our version table, as Kafka does), or the broker is down
or the link to it dropped; the client ending its side in the middle of a frame
is logged too. Nothing else is affected: other connections go on, and what the
broker accepted stays in its log.

No request ends the server. A request whose handling raises an exception (in
its handler, or in the emulated broker while it handles it: the cluster runs
with ``Cluster.contain_errors``) is answered as Kafka's ``KafkaApis.handleError``
does: UNKNOWN_SERVER_ERROR in the API's own error response
(``error_responses.error_response``), or a closed connection for a request that
gets no answer (Produce with acks=0); the connection stays open otherwise. The
exception is logged once, as one block: the broker, the peer, the API, its
version and correlation id, then the traceback. An exception in the cluster
outside a client's request (a purgatory expiration, a replica's fetch) is
logged the same way, prefixed ``cluster:``; a client request that was waiting
on the callback that raised there gets no answer and closes at its own timeout. The "down or
dropped" line is written at most once a second per broker and reason (clients
reconnect at once), with a count of the lines held back.

A partition between the clients and a broker (``ServerState.drop_client_links``)
holds its connections, open or new, as a real partition does: a request is
neither processed nor answered until the heal (the reader keeps at most
``queue_size`` frames, then stops reading, as a full TCP window would). The client
sees a connection that stops answering: its request timeout fires and it
reconnects, to a connection that answers nothing either; after the heal, held
requests are processed in order and answered if their client is still there.

A crashed broker is not reachable at all, as a killed process is not: the
moment it crashes its listener and every connection to it close (one log line),
so clients are refused instead of connecting and being dropped in a loop; when
it restarts the same address is bound again (one line). A controlled shutdown
ends the same way.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

import trio

from minibroker.server.codec import (
    API_VERSIONS_KEY,
    RequestError,
    UnsupportedVersion,
    decode_request,
    encode_response,
    unsupported_api_versions_response,
)
from minibroker.server.context import UNKNOWN_SERVER_ERROR, CloseConnection, Connection, ServerState
from minibroker.server.error_responses import error_response, handle
from minibroker.server.frames import FrameError, FrameReader
from minibroker.sim.cluster import Cluster

#: bytes asked of the socket at a time
RECEIVE_BYTES = 65_536
#: seconds between attempts to bind a restarted broker's address again, if it is taken
REBIND_RETRY_S = 1.0


#: one line at a time: the Kafka listeners and the control API's worker threads log side by side
_STDERR_LOCK = threading.Lock()


def stderr_log(line: str) -> None:
    """Write one whole line to stderr (one write under a lock, so lines from threads never interleave)."""
    with _STDERR_LOCK:
        sys.stderr.write(f"minibroker serve: {line}\n")
        sys.stderr.flush()


class WireServer:
    """Kafka listeners for every broker of ``cluster``; ``run`` serves until cancelled."""

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        log: Callable[[str], None] = stderr_log,
        queue_size: int = 16,
    ) -> None:
        if not 0 <= port <= 65535 or (port and port + len(cluster.brokers) - 1 > 65535):
            raise ValueError(f"port {port}: broker i listens on port + i, which must stay within 1..65535")
        self.cluster = cluster
        self.host = host
        self.port = port
        self.queue_size = queue_size
        origin = round(time.time() * 1000) - cluster.now()
        self.state = ServerState(cluster, {}, origin, log)
        cluster.contain_errors(self._cluster_error)

    def _cluster_error(self, error: Exception, requester: object) -> None:
        """An exception the cluster contained: logged by the failed request's connection, or here."""
        if requester in self.state.nodes:
            return  # raised again in the connection's handler (Connection.call), which logs it
        self.state.log(f"cluster: internal error (contained){traceback_block(error)}")

    @property
    def listeners(self) -> dict[int, tuple[str, int]]:
        """broker id -> (host, port), once ``run`` has started."""
        return self.state.listeners

    async def run(
        self, *, task_status: trio.TaskStatus[dict[int, tuple[str, int]]] = trio.TASK_STATUS_IGNORED
    ):
        """Bind every listener (``OSError`` if one cannot be), report them, then serve."""
        bound: dict[int, list[trio.SocketListener]] = {}
        try:
            for broker in self.cluster.brokers:
                port = self.port + broker.broker_id if self.port else 0
                listeners = await trio.open_tcp_listeners(port, host=self.host)
                bound[broker.broker_id] = listeners
                self.state.listeners[broker.broker_id] = (self.host, listeners[0].socket.getsockname()[1])
        except BaseException:
            for listeners in bound.values():
                for listener in listeners:
                    await listener.aclose()
            raise
        async with trio.open_nursery() as nursery:
            for broker_id, listeners in bound.items():
                nursery.start_soon(self._serve_broker, broker_id, listeners)
            task_status.started(dict(self.state.listeners))

    async def _serve_broker(self, broker_id: int, listeners: list[trio.SocketListener] | None) -> None:
        """Serve ``broker_id``'s listener while the broker is up; closed (refusing) while it is down.

        A crash closes the listener and every connection to the broker at once, as a killed
        process's sockets are; a restart binds the same address again.
        """
        broker = self.cluster.brokers[broker_id]
        changed = trio.Event()
        serving: trio.CancelScope | None = None

        def on_change() -> None:
            # runs inside Broker.crash/start: cancel at once, so no connection sees the crash first
            if serving is not None and not broker.alive:
                serving.cancel()
            changed.set()

        broker.watch(on_change)
        host, port = self.state.listeners[broker_id]
        while True:
            if not broker.alive:
                if listeners is not None:
                    for listener in listeners:
                        await listener.aclose()
                    listeners = None
                await changed.wait()
                changed = trio.Event()
                continue
            if listeners is None:
                try:
                    listeners = await trio.open_tcp_listeners(port, host=host)
                except OSError as error:
                    self.state.log(
                        f"broker {broker_id}: cannot listen on {host}:{port} again ({error}); "
                        f"retrying in {REBIND_RETRY_S:g} s"
                    )
                    with trio.move_on_after(REBIND_RETRY_S):
                        await changed.wait()
                    continue
                self.state.log(f"broker {broker_id}: up again, listening on {host}:{port}")
            serving = trio.CancelScope()
            with serving:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        trio.serve_listeners, functools.partial(self._serve, broker_id), listeners
                    )
                    while broker.alive:
                        await changed.wait()
                        changed = trio.Event()
                    serving.cancel()
            serving = None
            listeners = None  # serve_listeners closed them
            self.state.log(
                f"broker {broker_id}: down; its listener {host}:{port} and connections are closed "
                "until it restarts (clients are refused meanwhile)"
            )

    async def _serve(self, broker_id: int, stream: trio.SocketStream) -> None:
        state = self.state
        peer = peer_address(stream)
        conn = Connection(state, broker_id, f"wire-b{broker_id}-c{next(state.connections)}", peer)
        network = self.cluster.network
        network.register(conn.node, conn)
        state.connected(conn.node, broker_id)
        max_bytes = self.cluster.brokers[broker_id].config.socket_request_max_bytes
        try:
            async with stream:
                send, receive = trio.open_memory_channel[bytes](self.queue_size)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read, conn, stream, FrameReader(max_bytes), send)
                    async with receive:
                        while True:
                            # a queued frame is taken without a trip through trio's scheduler (the
                            # answer awaits what it must); cancellation is still seen at once
                            try:
                                frame = receive.receive_nowait()
                            except trio.WouldBlock:
                                try:
                                    frame = await receive.receive()
                                except trio.EndOfChannel:
                                    break
                            except trio.EndOfChannel:
                                break
                            else:
                                await trio.lowlevel.checkpoint_if_cancelled()
                            if not await self._answer(conn, stream, frame):
                                break
                    nursery.cancel_scope.cancel()
        finally:
            network.unregister(conn.node)
            state.disconnected(conn.node)

    async def _read(
        self, conn: Connection, stream: trio.SocketStream, reader: FrameReader, send: trio.MemorySendChannel
    ) -> None:
        async with send:
            while True:
                try:
                    data = await stream.receive_some(RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    unfinished = reader.unfinished()
                    if unfinished is not None:
                        conn.log(f"the client closed the connection after {unfinished}; closing")
                    return
                reader.feed(data)
                while True:
                    try:
                        frame = reader.next_frame()
                    except FrameError as error:
                        conn.log(f"{error}; closing")
                        return
                    if frame is None:
                        break
                    try:
                        # the receive just checkpointed: a frame the queue has room for goes in
                        # without another trip through the scheduler
                        send.send_nowait(frame)
                    except trio.WouldBlock:
                        try:
                            await send.send(frame)
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            return
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

    async def _answer(self, conn: Connection, stream: trio.SocketStream, frame: bytes) -> bool:
        """Answer one request; False when the connection must close."""
        await self.state.wait_client_links(conn.broker_id)
        try:
            request = decode_request(frame)
        except UnsupportedVersion as error:
            if error.api_key != API_VERSIONS_KEY:
                conn.log(f"{error}; closing")
                return False
            return await _send(stream, unsupported_api_versions_response(error.correlation_id))
        except RequestError as error:
            conn.log(f"{error}; closing")
            return False
        self.state.requests[request.name] += 1
        self.state.broker_requests[conn.broker_id, request.name] += 1
        reason = conn.unreachable()
        if reason is not None:
            # clients reconnect and retry at once: one line per broker and reason a second is plenty
            what = f"{request.name} v{request.api_version}: {reason}; closing"
            self.state.log_limited((conn.broker_id, reason), f"broker {conn.broker_id}: {conn.peer}: {what}")
            return False
        try:
            body = await handle(request, conn)
            data = body if body is None or isinstance(body, bytes) else encode_response(request, body)
        except CloseConnection as error:
            if self.cluster.brokers[conn.broker_id].alive:  # a crash has its own line (_serve_broker)
                conn.log(f"{request.name} v{request.api_version}: {error}; closing")
            return False
        except Exception as error:
            what = f"{request.name} v{request.api_version} correlation id {request.correlation_id}"
            if request.api_key == 0 and request.body.acks == 0:
                conn.log(f"{what}: internal error, no answer with acks=0; closing{traceback_block(error)}")
                return False
            try:
                data = error_response(request, UNKNOWN_SERVER_ERROR)
            except Exception as failed:
                conn.log(f"{what}: internal error; closing{traceback_block(error)}{traceback_block(failed)}")
                return False
            conn.log(f"{what}: internal error, answered UNKNOWN_SERVER_ERROR{traceback_block(error)}")
        if data is None:
            return True
        await self.state.wait_client_links(conn.broker_id)
        return await _send(stream, data)


async def _send(stream: trio.SocketStream, data: bytes) -> bool:
    """Write one response; False once the connection is gone.

    The whole frame goes out in one ``send`` on the non-blocking socket when the kernel takes it
    (a response is small next to a socket buffer), without a trip through trio's scheduler; only
    what it does not take is left to ``send_all``, which waits until the socket is writable.
    """
    fd = stream.socket.fileno()
    if fd < 0:  # closed
        return False
    try:
        sent = os.write(fd, data)
    except BlockingIOError:
        sent = 0
    except OSError:  # reset or closed by the client: the reader sees the end too
        return False
    if sent == len(data):
        return True
    try:
        await stream.send_all(memoryview(data)[sent:])
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


def traceback_block(error: BaseException) -> str:
    """A newline, then ``error``'s traceback: the rest of the one log entry that reports it."""
    return "\n" + "".join(traceback.format_exception(error)).rstrip()


def peer_address(stream: trio.SocketStream) -> str:
    """``host:port`` of the other end (``[host]:port`` for IPv6), or ``?`` once the socket is closed."""
    try:
        address = stream.socket.getpeername()
    except OSError:
        return "?"
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
