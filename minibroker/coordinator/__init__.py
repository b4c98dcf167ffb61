"""Kafka's coordinators: the group coordinator (``group``) and its state on ``__consumer_offsets``.

In the layer of Kafka's server parts, beside ``broker`` and ``controller`` (docs/architecture.md).
"""
