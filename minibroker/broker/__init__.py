"""Kafka's broker side of replication: one broker's log, partitions and ReplicaManager.

The log and its segments, partitions with the leader's HW and ISR rules, the ReplicaManager and its
produce, fetch and DeleteRecords paths, the Delayed* operations it parks in its purgatories, the replica
fetcher, producer state, fetch sessions, and the broker and topic configs. Rank 3 of the layers, beside
``controller`` and ``coordinator``: Kafka's server parts.
"""
