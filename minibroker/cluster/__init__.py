"""Deprecated name of the emulated cluster harness, kept for one release: import ``minibroker.sim``.

Importing it warns once (DeprecationWarning) and gives the names it always exported.
"""

import warnings

warnings.warn(
    "minibroker.cluster is deprecated and will be removed in the next release: "
    "import the cluster harness from minibroker.sim",
    DeprecationWarning,
    stacklevel=2,
)

from minibroker.sim import (  # noqa: E402
    BrokerConfig,
    ClientRequest,
    Cluster,
    ConfigError,
    Consumer,
    ConsumerConfig,
    Errors,
    ProduceData,
    Producer,
    ProducerConfig,
    TopicPartition,
    TopicSpec,
    open_cluster,
)

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
