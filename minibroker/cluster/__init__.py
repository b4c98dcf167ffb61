"""Layer 4: replicated partitions end to end: brokers, logs, HW/LEO, ISR, DelayedProduce and DelayedFetch."""

from minibroker.cluster.client import ClientRequest, Consumer, Producer
from minibroker.cluster.cluster import Cluster, TopicSpec, open_cluster
from minibroker.cluster.config import BrokerConfig, ConfigError, ConsumerConfig, ProducerConfig
from minibroker.cluster.errors import Errors
from minibroker.cluster.messages import ProduceData, TopicPartition

__all__ = [
    "BrokerConfig",
    "ClientRequest",
    "Cluster",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "Errors",
    "ProduceData",
    "Producer",
    "ProducerConfig",
    "TopicPartition",
    "TopicSpec",
    "open_cluster",
]
