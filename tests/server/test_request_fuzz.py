"""Every served API, at every advertised version, with random valid-looking fields: the server answers each.

For a one-broker and a three-broker server (one each for the module), ``PER_API`` requests of every API
in ``HANDLERS`` (its versions taken in turn) are built from kafka-python's request classes with fields
drawn by a seeded ``random.Random``: names of topics and groups that exist and that do not, edge integers,
empty, null and long arrays, records valid and not. They go out in shuffled order over raw sockets to
random brokers. Each must be answered with its correlation id, or end in a clean close where Kafka
closes (Produce with acks=0 answers nothing, so a follow-up ApiVersions tells which); no request may
reach an internal error, and the server answers ApiVersions and Metadata at the end.
"""

from __future__ import annotations

import random
import struct
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from minibroker.server.codec import SUPPORTED
from minibroker.server.handlers import HANDLERS
from tests.server.conftest import RawClient, ServedThread, scenario

SEEDS = {1: 101, 3: 303}
#: requests per API per server
PER_API = 20
#: a bound on the whole run of one server (it takes a few seconds)
BUDGET_S = 25.0
CONFIG = (
    '"group.initial.rebalance.delay.ms" = 0, "group.min.session.timeout.ms" = 50, '
    '"group.max.session.timeout.ms" = 1000, "offsets.topic.num.partitions" = 3'
)

_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
#: integer fields that make the broker wait (ms), or size what it creates: kept small, edges included
_WAITS = (-1, 0, 1, 50, 150)
_COUNTS = (-2, -1, 0, 1, 2, 3, 4, 7)
#: partition index fields: mostly the partitions topic ``t`` has
_PARTITION_FIELDS = (
    "partition",
    "partition_index",
    "index",
    "partitions",
    "partition_indexes",
    "partition_id",
)


#: answer fields whose values later requests reuse (so a SyncGroup may name a member the server made)
HARVESTED = ("member_id", "leader", "generation_id", "producer_id", "producer_epoch", "session_id")


