"""A seeded corpus of hostile scenario files, for the fuzz tests (no Hypothesis: plain, repeatable).

Each case starts from a bundled scenario and applies one to three mutations: a leaf replaced by
a hostile value (huge or negative numbers, 64-bit edges, long strings, long lists, deep tables,
control characters), a key deleted or renamed, a setting pushed past a limit (one-bucket wheels,
a billion brokers, a day of virtual time, ...), steps duplicated, or the bytes themselves broken
(a BOM, invalid UTF-8, truncation, brackets nested a thousand deep). ``corpus(seed, n)`` is the
same list for the same arguments.
"""

from __future__ import annotations

import copy
import json
import random
import tomllib
from pathlib import Path
from typing import Any

LIBRARY = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))
DOCUMENTS = [tomllib.loads(p.read_text()) for p in LIBRARY]


def to_toml(value: Any) -> str:
    """A tiny TOML writer for what these documents hold (inline tables everywhere)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(to_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{to_toml(str(k))} = {to_toml(v)}" for k, v in value.items()) + "}"


def dump(doc: dict) -> str:
    return "\n".join(f"{to_toml(str(k))} = {to_toml(v)}" for k, v in doc.items()) + "\n"


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in ``doc`` (tuples of keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += paths(value, (*prefix, i))
    return out


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE = (
    0,
    -1,
    1,
    2,
    2**31,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**9,
    10**30,
    1.5,
    float("inf"),
    float("nan"),
    True,
    "",
    "x",
    "all",
    "t-0",
    "\x00\x1b[31m\u2028",
    "[/oops]",
    "é" * 50,
    "x" * 100_000,
    [],
    [0],
    [7] * 20_000,
    [[0, 1, 2]],
    {},
    {"kind": "timer.fire"},
    {"kind": "nope", "x": 1},
)
#: settings pushed past the limits, which without the loader's bounds would hang, exhaust memory or crash
LIMITS: tuple[tuple[tuple, Any], ...] = (
    (("cluster", "config", "minibroker.timer.wheel.size"), 1),
    (("cluster", "config", "minibroker.timer.wheel.size"), 10**9),
    (("cluster", "config", "minibroker.timer.tick.ms"), 10**12),
    (("cluster", "config", "minibroker.reaper.poll.ms"), 1),
    (("cluster", "config", "replica.fetch.wait.max.ms"), 0),
    (("cluster", "config", "log.segment.bytes"), 1),
    (("cluster", "brokers"), 10**9),
    (("cluster", "brokers"), 1000),
    (("cluster", "latency_ms"), 10**12),
    (("scenario", "end_ms"), 10**9),
    (("scenario", "end_ms"), 2**64),
    (("scenario", "end_ms"), 5_000_000),
    (("topics", 0, "partitions"), 10**6),
    (("topics", 0, "partitions"), 30_000),
    (("steps", 0, "at"), 10**9),
    (("steps", 0, "bytes"), 10**30),
    (("steps", 0, "records"), 10**15),
    (("clients", 0, "config", "request.timeout.ms"), 10**12),
)
BREAKS = ("bom", "invalid-utf8", "truncate", "deep", "nul", "bracket")


def _set(doc: dict, where: tuple, value: Any) -> None:
    parent: Any = doc
    for key in where[:-1]:
        if isinstance(parent, dict):
            parent = parent.setdefault(key, {})
        elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent = parent[key]
        else:
            return
    fits = isinstance(parent, list) and isinstance(where[-1], int) and where[-1] < len(parent)
    if isinstance(parent, dict) or fits:
        parent[where[-1]] = value


def _mutate(rng: random.Random, doc: dict) -> None:
    action = rng.choice(
        ("replace", "replace", "delete", "rename", "limit", "limit", "duplicate", "empty-assign")
    )
    every = paths(doc)
    if action == "limit":
        where, value = rng.choice(LIMITS)
        _set(doc, where, value)
        return
    steps, clients = doc.get("steps"), doc.get("clients")
    if action == "duplicate" and isinstance(steps, list):
        doc["steps"] = steps * rng.choice((2, 10))
        return
    if action == "empty-assign" and isinstance(clients, list) and isinstance(steps, list):
        for client in clients:
            if isinstance(client, dict) and client.get("type") == "consumer":
                client["assign"] = []
        steps.append({"at": 1, "action": "fetch", "client": "consumer"})
        return
    if not every:
        return
    where = rng.choice(every)
    parent: Any = doc
    for key in where[:-1]:
        parent = parent[key]
    last = where[-1]
    if action == "replace":
        parent[last] = (
            _nested(rng.choice((3, 40))) if rng.random() < 0.05 else copy.deepcopy(rng.choice(HOSTILE))
        )
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent[rng.choice(("x", "ät", "steps", "0", "a.b")) + "_"] = parent.pop(last)


def _break(rng: random.Random, data: bytes) -> bytes:
    kind = rng.choice(BREAKS)
    cut = rng.randrange(len(data) + 1)
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "invalid-utf8":
        return data[:cut] + b"\xff\xfe" + data[cut:]
    if kind == "truncate":
        return data[:cut]
    if kind == "deep":
        return data + b"x = " + b"[" * 1000 + b"]" * 1000 + b"\n"
    if kind == "nul":
        return data[:cut] + b"\x00" + data[cut:]
    return data[:cut] + rng.choice((b"[", b"]]", b"=", b'"', b"\n[[steps]]\n", b"{")) + data[cut:]


def corpus(seed: int, count: int, library: list[Path] | None = None) -> list[tuple[str, bytes]]:
    """``count`` (name, file bytes) cases, the same ones for the same seed, mutated from the bundled
    scenarios or from the files of ``library`` (shrunk chaos scenarios, sweep files, ...)."""
    rng = random.Random(seed)
    paths_ = LIBRARY if library is None else library
    documents = DOCUMENTS if library is None else [tomllib.loads(p.read_text()) for p in library]
    cases = []
    for number in range(count):
        source = rng.randrange(len(documents))
        doc = copy.deepcopy(documents[source])
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, doc)
        data = dump(doc).encode("utf-8", "surrogatepass")
        if rng.random() < 0.15:
            data = _break(rng, data)
        cases.append((f"case{number:03d}-{paths_[source].stem}", data))
    return cases
