"""PartitionReassignment: a partition moving from its replicas to a target set (KIP-455).

Kafka's KRaft controller keeps an ongoing reassignment in the partition's registration
as two lists beside the replicas (``PartitionReassignmentReplicas``,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/PartitionReassignmentReplicas.java):

- ``adding``: target replicas that are not replicas yet; ``removing``: replicas not in the
  target. While the move is under way the replicas are the union, the target's order
  first, then the removing ones, so the new replicas fetch from the leader like any
  follower and join the ISR through the leader's AlterPartition.
- It completes once every adding replica is in the ISR and the ISR without the removing
  replicas is not empty: the replicas become the target, the ISR loses the removing ones.
  A target that only removes replicas completes at once.
- Cancelling (``PartitionReassignmentRevert``) goes back to the replicas the partition had
  before: the adding replicas leave the replicas and the ISR (the ISR keeps the original
  replicas; if none of them is in it, the original replicas stand in).
"""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class PartitionReassignment:
    """An ongoing move from ``original`` to ``target``; ``replicas`` is what the partition has meanwhile."""

    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.original if b not in self.target)

    @property
    def replicas(self) -> tuple[int, ...]:
        """The target, then the replicas it removes."""
        return (*self.target, *self.removing)

    def completed_isr(self, isr: tuple[int, ...]) -> tuple[int, ...] | None:
        """The ISR once the move completes with ``isr``, or None while it cannot complete."""
        if any(b not in isr for b in self.adding):
            return None
        kept = tuple(b for b in isr if b not in self.removing)
        return kept or None

    def reverted_isr(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        """The ISR after a cancel: the members among the original replicas (else all of them)."""
        kept = tuple(b for b in isr if b in self.original)
        return kept or self.original
