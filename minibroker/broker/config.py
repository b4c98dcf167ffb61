"""Broker and client configuration by Kafka's names, with Kafka's defaults.

``BrokerConfig.from_kafka({"min.insync.replicas": 2, ...})`` maps Kafka names to
fields; an unknown name or a value of the wrong type raises ``ConfigError``
naming the key and the expected form. Settings that Kafka does not have are
prefixed ``minibroker.``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import attrs


class ConfigError(ValueError):
    """A configuration key or value that minibroker cannot accept."""


def _kafka_name(field: attrs.Attribute) -> str:
    return field.metadata["kafka"]


def _int_field(kafka: str, default: int, minimum: int = 0) -> Any:
    return attrs.field(default=default, metadata={"kafka": kafka, "type": int, "min": minimum})


def _bool_field(kafka: str, default: bool) -> Any:
    return attrs.field(default=default, metadata={"kafka": kafka, "type": bool})


def _str_field(kafka: str, default: str, choices: tuple[str, ...]) -> Any:
    return attrs.field(default=default, metadata={"kafka": kafka, "type": str, "choices": choices})


def _list_field(kafka: str, default: str, items: tuple[str, ...]) -> Any:
    """A comma-separated list of names, each one of ``items`` (at least one)."""
    return attrs.field(
        default=default, metadata={"kafka": kafka, "type": str, "choices": None, "items": items}
    )


def _text_field(kafka: str, default: str) -> Any:
    """A free-form string setting (a group id, an instance id)."""
    return attrs.field(default=default, metadata={"kafka": kafka, "type": str, "choices": None})


#: above this many settings, an unknown name is answered with the closest ones instead of the whole list
_LISTED_NAMES = 24


def _expected_names(key: str, names: Mapping[str, str]) -> str:
    """What an unknown setting ``key`` is told: every name when there are few, else the closest ones."""
    if len(names) <= _LISTED_NAMES:
        return f"expected one of: {', '.join(sorted(names))}"
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
    return f"{hint}expected one of the {len(names)} settings listed in docs/scenarios.md#broker-settings"


class _KafkaNamed:
    """Mixin: build from and show as Kafka-named settings."""

    @classmethod
    def kafka_names(cls) -> dict[str, str]:
        """Kafka name -> field name."""
        return {_kafka_name(f): f.name for f in attrs.fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def from_kafka(cls, settings: Mapping[str, Any], where: str = "config") -> Any:
        names = cls.kafka_names()
        values: dict[str, Any] = {}
        fields = {f.name: f for f in attrs.fields(cls)}  # type: ignore[arg-type]
        for key, value in settings.items():
            if key not in names:
                raise ConfigError(f"{where}: unknown setting {key!r}; {_expected_names(key, names)}")
            field = fields[names[key]]
            values[field.name] = check_value(field, value, f"{where}.{key}")
        return cls(**values)

    def with_kafka(self, settings: Mapping[str, Any], where: str = "config") -> Any:
        """A copy with some Kafka-named settings changed."""
        base = self.to_kafka()
        base.update(settings)
        return type(self).from_kafka(base, where)

    def to_kafka(self) -> dict[str, Any]:
        return {_kafka_name(f): getattr(self, f.name) for f in attrs.fields(type(self))}


def check_value(field: attrs.Attribute, value: Any, where: str) -> Any:
    """Validate one value against a field's metadata; return it or raise ConfigError."""
    kind = field.metadata["type"]
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        if value < field.metadata["min"]:
            raise ConfigError(f"{where}: expected a number >= {field.metadata['min']}, got {value}")
        if value > field.metadata.get("max", value):
            low, high = field.metadata["min"], field.metadata["max"]
            raise ConfigError(f"{where}: expected a number from {low} to {high}, got {value}")
        return value
    choices = field.metadata["choices"]
    if choices is None:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        items = field.metadata.get("items")
        names = [name.strip() for name in value.split(",")]
        if items is not None and (not value.strip() or any(name not in items for name in names)):
            raise ConfigError(
                f"{where}: expected a comma-separated list of {', '.join(items)}, got {value!r}"
            )
        return value
    if value not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return value


