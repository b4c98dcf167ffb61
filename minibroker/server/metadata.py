"""ApiVersions and Metadata: what the cluster looks like to a Kafka client.

Metadata lists the live brokers at their listeners, a controller id (the
lowest live broker: KRaft brokers also name a live broker there), and per
partition the controller's leader, leader epoch, replicas, ISR and offline
replicas. A partition without a leader answers LEADER_NOT_AVAILABLE.

Topics a client names that do not exist are created when the broker's
``auto.create.topics.enable`` is true and the request allows it (Metadata v4+),
with ``num.partitions`` and ``default.replication.factor``; otherwise they are
UNKNOWN_TOPIC_OR_PARTITION. Kafka puts no bound on auto-creation; here at most
``minibroker.auto.create.topics.max`` topics (default 1000) are auto-created over
the cluster's life, so a crafted stream of Metadata requests cannot grow it
without limit. Past the bound a missing topic is answered as when auto-creation
is off, UNKNOWN_TOPIC_OR_PARTITION: what clients already handle for a topic that
does not exist (they retry until their own deadline), where a new error code
would be one they do not expect from Metadata. The first refusal is logged, the
rest only counted (``ServerState.auto_create_refusals``).

As in Kafka, the request that auto-creates a topic is answered with the topic
error LEADER_NOT_AVAILABLE and no partitions (creation is asynchronous there);
clients treat it as retriable and ask again, and the next Metadata request
names the leaders (creation here is immediate, so the first retry finds them;
in Kafka it may take a few).

Topic ids (Metadata v10+) are stable UUIDs derived from the topic name; a topic deleted
and created again under the same name gets a new one, as in Kafka.

With an authorizer (``acl_checks``) a listing leaves out the topics the caller may
not DESCRIBE, a named one answers TOPIC_AUTHORIZATION_FAILED, and auto-creation needs
CREATE on the cluster or the topic. ``include_topic_authorized_operations`` (v8+) and
``include_cluster_authorized_operations`` (v8-v10) answer Kafka's bitfields: every
operation of the resource type without an authorizer (``Connection.authorized_operations``).
"""

from __future__ import annotations

import uuid

from kafka.protocol.metadata import MetadataResponse

from minibroker.broker.config import ConfigError
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.common.topic_names import topic_error
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.server import acl_checks
from minibroker.server.acl_checks import topic_denied
from minibroker.server.authorizer import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC
from minibroker.server.codec import Request, api_versions_body
from minibroker.server.context import INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION, Connection
from minibroker.sim.cluster import Cluster, TopicSpec

_ZERO_ID = uuid.UUID(int=0)
_TOPIC_IDS = uuid.UUID("6d696e69-6272-6f6b-6572-746f70696373")  # namespace: "minibrokertopics"

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


def topic_id(name: str, cluster: Cluster | None = None) -> uuid.UUID:
    """The topic's id: a UUID derived from its name and how many topics of that name were deleted
    before it (Kafka gives a topic made again under an old name a new id)."""
    incarnation = cluster.topic_deletions.get(name, 0) if cluster is not None else 0
    return uuid.uuid5(_TOPIC_IDS, name if incarnation == 0 else f"{name}#{incarnation}")


async def api_versions(request: Request, conn: Connection) -> MetadataResponse:
    return api_versions_body(request.api_version)


