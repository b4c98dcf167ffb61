"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup of the classic protocol, and their timers.

Kafka 4.x's ``GroupMetadataManager`` (classic part), rule for rule:

- a new dynamic member's first JoinGroup (v4+) answers MEMBER_ID_REQUIRED with its
  new id, which is *pending* until it joins again (its session timeout runs meanwhile);
- a member joining an Empty group starts the initial rebalance: the ``join-<group>``
  task fires after ``group.initial.rebalance.delay.ms`` and is re-armed (for
  min(delay, remaining)) while new members keep arriving, up to the rebalance timeout;
- any other rebalance completes as soon as every member has rejoined, else when
  ``join-<group>`` fires after the rebalance timeout (max of the members'): members
  that did not rejoin are removed;
- completing the join bumps the generation, picks the protocol, answers every
  parked JoinGroup (the leader gets the members' metadata) and arms ``sync-<group>``
  (rebalance timeout): members that have not sent SyncGroup by then are removed;
- the leader's SyncGroup writes the group's metadata record; when it is replicated
  every parked SyncGroup gets its assignment and the group is Stable;
- ``heartbeat-<group>-<member>`` runs each member's session timeout; a heartbeat,
  a commit or a completed join re-arms it. A member in the middle of a rebalance
  is not expired unless it is new (it then has 5 minutes to complete its join).

The rules live in ``joining`` (JoinGroup, rebalance), ``syncing`` (SyncGroup) and
``sessions`` (Heartbeat, session timeouts, LeaveGroup), over ``classic_base``; the host
(``GroupCoordinator``) provides ``groups``, ``timer``, ``config``, ``now``, ``write`` and ``emit``.
"""

from __future__ import annotations

from minibroker.coordinator.group.classic_base import heartbeat_key, join_key, sync_key, write_error
from minibroker.coordinator.group.joining import JoinPhase
from minibroker.coordinator.group.sessions import MemberSessions
from minibroker.coordinator.group.syncing import SyncPhase

__all__ = ["ClassicMembership", "heartbeat_key", "join_key", "sync_key", "write_error"]


class ClassicMembership(JoinPhase, SyncPhase, MemberSessions):
    """Mixin of ``GroupCoordinator``: the classic group protocol."""
