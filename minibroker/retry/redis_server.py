"""A private redis-server on a free loopback port, in a temporary directory, always stopped.

The tests and scenarios with ``backend = "redis"`` and no ``redis_url`` start one; nothing is saved
(``--save '' --appendonly no``). ``RedisServer(durable=True)`` keeps an append-only file fsynced on every
write instead, so that ``kill()`` (SIGKILL) and ``restart()`` (same port, same directory) lose nothing
Redis acknowledged. ``RedisUnavailable`` says in one line what is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

from minibroker.extras import MissingExtra, optional_import

#: how long a starting server may take to answer PING on a loaded machine (real time)
START_TIMEOUT_S = 10
NO_PERSISTENCE = ("--save", "", "--appendonly", "no")
#: every acknowledged write is on disk before the reply: a SIGKILL loses nothing acknowledged
DURABLE = ("--save", "", "--appendonly", "yes", "--appendfsync", "always")


class RedisUnavailable(RuntimeError):
    """No redis-server binary, no redis-py, or a server that does not answer."""


def redis_module() -> Any:
    try:
        return optional_import("redis", "retry", "a redis backend")
    except MissingExtra as error:
        raise RedisUnavailable(str(error)) from None


def connect(url: str) -> Any:
    """A redis-py client of ``url`` that answered PING."""
    redis = redis_module()
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except (redis.ConnectionError, redis.TimeoutError, ValueError) as error:
        client.close()
        raise RedisUnavailable(f"cannot reach redis at {url}: {error}") from None
    return client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """``with RedisServer() as server: server.client`` (redis-py), ``server.url``."""

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.process: subprocess.Popen | None = None
        self.client: Any = None
        self.url = ""
        self.port = 0
        self._dir: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> RedisServer:
        redis = redis_module()
        self._dir = tempfile.TemporaryDirectory(prefix="minibroker-redis-")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis(host="127.0.0.1", port=self.port)
        try:
            self._start()
        except RedisUnavailable:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        """Start redis-server on ``port`` in the directory; return once it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisUnavailable("redis-server is not installed (Debian: apt-get install redis-server)")
        redis = redis_module()
        persistence = DURABLE if self.durable else NO_PERSISTENCE
        assert self._dir is not None
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", *persistence, "--dir", self._dir.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:  # BusyLoadingError (reading its file) is one
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RedisUnavailable(f"redis-server did not start on 127.0.0.1:{self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server and reap it (with ``durable``, its data is in its append-only file)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.client is not None:
            self.client.connection_pool.disconnect()

    def restart(self) -> None:
        """Start the server again on the same port and directory (after ``kill``)."""
        self.kill()
        self._start()

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._dir is not None:
            self._dir.cleanup()
