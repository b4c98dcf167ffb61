"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs over the wire (``sim.dynamic_configs`` works).

Every resource type Kafka has (topic, broker, broker logger, client metrics, group).
Each resource is answered on its own: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION,
a broker id that does not exist or an unknown resource type INVALID_REQUEST, a bad
config name or value INVALID_CONFIG, each with a message. The legacy AlterConfigs (33)
replaces a resource's whole set of overrides. DescribeConfigs v1+
gives each config's source; with ``include_synonyms`` the places its value may come from,
most specific first (the topic override, the broker's dynamic, cluster-wide, static settings,
Kafka's default: Kafka's ``ConfigHelper`` synonyms); no documentation text is sent. Nothing is sensitive here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from minibroker.common.errors import Errors
from minibroker.server.acl_checks import MESSAGES, config_denied
from minibroker.server.authorizer import ALTER_CONFIGS, DESCRIBE_CONFIGS
from minibroker.server.codec import Request
from minibroker.server.context import Connection
from minibroker.sim.dynamic_configs import alter_configs, describe_configs, replace_configs
from minibroker.sim.topic_admin import AdminError

Described = DescribeConfigsResponse.DescribeConfigsResult
Entry = Described.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


def _check(conn: Connection, operation: int, resource_type: int, name: str) -> None:
    error = config_denied(conn, operation, resource_type, name)
    if error is not None:
        raise AdminError(error, MESSAGES[error])


async def describe(request: Request, conn: Connection) -> DescribeConfigsResponse:
    body = request.body
    version = request.api_version
    synonyms = version >= 1 and bool(body.include_synonyms)
    results = []
    for resource in body.resources:
        error, message, configs = Errors.NONE, None, []
        try:
            _check(conn, DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
            entries = describe_configs(
                conn.cluster, resource.resource_type, resource.resource_name, resource.configuration_keys
            )
        except AdminError as refused:
            error, message, entries = refused.error, str(refused), []
        for e in entries:
            entry = Entry(name=e.name, value=e.value, read_only=e.read_only, is_sensitive=False)
            if version == 0:
                entry.is_default = e.is_default
            else:
                entry.config_source = e.source
                entry.synonyms = (
                    [Synonym(name=n, value=v, source=src) for n, v, src in e.synonyms] if synonyms else []
                )
            if version >= 3:
                entry.config_type = e.config_type
                entry.documentation = None
            configs.append(entry)
        results.append(
            Described(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _alter_each(request: Request, conn: Connection, apply: Callable[[Any, bool], None]) -> list[Any]:
    """Each resource's answer after ``apply(resource, validate_only)``, with the error it raised."""
    body = request.body
    result = request.spec.response.AlterConfigsResourceResponse
    responses = []
    for resource in body.resources:
        error, message = Errors.NONE, None
        try:
            _check(conn, ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            apply(resource, bool(body.validate_only))
        except AdminError as refused:
            error, message = refused.error, str(refused)
            conn.log(f"{request.name} {resource.resource_name!r}: {error.name} ({message})")
        responses.append(
            result(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return responses


async def incremental_alter(request: Request, conn: Connection) -> IncrementalAlterConfigsResponse:
    def apply(resource: Any, validate_only: bool) -> None:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        alter_configs(conn.cluster, resource.resource_type, resource.resource_name, ops, validate_only)

    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=_alter_each(request, conn, apply))


async def alter(request: Request, conn: Connection) -> AlterConfigsResponse:
    """The legacy AlterConfigs: each resource's configs become exactly the ones given."""

    def apply(resource: Any, validate_only: bool) -> None:
        pairs = [(c.name, c.value) for c in resource.configs]
        replace_configs(conn.cluster, resource.resource_type, resource.resource_name, pairs, validate_only)

    return AlterConfigsResponse(throttle_time_ms=0, responses=_alter_each(request, conn, apply))
