"""ACLs and Kafka's StandardAuthorizer: who may do what on which resource.

``Authorizer`` keeps the cluster's ACL bindings (CreateAcls, DescribeAcls and
DeleteAcls, ``admin_acls.py``) and decides requests as Kafka's ``StandardAuthorizer``
(metadata/.../authorizer/StandardAuthorizerData.java) does, when the broker's
``authorizer.class.name`` is set (any class name: the emulated one decides):

- a super user (``super.users``, ``;``-separated principals) may do anything;
- an ACL applies when its principal is the caller's or ``User:*``, its host the
  caller's or ``*``, and its resource pattern matches: LITERAL by equal name or ``*``,
  PREFIXED by prefix;
- a matching DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER
  implies DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS (ALLOW only);
- no matching ACL: allowed only with ``allow.everyone.if.no.acl.found=true``.

Without SASL every connection's principal is ``User:ANONYMOUS`` from its peer's
host, as Kafka's PLAINTEXT listener names it. Without an authorizer nothing is
checked and every supported operation is authorized (the ``include_authorized_operations``
bitfields of Kafka's ``AuthHelper.authorizedOperations``). ACLs are stored either way,
so ACL tooling can be exercised against any ``serve`` (a Kafka broker without an
authorizer answers the ACL APIs SECURITY_DISABLED instead).

Codes are Kafka's: resource types (``ResourceType``), pattern types
(``PatternType``), operations (``AclOperation``), permissions (``AclPermissionType``).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from minibroker.common.errors import Errors

# ResourceType
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
# PatternType (UNKNOWN and ANY as above)
MATCH, LITERAL, PREFIXED = 2, 3, 4
# AclPermissionType
DENY, ALLOW = 2, 3
# AclOperation
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"

#: Kafka's ``AclEntry.supportedOperations``: what each resource type has
SUPPORTED_OPERATIONS: dict[int, frozenset[int]] = {
    TOPIC: frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    GROUP: frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    CLUSTER: frozenset(
        {CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE}
    ),
    TRANSACTIONAL_ID: frozenset({DESCRIBE, WRITE}),
    DELEGATION_TOKEN: frozenset({DESCRIBE}),
    USER: frozenset({CREATE_TOKENS, DESCRIBE_TOKENS}),
}
#: Kafka's ``AclEntry.authorizationError``
AUTHORIZATION_ERRORS: dict[int, Errors] = {
    TOPIC: Errors.TOPIC_AUTHORIZATION_FAILED,
    GROUP: Errors.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: Errors.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})
_RESOURCE_NAMES = {TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER", TRANSACTIONAL_ID: "TRANSACTIONAL_ID"}
_RESOURCE_NAMES |= {DELEGATION_TOKEN: "DELEGATION_TOKEN", USER: "USER", ANY: "ANY", UNKNOWN: "UNKNOWN"}
_PATTERN_NAMES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED", MATCH: "MATCH", ANY: "ANY", UNKNOWN: "UNKNOWN"}
_OPERATION_NAMES = {
    UNKNOWN: "UNKNOWN",
    ANY: "ANY",
    ALL: "ALL",
    READ: "READ",
    WRITE: "WRITE",
    CREATE: "CREATE",
    DELETE: "DELETE",
    ALTER: "ALTER",
    DESCRIBE: "DESCRIBE",
    CLUSTER_ACTION: "CLUSTER_ACTION",
    DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
    ALTER_CONFIGS: "ALTER_CONFIGS",
    IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
    CREATE_TOKENS: "CREATE_TOKENS",
    DESCRIBE_TOKENS: "DESCRIBE_TOKENS",
}
_PERMISSION_NAMES = {UNKNOWN: "UNKNOWN", ANY: "ANY", DENY: "DENY", ALLOW: "ALLOW"}


class InvalidAcl(ValueError):
    """An ACL binding or filter Kafka refuses (INVALID_REQUEST), with Kafka's message."""


