"""``serve --control PORT``: the ``Control`` actions as a small HTTP/JSON API on loopback.

Routes (described in docs/control-openapi.json, which the tests validate against):

- ``POST /v1/<action>`` with a JSON object of the action's arguments, e.g.
  ``POST /v1/crash {"broker": 0}``; answers ``{"ok": true}`` once the effect is in place;
- ``GET /v1/<read-out>?arg=value`` (``cluster``, ``partition``, ``purgatories``,
  ``requests``, ``pending_errors``, ``fetch_sessions``, ``transactions``, ``transaction``,
  ``share_partitions``, ``share_group_offsets``, ``consumer_group``);
  answers the read-out as JSON.

HTTP is parsed by h11 (``h11==0.16.0``: pure Python, no dependencies,
bring-your-own-I/O: it parses, bounds the head and decodes chunked bodies; the
I/O is ours) and the sockets are driven by trio: inside
``serve``'s own trio run (``ControlServer.serve``), or on one thread of its own
for in-process use (``start``/``stop``). No thread per connection: a connection is
a trio task; only the ``Control`` call of a complete, valid request runs on one
of at most ``WORKERS`` worker threads, because ``Control`` blocks until the
server's trio run has applied the action. A framework (an ASGI server) would
bring a dependency tree and still need these bounds written around it.

Every request is answered, and every refusal is ``{"error": "<one line>"}`` with
one line on the log (never a traceback; an exception inside minibroker is
answered 500 and logged once with its traceback):

- 400: malformed HTTP (h11's reason), a ``Content-Length`` that is not a
  whole number, a body that is not UTF-8, not JSON, not an object, nested
  deeper than ``MAX_DEPTH``, or arguments the action refuses; 404: an unknown
  route; 405: a known route with the other method (``Allow`` says which);
- 408: a request (head and body) not received within ``read_timeout_s``
  (10 s) of the connection's opening or of the previous answer; a connection
  that sent nothing of a next request is closed silently then;
- 413: a body over ``MAX_BODY`` (64 KiB), by ``Content-Length`` or as chunks
  arrive (``Transfer-Encoding: chunked`` is accepted); 431: a head over
  ``MAX_HEAD`` (16 KiB); 501: a transfer coding other than chunked;
- 503: ``max_connections`` (64) already open: the connection is answered at
  once and closed, without reading its request.

The listening socket is bound with a backlog of ``BACKLOG`` (1,024): a crowd
connecting at once waits in the kernel's queue (no file descriptor in this
process) instead of having its connections dropped and retried. Actions on
the cluster are applied one at a time in arrival order (``Control`` holds one
lock across each action, a restart's awaits included), so a restart racing a
crash of the same broker is two answered actions in the order they arrived.
It binds loopback only unless told otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import re
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import h11
import trio

from minibroker.server.control import Control
from minibroker.server.server import peer_address, stderr_log, traceback_block

ACTIONS = (
    "pause_fetcher",
    "resume_fetcher",
    "set_client_latency",
    "set_link_latency",
    "drop_link",
    "heal_link",
    "drop_client_links",
    "heal_client_links",
    "crash",
    "restart",
    "shutdown",
    "move_leader",
    "set_config",
    "push_errors",
    "abort_transaction",
    "delay_markers",
    "crash_transaction_coordinator",
    "move_transaction_coordinator",
    "expire_share_locks",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "fence_group_member",
)
READ_OUTS = (
    "partition",
    "purgatories",
    "requests",
    "pending_errors",
    "fetch_sessions",
    "transactions",
    "transaction",
    "share_partitions",
    "share_group_offsets",
    "consumer_group",
)
#: actions whose answer carries what they return, under this key (the crashed broker's id)
RESULTS = {"crash_transaction_coordinator": "broker", "expire_share_locks": "released"}
PREFIX = "/v1/"
#: the largest request body, in bytes (413 beyond)
MAX_BODY = 65_536
#: the largest request line and headers, in bytes (431 beyond)
MAX_HEAD = 16_384
#: the deepest nesting of JSON arrays and objects in a body (400 beyond)
MAX_DEPTH = 32
#: seconds a request (head and body) may take to arrive; an idle connection is closed after as long
READ_TIMEOUT_S = 10.0
#: connections served at once; one more is answered 503 and closed
MAX_CONNECTIONS = 64
#: the listening socket's queue of connections not accepted yet (the kernel caps it at somaxconn)
BACKLOG = 1024
#: threads that call ``Control`` (each blocks until the server's trio run applied the action)
WORKERS = 4
#: bytes asked of a socket at a time
RECEIVE_BYTES = 16_384
#: seconds a refused connection is drained for before it is closed, so its client reads the 503
REFUSAL_DRAIN_S = 0.5

_ACCEPT_CAPACITY = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_ACCEPT_TRANSIENT = {
    getattr(errno, name)
    for name in ("ECONNABORTED", "EPROTO", "EPERM", "EINTR", "ENETDOWN", "ENETUNREACH", "EHOSTDOWN", "ENONET")
    if hasattr(errno, name)
}
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Refused(Exception):
    """A request answered with ``status`` and a one-line ``message``; ``close`` ends the connection."""

    def __init__(self, status: int, message: str, close: bool = False, headers: tuple = ()) -> None:
        super().__init__(message)
        self.status = status
        self.close = close
        self.headers = headers


def _depth(text: str) -> int:
    """How deep arrays and objects nest in the JSON ``text`` (strings skipped), without recursion."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_body(name: str, body: bytes) -> dict[str, Any]:
    """The JSON object of an action's arguments; ``_Refused`` (400) says what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _Refused(
            400, f"{name}: the body is not UTF-8 (byte 0x{body[error.start]:02x} at offset {error.start})"
        ) from None
    if not text.strip():
        return {}
    if _depth(text) > MAX_DEPTH:
        raise _Refused(400, f"{name}: the body is nested deeper than {MAX_DEPTH} arrays and objects")
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        raise _Refused(400, f"{name}: the body is not JSON ({error})") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise _Refused(400, f"{name}: the body is not JSON a server can read ({error})") from None
    if not isinstance(arguments, dict):
        raise _Refused(400, f"{name}: expected a JSON object of arguments")
    return arguments


def _call(control: Control, name: str, arguments: dict[str, Any]) -> Any:
    method = getattr(control, name)
    try:
        inspect.signature(method).bind(**arguments)
    except TypeError as error:
        raise ValueError(f"{name}: {error}") from None
    return method(**arguments)


#: query arguments read as whole numbers; every other one stays a string (a transactional id "007")
_INTEGER_ARGUMENTS = frozenset({"broker", "partition"})


def _query_value(key: str, text: str) -> Any:
    """Query values are strings; whole numbers become ints for broker ids and partitions."""
    numeric = key in _INTEGER_ARGUMENTS and text.lstrip("-").isdigit() and len(text) <= 20
    return int(text) if numeric else text


def _read_out(control: Control, name: str, query: str) -> Any:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, errors="strict", max_num_fields=16)
    except UnicodeDecodeError:
        raise ValueError(f"{name}: the query is not UTF-8 once percent-decoded") from None
    except ValueError as error:  # too many fields
        raise ValueError(f"{name}: {error}") from None
    arguments = {key: _query_value(key, value) for key, value in pairs}
    if name == "cluster":
        if arguments:
            raise ValueError(f"cluster takes no arguments, got {sorted(arguments)}")
        return {"bootstrap_servers": control.bootstrap_servers, "brokers": control.brokers}
    return _call(control, name, arguments)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=BACKLOG)


class ControlServer:
    """The HTTP API on ``host:port`` (0: a free port): bound at once (``OSError`` if it cannot be),
    serving a ``Control`` with ``serve`` (in the caller's trio run) or ``start`` to ``stop`` (a thread).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        log: Callable[[str], None] = stderr_log,
    ) -> None:
        self._socket = _bind(host, port)
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self.log = log
        #: connections being served, and refused ones being drained
        self.open = 0
        self.refusing = 0
        self._workers = trio.CapacityLimiter(WORKERS)
        self._thread: threading.Thread | None = None
        self._stopped: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._failure: BaseException | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._socket.getsockname()[:2]
        return str(host), int(port)

    # --- running -------------------------------------------------------------------------------
    async def serve(
        self, control: Control, *, task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept and answer connections until cancelled; the socket is closed at the end."""
        listener = trio.socket.from_stdlib_socket(self._socket)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(self.address)
                while True:
                    try:
                        sock, _ = await listener.accept()
                    except OSError as error:
                        if error.errno in _ACCEPT_TRANSIENT:  # the peer gave up before it was accepted
                            await trio.lowlevel.checkpoint()
                            continue
                        if error.errno in _ACCEPT_CAPACITY:
                            self.log(f"control API: cannot accept a connection ({error.strerror}); retrying")
                            await trio.sleep(0.1)
                            continue
                        self.log(f"control API: stopped accepting connections ({error})")
                        await trio.sleep_forever()  # the connections open are still answered
                    stream = trio.SocketStream(sock)
                    if self.open >= self.max_connections:
                        self.refusing += 1
                        nursery.start_soon(self._refuse, stream)
                    else:
                        self.open += 1
                        nursery.start_soon(self._connection, control, stream)
        finally:
            listener.close()

    def start(self, control: Control) -> ControlServer:
        """Serve on a thread of its own (for a ``Control`` used in-process) until ``stop``."""
        started = threading.Event()

        async def main() -> None:
            self._stopped = trio.Event()
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                await nursery.start(self.serve, control)
                started.set()
                await self._stopped.wait()
                nursery.cancel_scope.cancel()

        def run() -> None:
            try:
                trio.run(main)
            except BaseException as error:  # reported by stop()
                self._failure = error
                started.set()

        self._thread = threading.Thread(target=run, name="minibroker-control", daemon=True)
        self._thread.start()
        started.wait()
        return self

    def stop(self) -> None:
        if self._thread is None:
            self._socket.close()
            return
        if self._thread.is_alive() and self._token is not None and self._stopped is not None:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stopped.set, trio_token=self._token)
        self._thread.join()
        if self._failure is not None:
            raise RuntimeError(f"the control API failed: {self._failure!r}") from self._failure

    # --- connections ---------------------------------------------------------------------------
    async def _refuse(self, stream: trio.SocketStream) -> None:
        """503 at once, then close; at most ``max_connections`` refusals linger (to be read) at a time."""
        message = f"{self.max_connections} connections are open, the most the control API serves at once"
        self.log(f"control API: 503 from {peer_address(stream)}: {message}")
        try:
            with trio.move_on_after(REFUSAL_DRAIN_S):
                await stream.send_all(_answer(h11.Connection(h11.SERVER), 503, {"error": message}, True))
            if self.refusing > self.max_connections:
                await stream.aclose()  # too many refusals at once to wait for their clients
            else:
                await _linger(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await stream.aclose()
        finally:
            self.refusing -= 1

    async def _connection(self, control: Control, stream: trio.SocketStream) -> None:
        peer = peer_address(stream)
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while True:
                request = await self._exchange(control, connection, stream, peer)
                if not request or connection.our_state is not h11.DONE:
                    break
                if connection.their_state is not h11.DONE:
                    break
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            self.log(f"control API: connection from {peer} lost ({_reason(error)})")
        except Exception as error:  # a bug in minibroker: logged once, the connection closed
            self.log(f"control API: internal error on a connection from {peer}{traceback_block(error)}")
        finally:
            self.open -= 1
            await _linger(stream)

    async def _exchange(
        self, control: Control, connection: h11.Connection, stream: trio.SocketStream, peer: str
    ) -> bool:
        """Read one request and answer it; False when the connection is to close."""
        progress: list[Any] = [False, None]  # any byte of this request yet, its head once read
        route, head_only = "", False
        status, body, close, headers = 200, None, False, ()
        try:
            with trio.fail_after(self.read_timeout_s):
                head, data = await self._receive(connection, stream, progress)
            if head is None:
                return False  # the client closed between requests
            method = head.method.decode("ascii", "replace")
            target = head.target.decode("ascii", "replace")
            route, head_only = f"{method} {urlsplit(target).path}", method == "HEAD"
            body = await self._dispatch(control, method, target, data)
        except trio.TooSlowError:
            if not progress[0] and connection.their_state is h11.IDLE:
                return False  # idle between requests: closed without a word
            status, close = 408, True
            message = f"the request did not arrive within {self.read_timeout_s:g} s"
        except h11.RemoteProtocolError as error:
            if connection.their_state is h11.IDLE and not progress[0]:
                return False
            status, close = error.error_status_hint, True
            message = f"malformed HTTP request: {_shortened(str(error))}"
        except _Refused as refusal:
            if progress[1] is not None and not route:  # refused while its body arrived
                route = f"{progress[1].method.decode()} {urlsplit(progress[1].target.decode()).path}"
            status, close, headers = refusal.status, refusal.close, refusal.headers
            message = str(refusal)
        except ValueError as error:
            status, message = 400, str(error)
        except trio.RunFinishedError:
            status, close, message = 503, True, "the cluster is stopping"
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise
        except Exception as error:
            status, message = 500, f"internal error: {type(error).__name__}: {error}"
            self.log(f"control API: 500 {route} from {peer}{traceback_block(error)}")
        if status != 200:
            if status != 500:
                self.log(f"control API: {status} {route or 'request'} from {peer}: {message}")
            body = {"error": message}
        if connection.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return False
        close = close or connection.their_state is not h11.DONE
        with trio.move_on_after(self.read_timeout_s) as sending:
            try:
                await stream.send_all(_answer(connection, status, body, close, headers, head_only))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False  # the client left before its answer; nothing more to say
        return not (close or sending.cancelled_caught)

    async def _receive(
        self, connection: h11.Connection, stream: trio.SocketStream, progress: list[Any]
    ) -> tuple[h11.Request | None, bytes]:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(RECEIVE_BYTES)
                progress[0] = progress[0] or bool(data)
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                head = progress[1] = event
                length = dict(event.headers).get(b"content-length")
                if length is not None and int(length) > MAX_BODY:
                    raise _Refused(413, f"a body of {int(length)} bytes; at most {MAX_BODY}", close=True)
                if connection.they_are_waiting_for_100_continue:
                    await stream.send_all(
                        connection.send(h11.InformationalResponse(status_code=100, headers=[]))
                    )
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    raise _Refused(413, f"a body of more than {MAX_BODY} bytes", close=True)
            elif isinstance(event, h11.EndOfMessage):
                return head, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                return None, b""
            else:  # PAUSED: the client asked to switch protocols (Upgrade, CONNECT); it stays HTTP/1.1
                raise _Refused(400, "a protocol switch is not offered here", close=True)

    async def _dispatch(self, control: Control, method: str, target: str, data: bytes) -> Any:
        parts = urlsplit(target)
        name = parts.path[len(PREFIX) :] if parts.path.startswith(PREFIX) else ""
        allowed = "POST" if name in ACTIONS else "GET" if name in (*READ_OUTS, "cluster") else None
        if allowed is None:
            raise _Refused(404, f"no route {method} {parts.path}")
        if method != allowed:
            raise _Refused(
                405, f"{method} {parts.path}: only {allowed} is answered here", headers=(("Allow", allowed),)
            )
        if method == "GET":
            work, arguments = _read_out, (control, name, parts.query)
        else:
            work, arguments = _call, (control, name, parse_body(name, data))
        result = await trio.to_thread.run_sync(
            lambda: work(*arguments), limiter=self._workers, abandon_on_cancel=True
        )
        if method == "GET":
            return result
        return {"ok": True, RESULTS[name]: result} if name in RESULTS else {"ok": True}


def _answer(
    connection: h11.Connection,
    status: int,
    body: Any,
    close: bool = False,
    headers: tuple = (),
    head_only: bool = False,
) -> bytes:
    """The response's bytes (no body for a HEAD request, whose answer is only ever a refusal)."""
    data = json.dumps(body).encode()
    fields = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(data))),
        ("Server", "minibroker-control/1"),
        *headers,
    ]
    if close:
        fields.append(("Connection", "close"))
    return (
        connection.send(h11.Response(status_code=status, headers=fields))
        + (b"" if head_only else connection.send(h11.Data(data=data)))
        + connection.send(h11.EndOfMessage())
    )


async def _linger(stream: trio.SocketStream) -> None:
    """Close after reading what the client still sends, for ``REFUSAL_DRAIN_S`` at most.

    Closing a socket with unread bytes makes the kernel reset the connection, and the client
    would lose the answer it was sent; so the server ends its side first and drains.
    """
    with trio.move_on_after(REFUSAL_DRAIN_S) as draining:
        draining.shield = True
        try:
            await stream.send_eof()
            drained = 0
            while drained <= MAX_BODY + MAX_HEAD and (data := await stream.receive_some(RECEIVE_BYTES)):
                drained += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    await stream.aclose()


def _shortened(text: str, limit: int = 200) -> str:
    """h11's reasons quote the offending bytes: at most ``limit`` characters of them on one line."""
    return text if len(text) <= limit else text[:limit] + "..."


def _reason(error: BaseException) -> str:
    cause = error.__cause__ or error.__context__ or error
    return getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