@attrs.define(frozen=True)
class BrokerConfig(_KafkaNamed):
    """Per-broker settings (Kafka's names in ``metadata['kafka']``)."""

    replica_lag_time_max_ms: int = _int_field("replica.lag.time.max.ms", 30_000, 1)
    min_insync_replicas: int = _int_field("min.insync.replicas", 1, 1)
    replica_fetch_wait_max_ms: int = _int_field("replica.fetch.wait.max.ms", 500)
    replica_fetch_min_bytes: int = _int_field("replica.fetch.min.bytes", 1)
    replica_fetch_max_bytes: int = _int_field("replica.fetch.max.bytes", 1_048_576, 1)
    replica_fetch_backoff_ms: int = _int_field("replica.fetch.backoff.ms", 1000)
    replica_socket_timeout_ms: int = _int_field("replica.socket.timeout.ms", 30_000, 1)
    #: KRaft: a broker's heartbeat cadence, and how long the controller waits before fencing a silent
    #: broker (a controller setting in Kafka; the emulated controller reads the cluster's base config)
    broker_heartbeat_interval_ms: int = _int_field("broker.heartbeat.interval.ms", 2000, 1)
    broker_session_timeout_ms: int = _int_field("broker.session.timeout.ms", 9000, 1)
    unclean_leader_election_enable: bool = _bool_field("unclean.leader.election.enable", False)
    producer_purge_interval: int = _int_field("producer.purgatory.purge.interval.requests", 1000)
    fetch_purge_interval: int = _int_field("fetch.purgatory.purge.interval.requests", 1000)
    delete_records_purge_interval: int = _int_field("delete.records.purgatory.purge.interval.requests", 1)
    log_segment_bytes: int = _int_field("log.segment.bytes", 1_073_741_824, 1)
    #: a log rolls its active segment once a batch arrives this long after the segment's first one
    log_roll_ms: int = _int_field("log.roll.ms", 604_800_000, 1)
    #: the log cleaner (compaction of cleanup.policy=compact topics, minibroker.broker.log_cleaner):
    #: on or off, its pause when nothing was cleanable, and the topic configs' broker defaults
    log_cleaner_enable: bool = _bool_field("log.cleaner.enable", True)
    log_cleaner_backoff_ms: int = _int_field("log.cleaner.backoff.ms", 15_000, 1)
    log_cleaner_delete_retention_ms: int = _int_field("log.cleaner.delete.retention.ms", 86_400_000)
    log_cleaner_min_compaction_lag_ms: int = _int_field("log.cleaner.min.compaction.lag.ms", 0)
    log_cleaner_max_compaction_lag_ms: int = _int_field("log.cleaner.max.compaction.lag.ms", 2**63 - 1, 1)
    #: with a data dir (``serve --data-dir``): fsync a log after this many messages / this long after
    #: its oldest unflushed one; Kafka's defaults (Long.MAX_VALUE) leave it to the OS
    log_flush_interval_messages: int = _int_field("log.flush.interval.messages", 2**63 - 1, 1)
    log_flush_interval_ms: int = _int_field("log.flush.interval.ms", 2**63 - 1, 0)
    #: with a data dir: how often each broker writes its high watermarks to its checkpoint file
    replica_high_watermark_checkpoint_interval_ms: int = _int_field(
        "replica.high.watermark.checkpoint.interval.ms", 5000, 1
    )
    timer_tick_ms: int = _int_field("minibroker.timer.tick.ms", 1, 1)
    timer_wheel_size: int = _int_field("minibroker.timer.wheel.size", 20, 1)
    timer_kind: str = _str_field("minibroker.timer.kind", "kafka", ("kafka", "heap", "hashed"))
    reaper_poll_ms: int = _int_field("minibroker.reaper.poll.ms", 200, 1)
    #: Kafka >= 3.7 (KAFKA-15583) holds the HW while the ISR is below min ISR; false replays older Kafka
    freeze_hw_under_min_isr: bool = _bool_field("minibroker.hw.freeze.under.min.isr", True)
    #: topics a client names in Metadata (or produces to) are created on first use, like Kafka's default
    auto_create_topics_enable: bool = _bool_field("auto.create.topics.enable", True)
    #: partitions and replication factor of an auto-created topic
    num_partitions: int = _int_field("num.partitions", 1, 1)
    default_replication_factor: int = _int_field("default.replication.factor", 1, 1)
    #: the most topics Metadata requests may auto-create in the cluster's life (Kafka has no bound)
    auto_create_topics_max: int = _int_field("minibroker.auto.create.topics.max", 1000)
    #: the most partition replicas (partitions times replication factor, internal topics included) the
    #: cluster holds: a topic or partitions past it are refused (Kafka has no bound; memory does)
    partition_replicas_max: int = _int_field("minibroker.partition.replicas.max", 100_000, 1)
    #: the largest record batch a partition accepts (topics: max.message.bytes; MESSAGE_TOO_LARGE past it)
    message_max_bytes: int = _int_field("message.max.bytes", 1_048_588)
    #: the topics' default message.timestamp.type and timestamp bounds (INVALID_TIMESTAMP outside them)
    log_message_timestamp_type: str = _str_field(
        "log.message.timestamp.type", "CreateTime", ("CreateTime", "LogAppendTime")
    )
    log_message_timestamp_before_max_ms: int = _int_field("log.message.timestamp.before.max.ms", 2**63 - 1)
    log_message_timestamp_after_max_ms: int = _int_field("log.message.timestamp.after.max.ms", 3_600_000)
    #: set (to any class name): the wire front end checks ACLs (server/authorizer.py); empty: no authorizer
    authorizer_class_name: str = _text_field("authorizer.class.name", "")
    #: principals (``;``-separated, e.g. ``User:ANONYMOUS``) the authorizer lets do anything
    super_users: str = _text_field("super.users", "")
    #: with an authorizer: a resource no ACL names is open to everyone (Kafka's default: closed)
    allow_everyone_if_no_acl_found: bool = _bool_field("allow.everyone.if.no.acl.found", False)
    #: the largest request frame a wire connection accepts (a bigger one closes the connection)
    socket_request_max_bytes: int = _int_field("socket.request.max.bytes", 104_857_600, 1)
    #: fetch sessions (KIP-227) a broker keeps for wire clients; 0 disables incremental fetches
    max_incremental_fetch_session_cache_slots: int = _int_field(
        "max.incremental.fetch.session.cache.slots", 1000
    )
    #: the group coordinator (minibroker.coordinator.group): its internal topic, timers and limits
    offsets_topic_num_partitions: int = _int_field("offsets.topic.num.partitions", 50, 1)
    #: used as min(this, brokers) (Kafka refuses to create the topic with fewer live brokers)
    offsets_topic_replication_factor: int = _int_field("offsets.topic.replication.factor", 3, 1)
    #: the segment size of __consumer_offsets (compacted, like __transaction_state)
    offsets_topic_segment_bytes: int = _int_field("offsets.topic.segment.bytes", 104_857_600, 1)
    offsets_commit_timeout_ms: int = _int_field("offsets.commit.timeout.ms", 5000, 1)
    offsets_retention_minutes: int = _int_field("offsets.retention.minutes", 10080, 1)
    offsets_retention_check_interval_ms: int = _int_field("offsets.retention.check.interval.ms", 600_000, 1)
    offset_metadata_max_bytes: int = _int_field("offset.metadata.max.bytes", 4096)
    group_initial_rebalance_delay_ms: int = _int_field("group.initial.rebalance.delay.ms", 3000)
    group_min_session_timeout_ms: int = _int_field("group.min.session.timeout.ms", 6000)
    group_max_session_timeout_ms: int = _int_field("group.max.session.timeout.ms", 1_800_000)
    group_max_size: int = _int_field("group.max.size", 2_147_483_647, 1)
    #: the consumer group protocol (KIP-848): members' session timeout and heartbeat interval, the
    #: group size limit, the server-side assignors (the first is the default) and the migration policy
    group_consumer_session_timeout_ms: int = _int_field("group.consumer.session.timeout.ms", 45_000, 1)
    group_consumer_heartbeat_interval_ms: int = _int_field("group.consumer.heartbeat.interval.ms", 5000, 1)
    group_consumer_max_size: int = _int_field("group.consumer.max.size", 2_147_483_647, 1)
    group_consumer_assignors: str = _list_field(
        "group.consumer.assignors", "uniform,range", ("uniform", "range")
    )
    group_consumer_migration_policy: str = _str_field(
        "group.consumer.migration.policy",
        "bidirectional",
        ("disabled", "upgrade", "downgrade", "bidirectional"),
    )
    #: virtual time to read one record of a __consumer_offsets partition when a broker becomes its
    #: coordinator (COORDINATOR_LOAD_IN_PROGRESS meanwhile); 0 loads at once
    coordinator_load_ms_per_record: int = _int_field("minibroker.coordinator.load.ms.per.record", 1)
    #: the transaction coordinator (minibroker.coordinator.transaction): its internal topic and timers
    transaction_state_log_num_partitions: int = _int_field("transaction.state.log.num.partitions", 50, 1)
    #: used as min(this, brokers), and the min ISR as min(transaction.state.log.min.isr, that)
    transaction_state_log_replication_factor: int = _int_field(
        "transaction.state.log.replication.factor", 3, 1
    )
    transaction_state_log_min_isr: int = _int_field("transaction.state.log.min.isr", 2, 1)
    transaction_state_log_segment_bytes: int = _int_field(
        "transaction.state.log.segment.bytes", 104_857_600, 1
    )
    transaction_max_timeout_ms: int = _int_field("transaction.max.timeout.ms", 900_000, 1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _int_field(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, 1
    )
    #: an id idle this long in Empty or Complete* is forgotten, checked every ...cleanup.interval.ms
    transactional_id_expiration_ms: int = _int_field("transactional.id.expiration.ms", 604_800_000, 1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _int_field(
        "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000, 1
    )
    #: KIP-890: a leader asks the transaction coordinator before a transaction's first batch on a partition
    transaction_partition_verification_enable: bool = _bool_field(
        "transaction.partition.verification.enable", True
    )
    #: a leader asks again, this often, a transaction version 2 add refused CONCURRENT_TRANSACTIONS,
    #: until ...backoff.max.ms (at most request.timeout.ms) after its first ask
    add_partitions_to_txn_retry_backoff_ms: int = _int_field("add.partitions.to.txn.retry.backoff.ms", 20, 1)
    add_partitions_to_txn_retry_backoff_max_ms: int = _int_field(
        "add.partitions.to.txn.retry.backoff.max.ms", 100
    )
    #: how long the transaction coordinator's writes (state and markers) may wait for the ISR
    request_timeout_ms: int = _int_field("request.timeout.ms", 30_000, 1)
    #: share groups (KIP-932, minibroker.broker.share): the acquisition lock, the delivery limit, the
    #: cap on a share partition's in-flight records, and the share group coordinator's timers
    group_share_record_lock_duration_ms: int = _int_field("group.share.record.lock.duration.ms", 30_000, 1)
    group_share_delivery_count_limit: int = _int_field("group.share.delivery.count.limit", 5, 2)
    group_share_partition_max_record_locks: int = _int_field(
        "group.share.partition.max.record.locks", 2000, 1
    )
    group_share_session_timeout_ms: int = _int_field("group.share.session.timeout.ms", 45_000, 1)
    group_share_heartbeat_interval_ms: int = _int_field("group.share.heartbeat.interval.ms", 5000, 1)
    #: the share coordinator's internal topic (``__share_group_state``)
    share_coordinator_state_topic_num_partitions: int = _int_field(
        "share.coordinator.state.topic.num.partitions", 50, 1
    )
    #: used as min(this, brokers), and the min ISR as min(share.coordinator.state.topic.min.isr, that)
    share_coordinator_state_topic_replication_factor: int = _int_field(
        "share.coordinator.state.topic.replication.factor", 3, 1
    )
    share_coordinator_state_topic_min_isr: int = _int_field("share.coordinator.state.topic.min.isr", 2, 1)
    #: tiered storage (KIP-405): the broker's switch, the remote purgatories' waits, the copy task's
    #: period, and how often local retention deletes segments already copied
    remote_log_storage_system_enable: bool = _bool_field("remote.log.storage.system.enable", False)
    remote_fetch_max_wait_ms: int = _int_field("remote.fetch.max.wait.ms", 500, 1)
    remote_list_offsets_request_timeout_ms: int = _int_field(
        "remote.list.offsets.request.timeout.ms", 30_000, 1
    )
    remote_log_manager_task_interval_ms: int = _int_field("remote.log.manager.task.interval.ms", 30_000, 1)
    log_retention_check_interval_ms: int = _int_field("log.retention.check.interval.ms", 300_000, 1)
    #: the emulated remote tier as this broker reaches it: virtual time per segment copied and per read
    #: (a remote fetch or a remote offset lookup), and a fault: ``slow`` adds
    #: ``minibroker.remote.storage.slow.ms`` to each, ``failing`` fails each after its latency
    remote_storage_copy_latency_ms: int = _int_field("minibroker.remote.storage.copy.latency.ms", 0)
    remote_storage_read_latency_ms: int = _int_field("minibroker.remote.storage.read.latency.ms", 0)
    remote_storage_fault: str = _str_field(
        "minibroker.remote.storage.fault", "none", ("none", "slow", "failing")
    )
    remote_storage_slow_ms: int = _int_field("minibroker.remote.storage.slow.ms", 1000)

    @property
    def isr_expiration_period_ms(self) -> int:
        """ReplicaManager schedules the ISR shrink check every lag / 2 (at least 1 ms)."""
        return max(1, self.replica_lag_time_max_ms // 2)


@attrs.define(frozen=True)
class ProducerConfig(_KafkaNamed):
    """A producer's settings. ``acks`` is a number here: -1 (all), 0 or 1."""

    acks: int = attrs.field(default=-1, metadata={"kafka": "acks", "type": int, "min": -(2**31)})
    request_timeout_ms: int = _int_field("request.timeout.ms", 30_000)
    response_grace_ms: int = _int_field("minibroker.response.grace.ms", 1000)
    #: a transactional producer's id (minibroker.clients.transactional_producer); "" for none
    transactional_id: str = _text_field("transactional.id", "")
    transaction_timeout_ms: int = _int_field("transaction.timeout.ms", 60_000, 1)
    #: how long a transactional producer waits before it sends a refused coordinator request again
    retry_backoff_ms: int = _int_field("retry.backoff.ms", 100)
    #: how long a transactional producer's call may take before it fails with REQUEST_TIMED_OUT
    max_block_ms: int = _int_field("max.block.ms", 60_000)
    #: how long a transactional producer sends a batch again on a retriable answer (NOT_ENOUGH_REPLICAS)
    delivery_timeout_ms: int = _int_field("delivery.timeout.ms", 120_000, 1)
    #: the transaction protocol version a transactional producer speaks, 1 or 2 (KIP-890): Kafka's
    #: producer reads it from the brokers' finalized ``transaction.version`` feature (ApiVersions)
    #: and uses 2 when they finalize it; here the producer is told
    transaction_version: int = attrs.field(
        default=1,
        metadata={"kafka": "minibroker.transaction.version", "type": int, "min": 1, "max": 2},
    )


@attrs.define(frozen=True)
class ConsumerConfig(_KafkaNamed):
    """A consumer's settings."""

    fetch_min_bytes: int = _int_field("fetch.min.bytes", 1)
    fetch_max_wait_ms: int = _int_field("fetch.max.wait.ms", 500)
    fetch_max_bytes: int = _int_field("fetch.max.bytes", 52_428_800, 1)
    max_partition_fetch_bytes: int = _int_field("max.partition.fetch.bytes", 1_048_576, 1)
    request_timeout_ms: int = _int_field("request.timeout.ms", 30_000)
    isolation_level: str = _str_field(
        "isolation.level", "read_uncommitted", ("read_uncommitted", "read_committed")
    )
    response_grace_ms: int = _int_field("minibroker.response.grace.ms", 1000)
    #: group membership (minibroker.clients.consumer_coordinator): used once the consumer subscribes
    group_id: str = _text_field("group.id", "")
    group_instance_id: str = _text_field("group.instance.id", "")
    session_timeout_ms: int = _int_field("session.timeout.ms", 45_000, 1)
    heartbeat_interval_ms: int = _int_field("heartbeat.interval.ms", 3000, 1)
    max_poll_interval_ms: int = _int_field("max.poll.interval.ms", 300_000, 1)
    partition_assignment_strategy: str = _str_field(
        "partition.assignment.strategy", "range", ("range", "roundrobin")
    )
    enable_auto_commit: bool = _bool_field("enable.auto.commit", True)
    auto_commit_interval_ms: int = _int_field("auto.commit.interval.ms", 5000, 1)
    auto_offset_reset: str = _str_field("auto.offset.reset", "latest", ("earliest", "latest", "none"))
    #: KIP-848: "consumer" runs minibroker.clients.consumer_membership_manager instead of the classic protocol
    group_protocol: str = _str_field("group.protocol", "classic", ("classic", "consumer"))
    #: the consumer protocol's server-side assignor ("" lets the coordinator choose)
    group_remote_assignor: str = _text_field("group.remote.assignor", "")
