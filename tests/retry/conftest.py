"""A real redis-server on a free loopback port, in a temp dir, always stopped."""

from __future__ import annotations

import shutil

import pytest

from minibroker.retry.redis_server import RedisServer


def _prerequisites() -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (the README's test command installs it)")
    pytest.importorskip("redis", reason="redis-py is not installed (the test extra has it)")


@pytest.fixture
def redis_client():
    _prerequisites()
    with RedisServer() as server:
        yield server.client


@pytest.fixture
def durable_redis():
    """A redis-server with an append-only file fsynced on every write: ``kill()`` and ``restart()`` on
    the same port lose nothing it acknowledged."""
    _prerequisites()
    with RedisServer(durable=True) as server:
        yield server


@pytest.fixture
def volatile_redis():
    """A redis-server without persistence: ``restart()`` brings it back empty, as a Redis restarted
    without ``appendonly`` comes back."""
    _prerequisites()
    with RedisServer() as server:
        yield server
