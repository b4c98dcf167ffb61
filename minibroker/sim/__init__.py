"""The emulated cluster harness: brokers wired by a network with latencies and faults, and snapshots.

``open_cluster`` starts a cluster of brokers on trio (``cluster``); ``network`` carries requests between
them with per-link latency and faults; ``snapshot`` is the read-only view the TUI and the reports use.
Its layer is above the broker, controller, coordinator and clients it puts together. This
package re-exports the harness's public names, with the client and config types a harness user needs.

The names are resolved on first use, so importing one of its modules (``sim.snapshot`` for the views,
``sim.network``) does not load the whole harness.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minibroker.broker.config import BrokerConfig, ConfigError, ConsumerConfig, ProducerConfig
    from minibroker.clients import ClientRequest, Consumer, Producer
    from minibroker.common.errors import Errors
    from minibroker.common.messages import ProduceData, TopicPartition
    from minibroker.sim.cluster import Cluster, TopicSpec, open_cluster

#: each public name and the module that defines it
_HOMES = {
    "BrokerConfig": "minibroker.broker.config",
    "ClientRequest": "minibroker.clients",
    "Cluster": "minibroker.sim.cluster",
    "ConfigError": "minibroker.broker.config",
    "Consumer": "minibroker.clients",
    "ConsumerConfig": "minibroker.broker.config",
    "Errors": "minibroker.common.errors",
    "ProduceData": "minibroker.common.messages",
    "Producer": "minibroker.clients",
    "ProducerConfig": "minibroker.broker.config",
    "TopicPartition": "minibroker.common.messages",
    "TopicSpec": "minibroker.sim.cluster",
    "open_cluster": "minibroker.sim.cluster",
}


def __getattr__(name: str) -> object:
    try:
        home = _HOMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
