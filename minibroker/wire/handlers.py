"""The handler of each supported API: ``HANDLERS[api_key](request, connection)``.

A handler returns the response body (a kafka-python response object), None
when the request gets no answer (Produce with acks=0), or raises
``CloseConnection``. Every key in ``codec.SUPPORTED`` has a handler here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from minibroker.wire.codec import SUPPORTED, Request
from minibroker.wire.context import Connection
from minibroker.wire.fetch import fetch, list_offsets, offset_for_leader_epoch
from minibroker.wire.metadata import api_versions, metadata
from minibroker.wire.produce import init_producer_id, produce

Handler = Callable[[Request, Connection], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    18: api_versions,
    22: init_producer_id,
    23: offset_for_leader_epoch,
}

assert set(HANDLERS) == set(SUPPORTED), "every supported API needs a handler"
