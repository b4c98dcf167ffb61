"""``serve --control PORT``: the ``Control`` actions as a small HTTP/JSON API on loopback.

Stdlib ``http.server`` (a ``ThreadingHTTPServer`` on a daemon thread): the API
is a dozen routes answered in microseconds, so a framework would add a
dependency and nothing else; each request thread calls ``Control``, which hands
the work to the server's trio run and returns once it took effect.

Routes (described in docs/control-openapi.json, which the tests validate against):

- ``POST /v1/<action>`` with a JSON object of the action's arguments, e.g.
  ``POST /v1/crash {"broker": 0}``; answers ``{"ok": true}``;
- ``GET /v1/<read-out>?arg=value`` (``cluster``, ``partition``, ``purgatories``,
  ``requests``, ``pending_errors``, ``fetch_sessions``); answers the read-out as JSON.

Bad input answers 400 with ``{"error": "<one line>"}``; an unknown route 404;
a body over 64 KiB 413. It binds loopback only unless told otherwise.
"""

from __future__ import annotations

import inspect
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from minibroker.server.control import Control

ACTIONS = (
    "pause_fetcher",
    "resume_fetcher",
    "set_client_latency",
    "set_link_latency",
    "drop_link",
    "heal_link",
    "crash",
    "restart",
    "shutdown",
    "move_leader",
    "set_config",
    "push_errors",
)
READ_OUTS = ("partition", "purgatories", "requests", "pending_errors", "fetch_sessions")
MAX_BODY = 65_536
PREFIX = "/v1/"


def _call(control: Control, name: str, arguments: dict[str, Any]) -> Any:
    method = getattr(control, name)
    try:
        inspect.signature(method).bind(**arguments)
    except TypeError as error:
        raise ValueError(f"{name}: {error}") from None
    return method(**arguments)


def _query_value(text: str) -> Any:
    """Query values are strings; whole numbers become ints (broker ids, partitions)."""
    return int(text) if text.lstrip("-").isdigit() else text


class _Handler(BaseHTTPRequestHandler):
    server_version = "minibroker-control/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged; errors go back to the caller

    @property
    def control(self) -> Control:
        return self.server.control  # type: ignore[attr-defined]

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, allowed: tuple[str, ...]) -> str | None:
        path = urlsplit(self.path).path
        name = path[len(PREFIX) :] if path.startswith(PREFIX) else ""
        if name not in allowed:
            self._answer(404, {"error": f"no route {self.command} {path}"})
            return None
        return name

    def do_GET(self) -> None:
        name = self._route((*READ_OUTS, "cluster"))
        if name is None:
            return
        arguments = {k: _query_value(v) for k, v in parse_qsl(urlsplit(self.path).query)}
        try:
            if name == "cluster":
                if arguments:
                    raise ValueError(f"cluster takes no arguments, got {sorted(arguments)}")
                body = {"bootstrap_servers": self.control.bootstrap_servers, "brokers": self.control.brokers}
            else:
                body = _call(self.control, name, arguments)
        except ValueError as error:
            self._answer(400, {"error": str(error)})
            return
        self._answer(200, body)

    def do_POST(self) -> None:
        name = self._route(ACTIONS)
        if name is None:
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._answer(400, {"error": "Content-Length is not a number"})
            return
        if not 0 <= length <= MAX_BODY:
            self._answer(413, {"error": f"a body of {length} bytes; at most {MAX_BODY}"})
            return
        try:
            arguments = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(arguments, dict):
                raise ValueError(f"{name}: expected a JSON object of arguments")
            _call(self.control, name, arguments)
        except json.JSONDecodeError as error:
            self._answer(400, {"error": f"{name}: the body is not JSON ({error})"})
            return
        except ValueError as error:
            self._answer(400, {"error": str(error)})
            return
        self._answer(200, {"ok": True})


class ControlServer:
    """The HTTP API on ``host:port`` (0: a free port): bound at once (``OSError`` if it cannot be),
    serving ``control`` from ``start`` to ``stop``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="minibroker-control", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self, control: Control) -> ControlServer:
        self.httpd.control = control  # type: ignore[attr-defined]
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()
