"""DescribeLogDirs and AlterReplicaLogDirs: one log dir per broker, as Kafka's ``ReplicaManager`` answers.

Each emulated broker has one log dir: ``DIR/broker-<id>`` under ``serve --data-dir``,
else ``/minibroker/broker-<id>`` (its logs are in memory). As Kafka's KafkaApis and
``ReplicaManager.describeLogDirs``:

- DescribeLogDirs (v1-v4) needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED,
  v3+, otherwise no dirs). It lists the replicas this broker hosts (all, or the asked
  ones), by topic: size in bytes (the batches in the log), offset lag ``max(HW - LEO,
  0)``, never a future replica. v4's total and usable bytes are the file system's
  with a data dir, -1 (unknown) in memory;
- AlterReplicaLogDirs (v1-v2) needs ALTER on the cluster. A path other than the
  broker's log dir is LOG_DIR_NOT_FOUND; a replica this broker does not host
  REPLICA_NOT_AVAILABLE; a hosted one is already in the only dir: NONE, nothing moves.
"""

from __future__ import annotations

import os
import shutil

from kafka.protocol.admin import AlterReplicaLogDirsResponse, DescribeLogDirsResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.server import acl_checks
from minibroker.server.authorizer import ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE
from minibroker.server.codec import Request
from minibroker.server.context import Connection

DirResult = DescribeLogDirsResponse.DescribeLogDirsResult
DirTopic = DirResult.DescribeLogDirsTopic
DirPartition = DirTopic.DescribeLogDirsPartition
AlteredTopic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
AlteredPartition = AlteredTopic.AlterReplicaLogDirPartitionResult
#: Kafka's REPLICA_NOT_AVAILABLE (kept for AlterReplicaLogDirs where a replica is not hosted)
REPLICA_NOT_AVAILABLE = 9


def log_dir(conn: Connection, broker_id: int) -> str:
    """The one log dir of ``broker_id``."""
    storage = conn.cluster.storage
    if storage is not None:
        return os.path.join(os.path.abspath(storage.path), f"broker-{broker_id}")
    return f"/minibroker/broker-{broker_id}"


def _allowed(conn: Connection, operation: int) -> bool:
    return not acl_checks.enforced(conn) or conn.authorize(operation, CLUSTER, CLUSTER_NAME)


async def describe_log_dirs(request: Request, conn: Connection) -> DescribeLogDirsResponse:
    version = request.api_version
    response = DescribeLogDirsResponse(throttle_time_ms=0, results=[])
    if version >= 3:
        response.error_code = Errors.NONE
    if not _allowed(conn, DESCRIBE):
        if version >= 3:
            response.error_code = Errors.CLUSTER_AUTHORIZATION_FAILED
        return response
    hosted = conn.replica_manager().partitions
    asked = request.body.topics
    wanted = (
        set(hosted)
        if asked is None
        else {TopicPartition(t.topic, p) for t in asked for p in t.partitions} & set(hosted)
    )
    by_topic: dict[str, list] = {}
    for tp in sorted(wanted):
        log = hosted[tp].log
        by_topic.setdefault(tp.topic, []).append(
            DirPartition(
                partition_index=tp.partition,
                partition_size=sum(segment.size for segment in log.segments),
                offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    path = log_dir(conn, conn.broker_id)
    result = DirResult(
        error_code=Errors.NONE,
        log_dir=path,
        topics=[DirTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
    if version >= 4:
        result.total_bytes, result.usable_bytes = _volume(conn, path)
    response.results = [result]
    return response


def _volume(conn: Connection, path: str) -> tuple[int, int]:
    if conn.cluster.storage is None:
        return -1, -1
    try:
        usage = shutil.disk_usage(path if os.path.isdir(path) else os.path.dirname(path))
    except OSError:
        return -1, -1
    return usage.total, usage.free


async def alter_replica_log_dirs(request: Request, conn: Connection) -> AlterReplicaLogDirsResponse:
    allowed = _allowed(conn, ALTER)
    hosted = conn.replica_manager().partitions
    here = log_dir(conn, conn.broker_id)
    results: dict[str, list] = {}
    for d in request.body.dirs:
        for t in d.topics:
            for p in t.partitions:
                if not allowed:
                    error = Errors.CLUSTER_AUTHORIZATION_FAILED
                elif d.path != here:
                    error = Errors.LOG_DIR_NOT_FOUND
                elif TopicPartition(t.name, p) not in hosted:
                    error = REPLICA_NOT_AVAILABLE
                else:
                    error = Errors.NONE
                results.setdefault(t.name, []).append(AlteredPartition(partition_index=p, error_code=error))
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[AlteredTopic(topic_name=name, partitions=parts) for name, parts in results.items()],
    )
