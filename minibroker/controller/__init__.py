"""The controller: broker registrations, partition state, AlterPartition and leader elections.

A minimal KRaft controller (``quorum_controller``) and the registration state of each broker
(``broker_registrations``). In the layer of Kafka's server parts, with ``coordinator``, under
``broker``: as Kafka's broker depends on its metadata and controller modules, the broker imports the
controller's types and the controller imports nothing of the broker (it reaches brokers only through
messages). Topic creation and deletion act on the whole emulated cluster: ``minibroker.sim.topic_admin``.
"""