@attrs.frozen
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@attrs.frozen
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: None and ANY match anything; MATCH finds what applies to a name."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: AclBinding) -> bool:
        return self._pattern_matches(acl) and (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (ANY, acl.operation)
            and self.permission_type in (ANY, acl.permission_type)
        )

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ANY, acl.resource_type):
            return False
        if self.pattern_type not in (ANY, MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        return _pattern_covers(acl, self.resource_name)  # MATCH

    def check(self) -> None:
        """Kafka refuses a filter with an UNKNOWN field."""
        for value, what in (
            (self.resource_type, "resource type"),
            (self.pattern_type, "pattern type"),
            (self.operation, "operation"),
            (self.permission_type, "permission type"),
        ):
            if value == UNKNOWN or value not in _names(what):
                raise InvalidAcl(f"Invalid {what} {value} in the ACL filter")


def _names(what: str) -> dict[int, str]:
    return {
        "resource type": _RESOURCE_NAMES,
        "pattern type": _PATTERN_NAMES,
        "operation": _OPERATION_NAMES,
        "permission type": _PERMISSION_NAMES,
    }[what]


def _pattern_covers(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return acl.pattern_type == PREFIXED and name.startswith(acl.resource_name)


def check_binding(acl: AclBinding) -> None:
    """Kafka's checks of a new ACL (``AclApis.handleCreateAcls``, ``AclControlManager.validateNewAcl``)."""
    if acl.resource_type == CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.resource_name:
        raise InvalidAcl("Invalid empty resource name")
    if acl.resource_type in (UNKNOWN, ANY) or acl.resource_type not in _RESOURCE_NAMES:
        raise InvalidAcl(f"Invalid resourceType {_RESOURCE_NAMES.get(acl.resource_type, acl.resource_type)}")
    if acl.pattern_type not in (LITERAL, PREFIXED):
        raise InvalidAcl(f"Invalid patternType {_PATTERN_NAMES.get(acl.pattern_type, acl.pattern_type)}")
    if acl.operation in (UNKNOWN, ANY) or acl.operation not in _OPERATION_NAMES:
        raise InvalidAcl(f"Invalid operation {_OPERATION_NAMES.get(acl.operation, acl.operation)}")
    if acl.permission_type not in (DENY, ALLOW):
        raise InvalidAcl(
            f"Invalid permissionType {_PERMISSION_NAMES.get(acl.permission_type, acl.permission_type)}"
        )
    kind, colon, name = acl.principal.partition(":")
    if not (kind and colon and name):
        raise InvalidAcl(f"expected a string in format principalType:principalName but got {acl.principal}")


def to_bitfield(operations: Iterable[int]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``code`` set for each operation code."""
    field = 0
    for code in operations:
        field |= 1 << code
    return field


@attrs.define
class Authorizer:
    """The cluster's ACLs, in creation order, and the decisions on them."""

    acls: list[AclBinding] = attrs.Factory(list)

    def create(self, acl: AclBinding) -> None:
        """Add ``acl`` (``InvalidAcl`` if Kafka refuses it); an ACL already there is kept once."""
        check_binding(acl)
        if acl not in self.acls:
            self.acls.append(acl)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        acl_filter.check()
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    def delete(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """Remove and return the ACLs ``acl_filter`` matches."""
        gone = self.describe(acl_filter)
        self.acls = [acl for acl in self.acls if acl not in gone]
        return gone

    def authorize(
        self,
        principal: str,
        host: str,
        operation: int,
        resource_type: int,
        name: str,
        *,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource (module docstring)."""
        if principal in super_users:
            return True
        found = False
        allowed = False
        for acl in self.acls:
            if acl.resource_type != resource_type or not _pattern_covers(acl, name):
                continue
            found = True
            result = _result(acl, principal, host, operation)
            if result == DENY:
                return False
            allowed = allowed or result == ALLOW
        return allowed if found else allow_if_no_acl


def _result(acl: AclBinding, principal: str, host: str, operation: int) -> int | None:
    """Kafka's ``StandardAuthorizerData.findResult``: ALLOW, DENY, or None when the ACL does not apply."""
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD, host):
        return None
    if acl.operation != ALL:
        if acl.permission_type == ALLOW:
            if operation == DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type
