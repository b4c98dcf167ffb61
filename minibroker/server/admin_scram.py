"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) over the wire.

The cluster keeps each user's SCRAM credentials (mechanism and iterations; the salted password is
kept, never sent back) as KRaft's ``ScramControlManager`` does, with its checks: a user named twice in
one request is DUPLICATE_RESOURCE (92), an empty name or iterations outside 4096..16384
UNACCEPTABLE_CREDENTIAL (94), a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)
UNSUPPORTED_SASL_MECHANISM (93), describing or deleting a credential that does not exist
RESOURCE_NOT_FOUND (91). Under an authorizer describing needs DESCRIBE on the cluster and altering
ALTER (else CLUSTER_AUTHORIZATION_FAILED). minibroker serves no SASL listener: the credentials are
stored and described, never used to authenticate.
"""

from __future__ import annotations

from collections import Counter

from kafka.protocol.admin import AlterUserScramCredentialsResponse as AlterResponse
from kafka.protocol.admin import DescribeUserScramCredentialsResponse as DescribeResponse

from minibroker.common.errors import Errors
from minibroker.server import acl_checks
from minibroker.server.authorizer import ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE
from minibroker.server.codec import Request
from minibroker.server.context import Connection

DescribeResult = DescribeResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeResult.CredentialInfo
AlterResult = AlterResponse.AlterUserScramCredentialsResult
DUPLICATE_RESOURCE = 92
UNSUPPORTED_SASL_MECHANISM = 93
UNACCEPTABLE_CREDENTIAL = 94
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def _denied(conn: Connection, operation: int) -> bool:
    return acl_checks.enforced(conn) and not conn.authorize(operation, CLUSTER, CLUSTER_NAME)


async def describe_user_scram_credentials(request: Request, conn: Connection) -> DescribeResponse:
    stored = conn.state.scram_credentials
    response = DescribeResponse(throttle_time_ms=0, error_code=Errors.NONE, error_message=None, results=[])
    if _denied(conn, DESCRIBE):
        response.error_code = Errors.CLUSTER_AUTHORIZATION_FAILED
        return response
    asked = [u.name for u in request.body.users] if request.body.users else sorted(stored)
    twice = {name for name, n in Counter(asked).items() if n > 1}
    for name in dict.fromkeys(asked):
        error, message, infos = Errors.NONE, None, []
        if name in twice:
            error, message = (
                DUPLICATE_RESOURCE,
                f"Cannot describe SCRAM credentials for the same user twice: {name}",
            )
        elif not stored.get(name):
            error, message = (
                Errors.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            infos = [CredentialInfo(mechanism=m, iterations=i) for m, i in sorted(stored[name].items())]
        response.results.append(
            DescribeResult(user=name, error_code=error, error_message=message, credential_infos=infos)
        )
    return response


async def alter_user_scram_credentials(request: Request, conn: Connection) -> AlterResponse:
    stored = conn.state.scram_credentials
    body = request.body
    changes = [(d.name, d.mechanism, None) for d in body.deletions]
    changes += [(u.name, u.mechanism, u.iterations) for u in body.upsertions]
    twice = {name for name, n in Counter(name for name, _, _ in changes).items() if n > 1}
    results: dict[str, tuple[int, str | None]] = {}
    for name, mechanism, iterations in changes:
        if name in results:
            continue
        error, message = Errors.NONE, None
        if _denied(conn, ALTER):
            error = Errors.CLUSTER_AUTHORIZATION_FAILED
        elif name in twice:
            error, message = (
                DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        elif not name:
            error, message = UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        elif mechanism not in MECHANISMS:
            error, message = UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism}"
        elif iterations is None and mechanism not in stored.get(name, {}):
            error, message = (
                Errors.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        elif iterations is not None and iterations < MIN_ITERATIONS:
            error, message = UNACCEPTABLE_CREDENTIAL, f"Too few iterations: at least {MIN_ITERATIONS}"
        elif iterations is not None and iterations > MAX_ITERATIONS:
            error, message = UNACCEPTABLE_CREDENTIAL, f"Too many iterations: at most {MAX_ITERATIONS}"
        elif iterations is None:
            del stored[name][mechanism]
            if not stored[name]:
                del stored[name]
        else:
            stored.setdefault(name, {})[mechanism] = iterations
        results[name] = (error, message)
    return AlterResponse(
        throttle_time_ms=0,
        results=[AlterResult(user=u, error_code=e, error_message=m) for u, (e, m) in results.items()],
    )
