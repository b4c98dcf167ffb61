"""A Fetch request's session context (KIP-227, Kafka's FetchManager.newContext) on the wire.

Which kind a request gets, from its session id and epoch (Fetch v7+; older
versions are always sessionless):

- epoch -1: *sessionless* (the session it names, if any, is closed); the answer
  has session id 0 and every partition. librdkafka always fetches this way.
- epoch 0: *full*; the session it names, if any, is closed and a new one is
  created from the request's partitions if the cache has room (else session
  id 0, and the client goes on with full fetches).
- epoch > 0: *incremental* against the named session. No such session:
  FETCH_SESSION_ID_NOT_FOUND; another epoch than the session's:
  INVALID_FETCH_SESSION_EPOCH (both as the top-level error, no partitions,
  session id 0). Otherwise the request's partitions are added or updated, its
  forgotten topics removed, the epoch moves on, and the fetch reads every
  partition of the session; the answer carries only those with records, an
  error or a changed HW / log start offset (``CachedPartition.must_respond``).
  A session left with no partitions is closed and the fetch is sessionless.

Each broker has its own cache, sized by its ``max.incremental.fetch.session.cache.slots``;
a crash loses it (a restarted broker has a new replica manager and so a new cache).
Every wire client is a consumer: sessions are unprivileged (followers are emulated
replicas that do not fetch over the wire).
"""

from __future__ import annotations

from typing import Any

import attrs

from minibroker.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)
from minibroker.common.messages import FetchPartition, PartitionFetchResponse, TopicPartition
from minibroker.server.context import Connection

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71

SESSIONLESS = "sessionless"
FULL = "full"
INCREMENTAL = "incremental"
ERROR = "error"


@attrs.define
class FetchContext:
    """What one Fetch request reads (``partitions``, in answer order) and how its answer is shaped."""

    kind: str
    partitions: dict[TopicPartition, FetchPartition]
    error: int = 0
    session: FetchSession | None = None


def session_cache(conn: Connection) -> FetchSessionCache:
    """The session cache of ``conn``'s broker; a new one after the broker restarted."""
    manager = conn.replica_manager()
    caches = conn.state.fetch_sessions
    slots = conn.cluster.brokers[conn.broker_id].config.max_incremental_fetch_session_cache_slots
    entry = caches.get(conn.broker_id)
    if entry is None or entry[0] is not manager:
        entry = caches[conn.broker_id] = (manager, FetchSessionCache(slots, seed=conn.broker_id))
    entry[1].max_entries = slots  # a config change at run time applies to the next creation
    return entry[1]


def _requested(body: Any, version: int) -> dict[TopicPartition, FetchPartition]:
    partitions: dict[TopicPartition, FetchPartition] = {}
    for topic in body.topics:
        for part in topic.partitions:
            partitions[TopicPartition(topic.topic, part.partition)] = FetchPartition(
                part.fetch_offset,
                part.partition_max_bytes,
                part.current_leader_epoch if version >= 9 else -1,
            )
    return partitions


def new_context(conn: Connection, body: Any, version: int) -> FetchContext:
    """Kafka's FetchManager.newContext for this request (module docstring); counts its kind."""
    requested = _requested(body, version)
    if version < 7:
        return _count(conn, FetchContext(SESSIONLESS, requested))
    cache = session_cache(conn)
    session_id, epoch = body.session_id, body.session_epoch
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        return _count(conn, FetchContext(FULL if epoch == INITIAL_EPOCH else SESSIONLESS, requested))
    session = cache.get(session_id)
    if session is None or session.epoch != epoch:
        code = FETCH_SESSION_ID_NOT_FOUND if session is None else INVALID_FETCH_SESSION_EPOCH
        return _count(conn, FetchContext(ERROR, {}, code))
    forgotten = [
        TopicPartition(topic.topic, partition)
        for topic in body.forgotten_topics_data
        for partition in topic.partitions
    ]
    changed = {
        tp: CachedPartition(p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
        for tp, p in requested.items()
    }
    session.update(changed, forgotten)
    if not session.partitions:
        cache.remove(session.id)
        return _count(conn, FetchContext(SESSIONLESS, requested))
    cache.touch(session, conn.cluster.now())
    session.epoch = next_epoch(session.epoch)
    reads = {
        tp: FetchPartition(c.fetch_offset, c.max_bytes, c.leader_epoch)
        for tp, c in session.partitions.items()
    }
    return _count(conn, FetchContext(INCREMENTAL, reads, session=session))


def _count(conn: Connection, context: FetchContext) -> FetchContext:
    conn.state.fetch_contexts[conn.broker_id, context.kind] += 1
    return context


def answer(
    conn: Connection, context: FetchContext, results: dict[TopicPartition, PartitionFetchResponse]
) -> tuple[int, list[TopicPartition]]:
    """The answer's session id and the partitions it carries, in order, given what was read."""
    if context.kind == SESSIONLESS:
        return INVALID_SESSION_ID, list(context.partitions)
    if context.kind == FULL:
        cached = {}
        for tp, request in context.partitions.items():
            result = results[tp]
            ok = not int(result.error)
            cached[tp] = CachedPartition(
                request.fetch_offset,
                request.partition_max_bytes,
                request.current_leader_epoch,
                result.high_watermark if ok else -1,
                result.log_start_offset if ok else -1,
            )
        session_id = session_cache(conn).maybe_create(conn.cluster.now(), False, cached)
        return session_id, list(context.partitions)
    session = context.session
    assert session is not None
    carried = []
    for tp in list(context.partitions):
        cached = session.partitions.get(tp)
        result = results[tp]
        error = int(result.error)
        hw, log_start = (result.high_watermark, result.log_start_offset) if not error else (-1, -1)
        if cached is not None and cached.must_respond(bool(result.batches), error, hw, log_start):
            carried.append(tp)
            if result.batches:
                session.move_to_end(tp)
    return session.id, carried


def session_figures(conn_state: Any, broker_id: int) -> dict[str, int]:
    """A broker's sessions now and the Fetch requests it answered by kind (a testing read-out)."""
    entry = conn_state.fetch_sessions.get(broker_id)
    alive = entry is not None and entry[0] is conn_state.cluster.brokers[broker_id].replica_manager
    cache = entry[1] if alive else None
    figures = {
        "sessions": len(cache) if cache is not None else 0,
        "partitions_cached": cache.num_partitions if cache is not None else 0,
        "evictions": cache.evictions if cache is not None else 0,
    }
    for kind in (FULL, INCREMENTAL, SESSIONLESS, ERROR):
        figures[f"{kind}_fetches"] = conn_state.fetch_contexts[broker_id, kind]
    return figures
