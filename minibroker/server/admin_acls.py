"""CreateAcls, DescribeAcls and DeleteAcls over the wire (``authorizer.Authorizer`` keeps the ACLs).

As Kafka's ``AclApis``: with an authorizer the caller needs ALTER on the cluster to
create or delete ACLs and DESCRIBE to list them (CLUSTER_AUTHORIZATION_FAILED
otherwise). Each creation is answered on its own (INVALID_REQUEST with Kafka's
message for a binding Kafka refuses); DescribeAcls answers the matching ACLs
grouped by resource pattern; DeleteAcls answers, per filter, the ACLs it removed.
A filter with an UNKNOWN field is INVALID_REQUEST. Without ``authorizer.class.name`` there
is no authorizer to keep ACLs, and every creation, the description and every deletion
answer SECURITY_DISABLED ("No Authorizer is configured."), as Kafka's brokers do.
"""

from __future__ import annotations

import attrs
from kafka.protocol.admin import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from minibroker.common.errors import Errors
from minibroker.server.acl_checks import enforced
from minibroker.server.authorizer import (
    ALTER,
    CLUSTER,
    CLUSTER_NAME,
    DESCRIBE,
    AclBinding,
    AclBindingFilter,
    InvalidAcl,
)
from minibroker.server.codec import Request
from minibroker.server.context import Connection

Created = CreateAclsResponse.AclCreationResult
Resource = DescribeAclsResponse.DescribeAclsResource
Description = Resource.AclDescription
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl

_DENIED = "Cluster authorization failed."
#: Kafka's answer to the ACL APIs on a broker without an authorizer
_NO_AUTHORIZER = "No Authorizer is configured."


def _filter(item) -> AclBindingFilter:
    return AclBindingFilter(
        item.resource_type_filter,
        item.resource_name_filter,
        item.pattern_type_filter,
        item.principal_filter,
        item.host_filter,
        item.operation,
        item.permission_type,
    )


async def create_acls(request: Request, conn: Connection) -> CreateAclsResponse:
    if not enforced(conn):
        off = Errors.SECURITY_DISABLED
        results = [Created(error_code=off, error_message=_NO_AUTHORIZER) for _ in request.body.creations]
        return CreateAclsResponse(throttle_time_ms=0, results=results)
    if not conn.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        results = [Created(error_code=denied, error_message=_DENIED) for _ in request.body.creations]
        return CreateAclsResponse(throttle_time_ms=0, results=results)
    results = []
    for c in request.body.creations:
        acl = AclBinding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        try:
            conn.state.authorizer.create(acl)
            results.append(Created(error_code=Errors.NONE, error_message=None))
        except InvalidAcl as refused:
            conn.log(f"CreateAcls: INVALID_REQUEST ({refused})")
            results.append(Created(error_code=Errors.INVALID_REQUEST, error_message=str(refused)))
    return CreateAclsResponse(throttle_time_ms=0, results=results)


async def describe_acls(request: Request, conn: Connection) -> DescribeAclsResponse:
    response = DescribeAclsResponse(
        throttle_time_ms=0, error_code=Errors.NONE, error_message=None, resources=[]
    )
    if not enforced(conn):
        response.error_code, response.error_message = Errors.SECURITY_DISABLED, _NO_AUTHORIZER
        return response
    if not conn.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME):
        response.error_code, response.error_message = Errors.CLUSTER_AUTHORIZATION_FAILED, _DENIED
        return response
    try:
        found = conn.state.authorizer.describe(_filter(request.body))
    except InvalidAcl as refused:
        response.error_code, response.error_message = Errors.INVALID_REQUEST, str(refused)
        return response
    grouped: dict[tuple[int, str, int], list] = {}
    for acl in found:
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            Description(
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission_type,
            )
        )
    response.resources = [
        Resource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=acls)
        for (kind, name, pattern), acls in grouped.items()
    ]
    return response


async def delete_acls(request: Request, conn: Connection) -> DeleteAclsResponse:
    allowed = conn.authorize(ALTER, CLUSTER, CLUSTER_NAME)
    results = []
    for item in request.body.filters:
        result = FilterResult(error_code=Errors.NONE, error_message=None, matching_acls=[])
        if not enforced(conn):
            result.error_code, result.error_message = Errors.SECURITY_DISABLED, _NO_AUTHORIZER
            results.append(result)
            continue
        if not allowed:
            result.error_code, result.error_message = Errors.CLUSTER_AUTHORIZATION_FAILED, _DENIED
            results.append(result)
            continue
        try:
            gone = conn.state.authorizer.delete(_filter(item))
        except InvalidAcl as refused:
            result.error_code, result.error_message = Errors.INVALID_REQUEST, str(refused)
            results.append(result)
            continue
        result.matching_acls = [
            Matching(error_code=Errors.NONE, error_message=None, **attrs.asdict(acl)) for acl in gone
        ]
        results.append(result)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