async def metadata(request: Request, conn: Connection) -> MetadataResponse:
    body = request.body
    version = request.api_version
    cluster = conn.cluster
    if body.topics is None or (version == 0 and not body.topics):
        # hidden topics (minibroker.delayed_messages's levels) are left out of a listing, answered when named;
        # with an authorizer, so are the topics the caller may not describe (Kafka's filter)
        names: list[str | None] = sorted(
            n
            for n, spec in cluster.topics.items()
            if not spec.internal and not topic_denied(conn, DESCRIBE, n)
        )
    else:
        by_id = {topic_id(name, cluster): name for name in cluster.topics}
        names = [t.name if t.name is not None else by_id.get(t.topic_id) for t in body.topics]
    allow_create = body.allow_auto_topic_creation if version >= 4 else True
    alive = [b.broker_id for b in cluster.brokers if b.alive]
    brokers = [
        Broker(node_id=b, host=conn.state.listeners[b][0], port=conn.state.listeners[b][1], rack=None)
        for b in alive
        if b in conn.state.listeners
    ]
    topics = [_topic(conn, name, allow_create, alive) for name in dict.fromkeys(names)]
    if version >= 8:
        for topic in topics:
            if body.include_topic_authorized_operations and topic.error_code == Errors.NONE:
                topic.authorized_operations = conn.authorized_operations(TOPIC, topic.name)
    response = MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=conn.state.cluster_id,
        controller_id=alive[0] if alive else -1,
        topics=topics,
        error_code=0,
    )
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        response.authorized_operations = conn.authorized_operations(CLUSTER, CLUSTER_NAME)
    return response


def _topic(conn: Connection, name: str | None, allow_create: bool, alive: list[int]) -> Topic:
    cluster = conn.cluster
    if name is None:
        return Topic(error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION, name=None, partitions=[])
    if topic_denied(conn, DESCRIBE, name):
        error = Errors.TOPIC_AUTHORIZATION_FAILED
        return Topic(error_code=error, name=name, topic_id=_ZERO_ID, partitions=[])
    if name not in cluster.topics:
        error = _maybe_create(conn, name, allow_create)
        if error is not None:
            return Topic(error_code=error, name=name, topic_id=topic_id(name, cluster), partitions=[])
        if name not in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
            return Topic(
                error_code=Errors.LEADER_NOT_AVAILABLE,
                name=name,
                topic_id=topic_id(name, cluster),
                partitions=[],
            )
    spec = cluster.topics[name]
    partitions = []
    for p in range(spec.partitions):
        state = cluster.controller.state[TopicPartition(name, p)]
        partitions.append(
            Partition(
                error_code=Errors.NONE if state.leader >= 0 else Errors.LEADER_NOT_AVAILABLE,
                partition_index=p,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[b for b in state.replicas if b not in alive],
            )
        )
    return Topic(
        error_code=Errors.NONE,
        name=name,
        topic_id=topic_id(name, cluster),
        is_internal=name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC),
        partitions=partitions,
    )


def _maybe_create(conn: Connection, name: str, allow_create: bool) -> int | None:
    """Create ``name`` if this broker and the request allow it; the topic's error code otherwise."""
    if name == OFFSETS_TOPIC:  # internal: made with its own settings, as FindCoordinator makes it
        conn.cluster.ensure_offsets_topic()
        return None
    if name == TRANSACTION_STATE_TOPIC:
        conn.cluster.ensure_transaction_state_topic()
        return None
    config = conn.cluster.brokers[conn.broker_id].config
    invalid = topic_error(name)
    if invalid is not None:
        conn.log(f"Metadata: {invalid}")
        return INVALID_TOPIC_EXCEPTION
    if not (config.auto_create_topics_enable and allow_create):
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    if acl_checks.enforced(conn) and not (
        conn.authorize(CREATE, CLUSTER, CLUSTER_NAME) or conn.authorize(CREATE, TOPIC, name)
    ):
        return Errors.TOPIC_AUTHORIZATION_FAILED
    state = conn.state
    if state.auto_created >= config.auto_create_topics_max:
        state.auto_create_refusals += 1
        if state.auto_create_refusals == 1:
            conn.log(
                f"Metadata: not auto-creating {name!r}: {state.auto_created} topics were auto-created, "
                f"the most minibroker.auto.create.topics.max allows; answering UNKNOWN_TOPIC_OR_PARTITION "
                "(further refusals are counted, not logged)"
            )
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    spec = TopicSpec(name, config.num_partitions, config.default_replication_factor)
    try:
        conn.cluster.create_topic(spec)
    except ConfigError as error:
        conn.log(f"Metadata: cannot auto-create {name!r}: {error}")
        return INVALID_REPLICATION_FACTOR
    state.auto_created += 1
    conn.log(
        f"auto-created topic {name!r}: {spec.partitions} partition(s), replication factor "
        f"{spec.replication_factor}"
    )
    return None
