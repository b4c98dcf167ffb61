"""Kafka message schemas kafka-python does not ship (the share-group APIs of KIP-932), in Kafka's JSON
schema form, loaded by ``minibroker.server.share_messages``."""
