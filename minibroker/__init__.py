"""minibroker: a mini-broker emulator that reproduces Apache Kafka's purgatories on trio."""

__version__ = "0.1.0"
