"""Kafka's broker side of replication: one broker's log, partitions and ReplicaManager.

The log and its segments, partitions with the leader's HW and ISR rules, the ReplicaManager and its
produce, fetch, DeleteRecords and ElectLeaders paths, the Delayed* operations it parks in its purgatories,
the log cleaner (compaction), the replica fetcher, producer state, fetch sessions, the broker, topic and
log configs, and the views a broker reports
(``views``). In the layer of Kafka's server parts with ``controller`` and ``coordinator``, above
both: as Kafka's broker depends on its metadata, controller and group-coordinator modules, the broker
imports their types, and they import nothing of the broker.
"""
