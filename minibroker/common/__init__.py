"""Plain data shared by the broker, the controller, the group coordinator and the clients.

Kafka's error codes (``errors``), the requests and responses that travel on the emulated network
(``messages``), what a node sees of that network (``network``: the ``Endpoint`` and ``NetworkClient``
protocols), Kafka's rules for topic names (``topic_names``) and record batches (``record_batch``). It
imports only the pure core (timer, purgatory, trace) and ranks just above it, as
``org.apache.kafka.common`` sits under Kafka's server and clients.
"""
