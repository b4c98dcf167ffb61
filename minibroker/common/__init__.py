"""Plain data shared by the broker, the controller, the group coordinator and the clients.

Kafka's error codes (``errors``), the requests and responses that travel on the emulated network
(``messages``), Kafka's rules for topic names (``topic_names``) and record batches in Kafka's v2 format
(``record_batch``). It ranks just above the pure core, as ``org.apache.kafka.common`` sits under Kafka's
server and clients.
"""
