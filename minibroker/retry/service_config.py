"""The retry service's TOML configuration: every key, its type, its default; one-line errors.

``load_config(path)`` returns a ``ServiceConfig`` or raises ``ConfigError`` whose text names the file, the
table and the key, and the expected form (``retry.toml: [backend] kind: expected "wheel" or "redis",
got 'disk'``). Unknown keys are errors, not ignored: a misspelt ``claim_batch`` must not silently run
with the default. See docs/retry-service.md for the reference.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from minibroker.retry.policy import RetryPolicy

#: Kafka's legal topic characters; the longest source topic leaves room for ``-retry-<n>``
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
BACKENDS = ("wheel", "redis")
REDIS_ONLY = ("url", "key", "lease_ms", "dedup_ms", "connect_timeout_ms")


class ConfigError(ValueError):
    """A misconfiguration: one line, exit status 2."""


@attrs.frozen
class BackendConfig:
    kind: str = "wheel"
    url: str = "redis://127.0.0.1:6379/0"
    key: str = "minibroker:retry"
    claim_batch: int = 500
    lease_ms: int = 30_000
    dedup_ms: int = 3_600_000
    connect_timeout_ms: int = 5_000


@attrs.frozen
class ServiceConfig:
    topics: Mapping[str, RetryPolicy]
    backend: BackendConfig = BackendConfig()
    group_id: str = "minibroker-retry-service"
    client_id: str = "minibroker-retry-service"
    bootstrap_timeout_ms: int = 10_000
    session_timeout_ms: int = 10_000
    poll_ms: int = 100
    max_poll_records: int = 500
    produce_timeout_ms: int = 30_000
    #: the wait after a failed call to Redis or Kafka, doubled per further failure up to the max
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 5_000
    #: an outage of Redis or Kafka this long ends the service (exit 1); 0: keep retrying for ever
    outage_limit_ms: int = 0

    def retry_topics(self) -> dict[str, tuple[str, int]]:
        """Every retry topic the service consumes -> (its source topic, the attempt that failed)."""
        return {
            f"{topic}-retry-{n}": (topic, n)
            for topic, policy in self.topics.items()
            for n in range(1, policy.attempts)
        }


#: (table, key) -> (type, lowest value or None); the defaults are the attrs classes'
_SERVICE_KEYS: dict[str, tuple[type, int | None]] = {
    "group_id": (str, None),
    "client_id": (str, None),
    "bootstrap_timeout_ms": (int, 1),
    "session_timeout_ms": (int, 1),
    "poll_ms": (int, 1),
    "max_poll_records": (int, 1),
    "produce_timeout_ms": (int, 1),
    "retry_backoff_ms": (int, 1),
    "retry_backoff_max_ms": (int, 1),
    "outage_limit_ms": (int, 0),
}
_BACKEND_KEYS: dict[str, tuple[type, int | None]] = {
    "kind": (str, None),
    "url": (str, None),
    "key": (str, None),
    "claim_batch": (int, 1),
    "lease_ms": (int, 1),
    "dedup_ms": (int, 0),
    "connect_timeout_ms": (int, 1),
}
_POLICY_KEYS: dict[str, tuple[type, int | None]] = {
    "attempts": (int, 2),
    "backoff": (str, None),
    "delay_ms": (int, 0),
    "multiplier": (float, 1),
    "max_delay_ms": (int, 0),
}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number"}


def _default(cls: type, name: str) -> Any:
    """An attrs field's default (a slotted class has no class attribute of that name)."""
    return getattr(attrs.fields(cls), name).default


def _checked(where: str, table: Mapping[str, Any], keys: dict[str, tuple[type, int | None]]) -> dict:
    """``table``'s values, each checked against ``keys``; ``where`` (``FILE: [backend] ``) prefixes errors."""
    out = {}
    for name, value in table.items():
        if name not in keys:
            raise ConfigError(f"{where}unknown key {name!r} (expected one of: {', '.join(keys)})")
        kind, lowest = keys[name]
        ok = isinstance(value, kind) and not isinstance(value, bool)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        expected = _TYPE_NAMES[kind] + (f" >= {lowest}" if lowest is not None else "")
        if not ok or (lowest is not None and value < lowest) or (kind is str and not value):
            expected = expected if kind is not str else "a non-empty string"
            raise ConfigError(f"{where}{name}: expected {expected}, got {value!r}")
        out[name] = value
    return out


def parse_config(data: Mapping[str, Any], source: str) -> ServiceConfig:
    """The ``ServiceConfig`` of a parsed TOML document; ``source`` names it in errors."""
    data = dict(data)
    topics_table = data.pop("topics", None)
    backend_table = data.pop("backend", {})
    service = _checked(f"{source}: ", data, _SERVICE_KEYS)
    if not isinstance(backend_table, Mapping):
        raise ConfigError(f"{source}: backend: expected a table [backend], got {backend_table!r}")
    backoff = service.get("retry_backoff_ms", _default(ServiceConfig, "retry_backoff_ms"))
    backoff_max = service.get("retry_backoff_max_ms", _default(ServiceConfig, "retry_backoff_max_ms"))
    if backoff_max < backoff:
        raise ConfigError(
            f"{source}: retry_backoff_max_ms: expected an integer >= retry_backoff_ms ({backoff}), "
            f"got {backoff_max}"
        )
    backend = _checked(f"{source}: [backend] ", backend_table, _BACKEND_KEYS)
    kind = backend.get("kind", "wheel")
    if kind not in BACKENDS:
        raise ConfigError(f'{source}: [backend] kind: expected "wheel" or "redis", got {kind!r}')
    stray = [name for name in REDIS_ONLY if name in backend and kind != "redis"]
    if stray:
        raise ConfigError(f'{source}: [backend] {stray[0]}: only for kind = "redis" (kind is {kind!r})')
    url = backend.get("url", _default(BackendConfig, "url"))
    if kind == "redis" and not url.startswith(("redis://", "rediss://")):
        raise ConfigError(f"{source}: [backend] url: expected redis://HOST:PORT/DB, got {url!r}")
    if not isinstance(topics_table, Mapping) or not topics_table:
        raise ConfigError(f"{source}: expected at least one [topics.<name>] table (the source topics)")
    topics = {}
    for name, table in topics_table.items():
        where = f"{source}: [topics.{name}]"
        if not TOPIC_NAME.fullmatch(name):
            raise ConfigError(f"{where}: expected a topic name of 1..200 characters [A-Za-z0-9._-]")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: expected a table, got {table!r}")
        fields = _checked(f"{where} ", table, _POLICY_KEYS)
        try:
            topics[name] = RetryPolicy(**fields)
        except ValueError as error:
            raise ConfigError(f"{where} {error}") from None
    return ServiceConfig(topics=topics, backend=BackendConfig(**backend), **service)


def load_config(path: str) -> ServiceConfig:
    """Read and check the TOML file at ``path``."""
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"--config {path}: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    return parse_config(data, path)
