"""A real redis-server on a free loopback port, in a temp dir, always stopped."""

from __future__ import annotations

import shutil

import pytest

from minibroker.retry.redis_server import RedisServer


@pytest.fixture
def redis_client():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (the README's test command installs it)")
    pytest.importorskip("redis", reason="redis-py is not installed (the test extra has it)")
    with RedisServer() as server:
        yield server.client
