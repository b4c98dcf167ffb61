"""The emulator's own client API: Producer and Consumer.

Scenarios, tests, the TUI and the wire front end all go through it. Beside them: the consumer's side
of the group protocol (``consumer_coordinator``, Kafka's ConsumerCoordinator) and the admin client
(``admin``), and the share consumer of KIP-932's share groups (``share_consumer``). Their layer is
above the broker, controller and coordinator whose requests they send, below the ``sim`` harness.

Every request a client makes is a ``ClientRequest`` record kept by the cluster:
when it was created and completed, the per-partition outcome (Kafka error
names), and *why* it completed: ``immediate``, ``condition`` (its delayed
operation's condition held), ``expiry`` (the purgatory timed it out),
``leadership`` (the leader lost leadership), or ``network`` (connection reset
or no answer). Clients learn leaders from the controller's current state (no
stale metadata) and do not retry, except the transactional producer's coordinator requests
(``transactional_producer``; its consumers read with ``read_committed``).
"""

from minibroker.clients.consumer import Consumer
from minibroker.clients.producer import Producer
from minibroker.clients.request import ClientRequest
from minibroker.clients.share_consumer import ShareConsumer
from minibroker.clients.transactional_producer import TransactionalProducer

__all__ = ["ClientRequest", "Consumer", "Producer", "ShareConsumer", "TransactionalProducer"]
