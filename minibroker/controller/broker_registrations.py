"""BrokerRegistrations: the controller's word on which brokers may be in an ISR (KIP-841).

KRaft's controller keeps a registration per broker; a broker whose heartbeats
stopped is *fenced* (here: a crash the controller has noticed, until the broker
starts again), and a broker leaving on purpose is *in controlled shutdown*. The
metadata log carries those states to every broker together with the ISR changes
they cause, and a leader reads them from its metadata cache:

- a replica is *ISR-eligible* when its broker is neither fenced nor in
  controlled shutdown;
- the leader's HW waits for a caught-up replica outside the (maximal) ISR only if
  it is ISR-eligible, and the leader proposes, and the controller accepts, only
  eligible replicas as new ISR members.

The controller sends a new ``BrokerRegistrations`` to every live broker before the
``LeaderAndIsr`` messages of the same decision; links are FIFO, so a leader never
sees the ISR shrink without the fencing that caused it.
"""

from __future__ import annotations

import attrs

FENCED = "fenced"
CONTROLLED_SHUTDOWN = "controlled_shutdown"
UNFENCED = "unfenced"


@attrs.frozen(slots=True)
class BrokerRegistrations:
    """Brokers that are fenced or in controlled shutdown; every other broker is eligible."""

    fenced: frozenset[int] = frozenset()
    shutting_down: frozenset[int] = frozenset()

    def is_isr_eligible(self, broker: int) -> bool:
        """Kafka's ``isReplicaIsrEligible`` minus the broker-epoch check: not fenced, not shutting down."""
        return broker not in self.fenced and broker not in self.shutting_down

    def state_of(self, broker: int) -> str:
        if broker in self.fenced:
            return FENCED
        if broker in self.shutting_down:
            return CONTROLLED_SHUTDOWN
        return UNFENCED

    def with_state(self, broker: int, state: str) -> BrokerRegistrations:
        """A copy where ``broker`` is in ``state`` (one of FENCED, CONTROLLED_SHUTDOWN, UNFENCED)."""
        fenced = self.fenced - {broker}
        shutting_down = self.shutting_down - {broker}
        if state == FENCED:
            fenced |= {broker}
        elif state == CONTROLLED_SHUTDOWN:
            shutting_down |= {broker}
        elif state != UNFENCED:
            raise ValueError(f"unknown broker state {state!r}")
        return BrokerRegistrations(fenced, shutting_down)
