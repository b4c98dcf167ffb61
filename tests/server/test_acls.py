"""ACLs: Kafka's StandardAuthorizer rules; confluent-kafka creating, describing, deleting, meeting them."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CkProducer
from confluent_kafka.admin import (
    AclBinding as CkAcl,
)
from confluent_kafka.admin import (
    AclBindingFilter as CkFilter,
)
from confluent_kafka.admin import (
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from minibroker.server import authorizer as a
from minibroker.server.authorizer import AclBinding, AclBindingFilter, Authorizer, InvalidAcl, to_bitfield
from tests.server.conftest import WAIT_S, scenario

ME = a.ANONYMOUS


def acl(name: str, operation: int, permission: int = a.ALLOW, pattern: int = a.LITERAL, principal: str = ME):
    return AclBinding(a.TOPIC, name, pattern, principal, "*", operation, permission)


def test_deny_wins_writes_imply_describe_and_patterns_match_as_in_kafka():
    auth = Authorizer()
    auth.create(acl("orders", a.WRITE))
    auth.create(acl("ord", a.READ, pattern=a.PREFIXED))
    auth.create(acl("*", a.DESCRIBE, a.DENY, principal="User:*"))
    assert auth.authorize(ME, "127.0.0.1", a.WRITE, a.TOPIC, "orders")
    assert auth.authorize(ME, "127.0.0.1", a.READ, a.TOPIC, "orders-eu")  # the prefix
    assert not auth.authorize(ME, "127.0.0.1", a.DESCRIBE, a.TOPIC, "orders")  # a DENY on * wins
    auth.delete(AclBindingFilter(a.ANY, "*", a.ANY, None, None, a.ANY, a.ANY))
    assert auth.authorize(ME, "127.0.0.1", a.DESCRIBE, a.TOPIC, "orders")  # WRITE implies DESCRIBE
    assert not auth.authorize(ME, "127.0.0.1", a.DELETE, a.TOPIC, "orders")
    assert not auth.authorize(ME, "127.0.0.1", a.READ, a.TOPIC, "other")  # no ACL: denied by default
    assert auth.authorize(ME, "127.0.0.1", a.READ, a.TOPIC, "other", allow_if_no_acl=True)
    assert auth.authorize(ME, "127.0.0.1", a.DELETE, a.TOPIC, "orders", super_users=frozenset({ME}))
    match = AclBindingFilter(a.TOPIC, "orders-eu", a.MATCH, None, None, a.ANY, a.ANY)
    assert [b.resource_name for b in auth.describe(match)] == ["ord"]


def test_kafka_refuses_bad_bindings_and_filters_with_its_messages():
    auth = Authorizer()
    for binding, message in (
        (
            AclBinding(a.CLUSTER, "c", a.LITERAL, ME, "*", a.ALTER, a.ALLOW),
            "The only valid name for the CLUSTER",
        ),
        (acl("t", a.ANY), "Invalid operation ANY"),
        (acl("t", a.READ, pattern=a.MATCH), "Invalid patternType MATCH"),
        (acl("t", a.READ, a.ANY), "Invalid permissionType ANY"),
        (acl("", a.READ), "Invalid empty resource name"),
        (acl("t", a.READ, principal="ANONYMOUS"), "principalType:principalName"),
    ):
        with pytest.raises(InvalidAcl, match=message):
            auth.create(binding)
    with pytest.raises(InvalidAcl):
        auth.describe(AclBindingFilter(a.UNKNOWN, None, a.ANY, None, None, a.ANY, a.ANY))


def test_authorized_operations_bitfields_are_kafkas():
    assert to_bitfield(a.SUPPORTED_OPERATIONS[a.CLUSTER]) == 0b1_1111_1010_0000
    assert to_bitfield(a.SUPPORTED_OPERATIONS[a.TOPIC]) == 0b1101_1111_1000
    assert len(a.SUPPORTED_OPERATIONS[a.GROUP]) == 5


@pytest.fixture
def server(serve):
    config = '"authorizer.class.name" = "minibroker", "allow.everyone.if.no.acl.found" = true'
    return serve(
        scenario(brokers=1, config=config, topics='name = "t"\npartitions = 1\nreplication_factor = 1')
    )


def produce_error(server) -> int | None:
    producer = CkProducer({"bootstrap.servers": server.bootstrap, "message.timeout.ms": 5000})
    errors = []
    producer.produce("t", b"v", on_delivery=lambda error, message: errors.append(error))
    producer.flush(WAIT_S)
    return errors[0].code() if errors[0] is not None else None


def test_confluent_kafka_creates_describes_deletes_and_meets_acls(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    deny = CkAcl(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        ME,
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    assert admin.create_acls([deny])[deny].result(WAIT_S) is None
    assert produce_error(server) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    described = admin.describe_acls(
        CkFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(WAIT_S)
    assert described == [deny]
    deny_filter = CkFilter(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.DENY,
    )
    assert admin.delete_acls([deny_filter])[deny_filter].result(WAIT_S) == [deny]
    assert produce_error(server) is None
    assert server.call(lambda: server.served.server.state.authorizer.acls) == []


def test_without_an_authorizer_every_operation_is_authorized(serve):
    from confluent_kafka import TopicCollection

    plain = serve(scenario(brokers=1, topics='name = "t"\npartitions = 1\nreplication_factor = 1'))
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT_S)
    assert len(cluster.authorized_operations) == 7
    topics = admin.describe_topics(TopicCollection(["t"]), include_authorized_operations=True)
    assert len(topics["t"].result(WAIT_S).authorized_operations) == 8


def test_group_acls_refuse_whole_requests_and_each_batched_group(server):
    from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    from tests.server.conftest import RawClient

    state = server.served.server.state
    deny = AclBinding(a.GROUP, "secret", a.LITERAL, ME, "*", a.DESCRIBE, a.DENY)
    deny_cluster = AclBinding(a.CLUSTER, a.CLUSTER_NAME, a.LITERAL, "User:*", "*", a.DESCRIBE, a.DENY)
    server.call(state.authorizer.create, deny)
    server.call(state.authorizer.create, deny_cluster)
    raw = RawClient(server.port(0))
    try:
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=["open", "secret"])
        for _ in range(50):  # the first asks create __consumer_offsets (COORDINATOR_NOT_AVAILABLE meanwhile)
            batched = raw.request(request, FindCoordinatorResponse, 4)
            if batched.coordinators[0].error_code == 0:
                break
            time.sleep(0.05)
        assert [(c.key, c.error_code) for c in batched.coordinators] == [("open", 0), ("secret", 30)]
        single = raw.request(FindCoordinatorRequest(key="secret", key_type=0), FindCoordinatorResponse, 3)
        assert (single.error_code, single.node_id) == (30, -1)
        described = raw.request(
            DescribeClusterRequest(include_cluster_authorized_operations=True), DescribeClusterResponse, 0
        )
        assert described.error_code == 31
    finally:
        raw.close()


def test_offset_commit_needs_read_on_each_topic(server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP
    from kafka.errors import TopicAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    deny = AclBinding(a.TOPIC, "t", a.LITERAL, ME, "*", a.READ, a.DENY)
    server.call(server.served.server.state.authorizer.create, deny)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g", enable_auto_commit=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.commit({KpTP("t", 0): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()


def test_transactional_writes_need_write_on_the_transactional_id(server):
    from kafka.protocol.producer import ProduceResponse

    from tests.server.conftest import RawClient
    from tests.server.test_purgatories import produce_request

    deny = AclBinding(a.TRANSACTIONAL_ID, "tx", a.LITERAL, ME, "*", a.WRITE, a.DENY)
    server.call(server.served.server.state.authorizer.create, deny)
    raw = RawClient(server.port(0))
    try:
        request = produce_request(-1, 5000, b"v")
        request.transactional_id = "tx"
        answer = raw.request(request, ProduceResponse, 9).responses[0].partition_responses[0]
        assert answer.error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        request.transactional_id = "other"  # allowed: no ACL names it (the batch itself is not transactional)
        assert raw.request(request, ProduceResponse, 9).responses[0].partition_responses[0].error_code == 0
    finally:
        raw.close()


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(serve):
    """Kafka's brokers answer every ACL API SECURITY_DISABLED (54) when no authorizer is configured."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AclBinding as KafkaAcl
    from confluent_kafka.admin import AclBindingFilter as KafkaFilter
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError

    plain = serve(scenario(brokers=1, topics='name = "t"\npartitions = 1\nreplication_factor = 1'))
    admin = AdminClient({"bootstrap.servers": plain.bootstrap})
    acl = KafkaAcl(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    anything = KafkaFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    for future in (admin.create_acls([acl])[acl], admin.delete_acls([anything])[anything]):
        with pytest.raises(KafkaException) as refused:
            future.result(WAIT_S)
        assert refused.value.args[0].code() == 54
    kp = KafkaAdminClient(bootstrap_servers=plain.bootstrap, request_timeout_ms=10_000)
    try:
        with pytest.raises(SecurityDisabledError):
            kp.describe_acls(
                ACLFilter(
                    principal=None,
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(
                        KpResourceType.ANY, None, ACLResourcePatternType.ANY
                    ),
                )
            )
    finally:
        kp.close()