class Fields:
    """Random field values for kafka-python request classes, from one ``random.Random``.

    Values the server handed out (``HARVESTED``, by field name) are reused half of the time.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: dict[str, list[Any]] = {}

    def harvest(self, answer: Any) -> None:
        for name in HARVESTED:
            value = getattr(answer, name, None)
            if value not in (None, "", -1, 0):
                self.seen.setdefault("member_id" if name == "leader" else name, []).append(value)

    def string(self) -> str:
        rng = self.rng
        pool = [
            "t",
            "t",
            "g",
            "g",
            "consumer",
            "range",
            "__consumer_offsets",
            "",
            "missing",
            "x" * 300,
            "ünï",
        ]
        pool.append("".join(rng.choice("abcxyz-_.09") for _ in range(rng.randint(1, 12))))
        return rng.choice(pool)

    def integer(self, name: str, kind: str) -> int:
        rng = self.rng
        if name.endswith("_ms") or "timeout" in name or "wait" in name:
            return rng.choice(_WAITS)
        if name in ("num_partitions", "count", "replication_factor"):
            return rng.choice(_COUNTS)
        if name in _PARTITION_FIELDS:
            return rng.choice((0, 0, 1, 1, 2, -1, 2**31 - 1))
        bits = _INT_RANGES[kind]
        low, high = -(2**bits), 2**bits - 1
        return rng.choice((-1, 0, 0, 1, 2, 3, low, high, rng.randint(low, high)))

    def simple(self, name: str, kind: str, nullable: bool) -> Any:
        rng = self.rng
        if nullable and rng.random() < 0.3:
            return None
        known = self.seen.get("generation_id" if name == "generation_id_or_member_epoch" else name)
        if known and rng.random() < 0.5:
            return rng.choice(known)
        if kind == "string":
            return self.string()
        if kind in _INT_RANGES:
            return self.integer(name, kind)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))))
        if kind == "bytes":
            return rng.choice((b"", rng.randbytes(rng.randint(1, 64)), b"\x00\x01" + rng.randbytes(8)))
        if kind == "records":
            return rng.choice(
                (b"", self.batch(), self.batch(), self.batch() + self.batch(), rng.randbytes(70))
            )
        raise AssertionError(f"no values for field type {kind}")

    def batch(self) -> bytes:
        """A v2 record batch: any codec, a producer id and sequence (some the server handed out), 1 to 3
        records with keys and headers or not, now and then a flipped byte."""
        rng = self.rng
        producer = rng.choice([*self.seen.get("producer_id", []), -1, 7])
        builder = MemoryRecordsBuilder(
            magic=2,
            compression_type=rng.choice((0, 0, 1, 2, 3, 4)),
            batch_size=1 << 20,
            transactional=producer != -1 and rng.random() < 0.1,
            producer_id=producer,
            producer_epoch=-1 if producer == -1 else rng.choice((0, 0, 1)),
            base_sequence=-1 if producer == -1 else rng.choice((0, 0, 1, 5)),
        )
        for _ in range(rng.randint(1, 3)):
            key = rng.choice((None, b"k", rng.randbytes(20)))
            headers = rng.choice(([], [("h", b"v")], [("", None)]))
            builder.append(
                timestamp=rng.choice((None, 0, 2**40)), key=key, value=rng.randbytes(40), headers=headers
            )
        builder.close()
        raw = bytearray(builder.buffer())
        if rng.random() < 0.15:
            raw[rng.randrange(len(raw))] ^= 0xFF
        return bytes(raw)

    def length(self, struct_items: bool) -> int:
        return self.rng.choice((0, 1, 1, 2, 3, 12 if struct_items else 200))

    def value(self, field: Any, version: int) -> Any:
        kind = type(field).__name__
        nullable = field.nullable_for_version_q(version)
        if kind == "SimpleField":
            return self.simple(field.name, field._type_str, nullable)
        if kind == "StructField":
            return self.struct(field, field.data_class, version)
        if nullable and self.rng.random() < 0.15:
            return None
        if kind == "StructArrayField":
            return [self.struct(field, field.data_class, version) for _ in range(self.length(True))]
        assert kind == "ArrayField", kind
        item = field.array_of
        return [self.simple(field.name, item._type_str, False) for _ in range(self.length(False))]

    def struct(self, struct: Any, cls: Any, version: int) -> Any:
        values = {
            name: self.value(field, version)
            for name, field in struct.fields.items()
            if field.for_version_q(version) and not field.tagged_field_q(version)
        }
        return cls(**values)


def _versions() -> dict[int, tuple[int, int]]:
    return {key: (s.min_version, s.max_version) for key, s in SUPPORTED.items() if key in HANDLERS}


def _plan(rng: random.Random) -> list[tuple[int, int]]:
    """(api key, version) of every request: ``PER_API`` per API, its versions in turn, shuffled."""
    plan = [
        (key, low + i % (high - low + 1))
        for key, (low, high) in sorted(_versions().items())
        for i in range(PER_API)
    ]
    rng.shuffle(plan)
    return plan


class Conversation:
    """Raw connections to one server's brokers, reopened after a close."""

    def __init__(self, server: ServedThread, rng: random.Random) -> None:
        self.server = server
        self.rng = rng
        self.clients: dict[int, RawClient] = {}

    def client(self, broker: int) -> RawClient:
        if broker not in self.clients:
            self.clients[broker] = RawClient(self.server.port(broker), timeout=5)
        return self.clients[broker]

    def drop(self, broker: int) -> None:
        self.clients.pop(broker).close()

    def send(self, broker: int, request: Any, version: int, correlation: int) -> None:
        request.API_VERSION = version
        request.with_header(correlation_id=correlation, client_id=self.rng.choice(("fuzz", "", None)))
        self.client(broker).send_bytes(bytes(request.encode(header=True, framed=True)))

    def answer(self, broker: int) -> tuple[int, bytes] | None:
        """(correlation id, payload) of the next answer, or None if the server closed the connection."""
        payload = self.client(broker).receive_frame()
        if payload is None:
            self.drop(broker)
            return None
        (correlation,) = struct.unpack_from(">i", payload)
        return correlation, payload

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def _fuzz(server: ServedThread, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    fields = Fields(rng)
    talk = Conversation(server, rng)
    outcomes: Counter[str] = Counter()
    brokers = len(server.cluster.brokers)
    start = time.monotonic()
    try:
        for key, version in _plan(rng):
            spec = SUPPORTED[key]
            request = fields.struct(spec.request._struct, spec.request, version)
            broker = rng.randrange(brokers)
            correlation = rng.choice((0, 1, -1, 2**31 - 1, rng.randint(2, 2**31 - 2)))
            what = f"{spec.name} v{version} to broker {broker}: {request}"
            try:
                talk.send(broker, request, version, correlation)
                silent = key == 0 and request.acks == 0
                if silent:  # no answer by design: a follow-up ApiVersions shows the connection's state
                    talk.send(broker, ApiVersionsRequest(), 0, correlation ^ 1)
                    correlation ^= 1
                got = talk.answer(broker)
            except (TimeoutError, ConnectionError) as error:
                raise AssertionError(f"{what}: {type(error).__name__} {error}") from None
            if got is None:  # only where Kafka closes: an acks=0 Produce that failed
                assert silent, f"{what}: the server closed the connection"
                outcomes[f"{spec.name}: closed"] += 1
                continue
            assert got[0] == correlation, f"{what}: answered correlation id {got[0]}"
            response_class = ApiVersionsResponse if silent else spec.response
            fields.harvest(response_class.decode(got[1], version=0 if silent else version, header=True))
            outcomes[f"{spec.name}: answered"] += 1
            assert time.monotonic() - start < BUDGET_S, f"over {BUDGET_S} s at {what}"
        probe = RawClient(server.port(brokers - 1))
        try:
            versions = probe.request(ApiVersionsRequest(), ApiVersionsResponse, 3)
            assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys} == _versions()
            assert probe.request(MetadataRequest(topics=None), MetadataResponse, 12).brokers
        finally:
            probe.close()
    finally:
        talk.close()
    return outcomes


@pytest.fixture(scope="module", params=sorted(SEEDS), ids=lambda n: f"{n}-broker")
def fuzzed_server(request) -> Iterator[ServedThread]:
    brokers = request.param
    topics = f'name = "t"\npartitions = 2\nreplication_factor = {brokers}'
    server = ServedThread(scenario(brokers, CONFIG, topics)).start()
    yield server
    server.stop()


def test_every_api_with_random_fields_is_answered_and_the_server_stays_up(fuzzed_server):
    brokers = len(fuzzed_server.cluster.brokers)
    outcomes = _fuzz(fuzzed_server, SEEDS[brokers])
    internal = [line for line in fuzzed_server.logs if "internal error" in line]
    assert internal == [], "\n\n".join(internal[:3])
    answered = {name.split(":")[0] for name, n in outcomes.items() if name.endswith("answered")}
    assert answered == {SUPPORTED[key].name for key in HANDLERS}
    assert sum(outcomes.values()) == PER_API * len(HANDLERS)
