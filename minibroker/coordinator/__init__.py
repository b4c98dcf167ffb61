"""Kafka's coordinators: the group coordinator (``group``) and its state on ``__consumer_offsets``.

Rank 4 of the layers, beside ``broker`` and ``controller``: Kafka's server parts.
"""
