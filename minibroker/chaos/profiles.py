"""Chaos profiles: what the generator draws, and which findings are expected.

- ``default``: clean leader election. Nothing acknowledged with acks=-1 while the
  effective min.insync.replicas was >= 2 may be lost: every violation is a bug.
- ``unclean``: ``unclean.leader.election.enable=true`` and more crashes. Losses
  of acknowledged records (invariants 2 and 3) are *expected*: this profile proves
  the checker sees them. So is their consequence for consumer groups: a committed
  offset that goes back after an unclean election truncated its partition below
  what members had read (invariant 7, cause ``unclean-truncation``, see ``groups``).
  Any other violation is still a bug.
- ``transactions``: the ``default`` draws plus, in every run, transactional producers (commits,
  aborts, crashes mid-transaction, zombies fenced by a successor), READ_COMMITTED consumers and a
  consume-transform-produce loop (invariant 8, ``minibroker.chaos.txn_checks``). Every violation
  is a bug.
- ``transactions-v2``: ``transactions`` with every transactional producer on transaction protocol
  version 2 (KIP-890, Kafka 4's protocol: an epoch bump at every EndTxn, partitions added by the
  produce). Every violation is a bug.
- ``compaction``: the ``default`` draws plus, in every run, a ``cleanup.policy=compact`` topic
  written with keyed records and tombstones while the log cleaner runs (invariant 11,
  ``minibroker.chaos.compaction_checks``). Every violation is a bug.
- ``share``: share groups (KIP-932) instead of the generated schedules: three share consumers of one
  group through a consumer's stall past the lock duration, a consumer's crash and a broker's crash
  (``minibroker.chaos.share``; invariants 12 to 14). Every violation is a bug.
- ``acks1``: mostly acks=1 producers and leader crashes. acks=1 records lost on a
  leader crash are Kafka's documented trade-off: counted, never violations.
"""

from __future__ import annotations

import attrs

from minibroker.chaos.violations import UNCLEAN_TRUNCATION, Violation

FAULTS_ALL = {"pause": 2, "latency": 2, "drop": 2, "crash": 2, "shutdown": 1, "min_isr": 1}


@attrs.frozen
class Profile:
    name: str
    description: str
    unclean: bool
    acks: dict[int, int]  # acks -> weight
    fault_weights: dict[str, int]
    faults: tuple[int, int]  # how many faults, inclusive range
    expected: frozenset[int] = frozenset()  # invariants whose violations this profile expects
    replication: tuple[int, int] = (1, 3)  # replication factor, inclusive range
    min_isr: tuple[int, int] = (1, 3)  # min.insync.replicas, inclusive range
    brokers: tuple[int, int] = (3, 5)  # brokers, inclusive range
    lag_ms: tuple[int, ...] = (300, 600, 1000)  # replica.lag.time.max.ms choices
    #: chance of adding Jepsen's classic unclean-loss pattern (see generate.lagging_then_crashed)
    pattern: float = 0.0
    #: chance of adding the acks=1 loss pattern (see generate.paused_then_leader_crashed)
    acks1_pattern: float = 0.0
    #: chance of group members (and faults on them) in a run (see generate.group_members)
    groups: float = 0.5
    #: chance of faults on broker-controller links in a run (see generate.controller_links)
    controller_links: float = 0.0
    #: chance of transactional load in a run (see minibroker.chaos.txn_generate)
    transactions: float = 0.0
    #: the transaction protocol version its transactional producers speak (KIP-890)
    transaction_version: int = 1
    #: causes (``Violation.cause``) whose violations this profile expects, of any invariant
    expected_causes: frozenset[str] = frozenset()
    #: chance that a run's group members speak KIP-848's consumer protocol (see generate.group_members)
    consumer_protocol: float = 0.0
    #: every run has a compacted topic (see minibroker.chaos.compaction_generate)
    compaction: bool = False
    #: the runs are share chaos runs (minibroker.chaos.share), not generated schedules
    share: bool = False

    def expects(self, violation: Violation) -> bool:
        """Whether ``violation`` is a finding this profile expects (reported, not a failure)."""
        return violation.invariant in self.expected or violation.cause in self.expected_causes


_DEFAULT = Profile(
    "default",
    "clean election; no acknowledged acks=-1 record (min ISR >= 2) may be lost",
    False,
    {-1: 6, 1: 2, 0: 1},
    FAULTS_ALL,
    (0, 6),
    pattern=0.25,
    controller_links=0.3,
)

PROFILES = {
    "default": _DEFAULT,
    "unclean": Profile(
        "unclean",
        "unclean leader election on: losses are expected and must be found",
        True,
        {-1: 1},
        {**FAULTS_ALL, "crash": 6, "pause": 4},
        (4, 8),
        frozenset({2, 3}),
        (3, 3),
        (2, 2),
        (3, 4),
        (200, 300),
        0.5,
        expected_causes=frozenset({UNCLEAN_TRUNCATION}),
    ),
    "transactions": attrs.evolve(
        _DEFAULT,
        name="transactions",
        description="the default draws plus transactions: producers that commit, abort, crash and are "
        "fenced, READ_COMMITTED readers and a consume-transform-produce loop; every violation is a bug",
        transactions=1.0,
    ),
    "transactions-v2": attrs.evolve(
        _DEFAULT,
        name="transactions-v2",
        description="the transactions profile with every transactional producer on transaction protocol "
        "version 2 (KIP-890: an epoch bump at every EndTxn, partitions added by the produce); every "
        "violation is a bug",
        transactions=1.0,
        transaction_version=2,
    ),
    "acks1": Profile(
        "acks1",
        "acks=1 producers and leader crashes: acks=1 losses are counted, not violations",
        False,
        {1: 6, -1: 2, 0: 1},
        {**FAULTS_ALL, "crash": 5},
        (1, 6),
        pattern=0.25,
        acks1_pattern=0.5,
    ),
    "consumer-protocol": attrs.evolve(
        _DEFAULT,
        name="consumer-protocol",
        description="group members in every run, speaking KIP-848's consumer protocol; clean election: "
        "nothing may break",
        pattern=0.0,  # members and their faults instead of the unclean-loss pattern and controller links
        controller_links=0.0,
        groups=1.0,
        consumer_protocol=1.0,
    ),
}

PROFILES["compaction"] = attrs.evolve(
    _DEFAULT,
    name="compaction",
    description="the default draws plus a compacted topic with keyed records and tombstones while the log "
    "cleaner runs: the latest value per key stays, tombstones outlive delete.retention.ms; "
    "every violation is a bug",
    compaction=True,
)

PROFILES["share"] = attrs.evolve(
    _DEFAULT,
    name="share",
    description="share groups (KIP-932): share consumers through stalls, crashes and a broker crash; every "
    "record acknowledged or archived, none acknowledged twice in one delivery, no lock overdue by more "
    "than a tick; every violation is a bug",
    share=True,
)


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; expected one of: {', '.join(PROFILES)}") from None
