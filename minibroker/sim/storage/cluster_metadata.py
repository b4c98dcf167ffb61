"""The cluster's metadata in ``cluster.json``: what KRaft keeps in its metadata log.

Topics (partitions, replication factor, assignment, internal or not, config overrides),
every partition's state as the controller decided it (leader, leader epoch, ISR,
partition epoch, replicas), the broker count and the next block of producer ids. The file
is rewritten whole, fsynced, and renamed into place at every change the controller makes
(an election, an ISR change, a topic created, deleted or reconfigured), before any broker
acts on it, as a KRaft controller commits a record before brokers apply it. Deviation:
one snapshot file, not a replicated log of records.
"""

from __future__ import annotations

import json
import os
from typing import Any

from minibroker.common.messages import LeaderAndIsr, TopicPartition
from minibroker.sim.cluster import Cluster, TopicSpec
from minibroker.sim.storage.checkpoints import fsync_dir

FILE = "cluster.json"
VERSION = 1


class MetadataError(ValueError):
    """``cluster.json`` is not metadata this version wrote."""


def snapshot(cluster: Cluster, next_producer_id: int) -> dict[str, Any]:
    topics = [
        {
            "name": spec.name,
            "partitions": spec.partitions,
            "replication_factor": spec.replication_factor,
            "assignment": [list(r) for r in spec.assignment] if spec.assignment else None,
            "internal": spec.internal,
            "configs": dict(spec.configs),
        }
        for spec in cluster.topics.values()
    ]
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "partition_epoch": state.partition_epoch,
            "replicas": list(state.replicas),
        }
        for tp, state in sorted(cluster.controller.state.items())
    ]
    return {
        "version": VERSION,
        "brokers": len(cluster.brokers),
        "next_producer_id": next_producer_id,
        "topics": topics,
        "partitions": partitions,
    }


def write(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def read(path: str) -> dict[str, Any] | None:
    """The stored metadata, checked; None when there is none; MetadataError for anything else."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MetadataError(f"{path}: not minibroker cluster metadata ({error})") from None
    try:
        if data["version"] != VERSION:
            raise ValueError(f"version {data['version']!r}, expected {VERSION}")
        if not isinstance(data["brokers"], int) or data["brokers"] < 1:
            raise ValueError("brokers must be a number >= 1")
        int(data["next_producer_id"])
        for topic in data["topics"]:
            _topic_spec(topic)
        for state in data["partitions"]:
            _state(state)
    except (KeyError, TypeError, ValueError) as error:
        raise MetadataError(f"{path}: not minibroker cluster metadata ({error!s})") from None
    return data


def layouts(data: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Stored topics' (partitions, replication factor) by name."""
    return {t["name"]: (t["partitions"], t["replication_factor"]) for t in data["topics"]}


def restore(cluster: Cluster, data: dict[str, Any]) -> None:
    """Put the stored topics and partition states into ``cluster`` (its brokers not started yet)."""
    for topic in data["topics"]:
        spec = _topic_spec(topic)
        cluster.topics[spec.name] = spec
    for state in data["partitions"]:
        leader_and_isr = _state(state)
        cluster.controller.state[leader_and_isr.tp] = leader_and_isr


def _topic_spec(topic: dict[str, Any]) -> TopicSpec:
    assignment = topic["assignment"]
    return TopicSpec(
        str(topic["name"]),
        int(topic["partitions"]),
        int(topic["replication_factor"]),
        tuple(tuple(int(b) for b in r) for r in assignment) if assignment is not None else None,
        bool(topic["internal"]),
        {str(k): str(v) for k, v in topic["configs"].items()},
    )


def _state(state: dict[str, Any]) -> LeaderAndIsr:
    return LeaderAndIsr(
        TopicPartition(str(state["topic"]), int(state["partition"])),
        int(state["leader"]),
        int(state["leader_epoch"]),
        tuple(int(b) for b in state["isr"]),
        int(state["partition_epoch"]),
        tuple(int(b) for b in state["replicas"]),
    )
