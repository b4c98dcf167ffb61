"""A served cluster in a background thread, and a raw Kafka-protocol client, for the wire tests.

Everything runs on loopback with ephemeral ports in real time; every wait has a timeout.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

with warnings.catch_warnings():
    # kafka-python 3.0.12 loads its JSON schemas through importlib.resources' deprecated API, once,
    # when kafka.protocol is first imported: import it here, quietly, before any test module does
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol.admin  # noqa: F401

    import minibroker.server.codec  # noqa: F401

from minibroker.scenario import parse_scenario
from minibroker.scenario.model import Scenario
from minibroker.server.serve import Served, for_serving, open_served

#: a generous bound for any single wait in these tests (they all finish far sooner)
WAIT_S = 10.0


def scenario(
    brokers: int = 3, config: str = "", topics: str = 'name = "t"\npartitions = 1\nreplication_factor = 3'
) -> Scenario:
    text = f"[cluster]\nbrokers = {brokers}\nconfig = {{ {config} }}\n\n[[topics]]\n{topics}\n"
    return for_serving(parse_scenario(text, "test.toml"))


class ServedThread:
    """``open_served`` on its own trio run in a thread; ``call`` runs a function in that run."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.logs: list[str] = []
        self.served: Served | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="minibroker-serve", daemon=True)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as error:  # reported by start() or stop()
            self._error = error
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with open_served(self.scenario, "127.0.0.1", 0, log=self.logs.append) as served:
            self.served = served
            self._ready.set()
            await self._stop.wait()

    def start(self) -> ServedThread:
        self._thread.start()
        if not self._ready.wait(WAIT_S) or self._error is not None:
            raise RuntimeError(f"the server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the server thread did not stop"
        if self._error is not None:
            raise self._error

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` inside the server's trio run (the cluster is not thread-safe)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def call_async(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run the async ``fn(*args)`` inside the server's trio run."""
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    @property
    def cluster(self):
        return self.served.cluster

    @property
    def bootstrap(self) -> str:
        return self.served.bootstrap_servers

    def port(self, broker: int) -> int:
        return self.served.listeners[broker][1]

    def snapshot(self):
        return self.call(self.cluster.snapshot)

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
        """Poll ``condition`` (run in the server) until true; return the seconds it took."""
        start = time.monotonic()
        while not self.call(condition):
            if time.monotonic() - start > timeout:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.01)
        return time.monotonic() - start


@pytest.fixture
def serve() -> Iterator[Callable[[Scenario], ServedThread]]:
    """``serve(scenario)`` starts a server; every server started is stopped at teardown."""
    started: list[ServedThread] = []

    def start(scenario_: Scenario) -> ServedThread:
        server = ServedThread(scenario_).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


class RawClient:
    """One socket speaking Kafka's protocol through kafka-python's request and response classes."""

    def __init__(self, port: int, timeout: float = WAIT_S) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.correlation = 0

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any, version: int) -> int:
        self.correlation += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation, client_id="raw")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return self.correlation

    def receive_frame(self) -> bytes | None:
        """The next frame's payload, or None if the server closed the connection."""
        head = self._read(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read(size)

    def receive(self, response_class: Any, version: int) -> Any:
        payload = self.receive_frame()
        assert payload is not None, "the server closed the connection"
        return response_class.decode(payload, version=version, header=True)

    def request(self, request: Any, response_class: Any, version: int) -> Any:
        correlation = self.send(request, version)
        response = self.receive(response_class, version)
        assert response.header.correlation_id == correlation
        return response

    def closed_by_server(self) -> bool:
        """True once the server has closed its end (reads EOF or a reset), within the timeout."""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def _read(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            try:
                chunk = self.sock.recv(n - len(out))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()
