"""The controller: broker registrations, partition state, AlterPartition and leader elections.

A minimal KRaft controller (``quorum_controller``), the registration state of each broker
(``broker_registrations``) and topic creation and deletion (``topic_admin``), which KRaft gives to the
controller. Rank 3 of the layers, beside ``broker`` and ``coordinator``: Kafka's server parts.
"""
