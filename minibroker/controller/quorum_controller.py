"""Controller: the minimal KRaft-like controller: partition state, ISR commits, leader elections.

The module takes the name of Kafka's KRaft controller, ``QuorumController``
(https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/QuorumController.java):
it plays that part (registrations and fencing, AlterPartition, elections), as one controller
without a Raft quorum or a metadata log, its decisions sent to the brokers over the emulated network.

- It keeps each broker's registration state (``BrokerRegistrations``): fenced
  from the moment it notices a crash until the broker starts again, in
  controlled shutdown from a ``shutdown`` until then.
- ``AlterPartition`` from a leader is validated (it must be the leader, in the
  current leader and partition epochs, and a new member must be ISR-eligible:
  not fenced, not in controlled shutdown, else INELIGIBLE_REPLICA, KIP-841), then
  committed after ``isr_commit_delay_ms`` (re-validated then), bumping the
  partition epoch; the leader hears back over the network. A proposal from a stale
  partition epoch gets INVALID_UPDATE_VERSION and the current state (what a KRaft
  leader would replay from the metadata log).
- When a broker crashes the controller learns of it after
  ``crash_detection_ms``; it fences the broker, removes it from every ISR (never
  the last member: an ISR is not emptied) and elects a new leader, from the ISR,
  for the partitions it led (bumping the leader epoch). With no live ISR member
  the partition goes offline (leader -1) unless ``unclean.leader.election.enable``
  lets any live replica lead.
- A controlled shutdown marks the broker as shutting down and moves leadership
  and ISR membership off it first, so its waiting requests are answered
  NOT_LEADER_OR_FOLLOWER before it stops.
- When a broker's link to the controller heals, it catches up (``catch_up``): the
  states it missed while LeaderAndIsr messages were lost.
- A broker whose heartbeats stop reaching the controller (its direction to the
  controller dropped) is fenced when its session runs out (``BrokerHeartbeatManager``
  states the instant: the last heartbeat's arrival + broker.session.timeout.ms), while it
  is alive: it leaves every ISR and its partitions get new leaders with the next
  leader epoch, exactly as for a noticed crash. The broker itself may not hear of it
  (the controller's messages to it are lost too on a two-way drop): a zombie leader
  goes on appending, but its acks=-1 produces cannot complete (its followers now
  fetch from the new leader, so its HW stays) and its AlterPartition requests are
  lost; it learns its fate when the link heals, and is unfenced when its first
  heartbeat after the heal arrives. An election never picks a fenced broker.
- A partition reassignment (``PartitionReassignment``, KIP-455) makes the replicas the union
  of the old and the target ones; the adding replicas fetch like any follower and join the
  ISR through the leader's AlterPartition; the commit that puts the last one in the ISR
  completes it: the replicas become the target, the removing ones leave the ISR and stop
  (their logs deleted), a removed leader's partition gets a new leader from the target (the
  leader answered NEW_LEADER_ELECTED). A change that removes replicas bumps the leader epoch,
  as KRaft's ``PartitionChangeBuilder`` does; adding replicas bumps only the partition epoch.
- When a broker starts again it is unfenced; offline partitions whose last ISR
  holds it are led by it again; every partition it replicates tells it who leads.

Decisions reach brokers over the network: first the broker registrations (so a
leader knows a broker is fenced before it sees the ISR shrink that follows), then
``LeaderAndIsr`` messages, except at topic creation and for the broker that shuts
down, which apply them directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderAndIsr,
    MetadataCatchUp,
    TopicPartition,
)
from minibroker.common.network import NetworkClient
from minibroker.controller.broker_heartbeat_manager import BrokerHeartbeatManager
from minibroker.controller.broker_registrations import (
    CONTROLLED_SHUTDOWN,
    FENCED,
    UNFENCED,
    BrokerRegistrations,
)
from minibroker.controller.partition_reassignment import PartitionReassignment
from minibroker.runtime import Scheduler
from minibroker.trace import NULL_TRACER, Tracer

CONTROLLER = "controller"


class Controller:
    """Owns the partition states; the brokers' only source of leadership and ISR."""

    def __init__(
        self,
        network: NetworkClient,
        scheduler: Scheduler,
        alive: Callable[[int], bool],
        apply_direct: Callable[[int, LeaderAndIsr], None],
        *,
        brokers: tuple[int, ...] = (),
        isr_commit_delay_ms: int = 0,
        crash_detection_ms: int = 0,
        unclean_leader_election: Callable[[TopicPartition], bool] = lambda tp: False,
        session_timeout_ms: Callable[[], int] = lambda: 9000,
        heartbeat_interval_ms: Callable[[int], int] = lambda broker: 2000,
        heartbeat_latency_ms: Callable[[int], int] = lambda broker: 0,
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self.network = network
        self.scheduler = scheduler
        self.alive = alive
        #: every broker id of the cluster (registration changes go to each live one)
        self.brokers = brokers
        self.apply_direct = apply_direct
        self.isr_commit_delay_ms = isr_commit_delay_ms
        self.crash_detection_ms = crash_detection_ms
        self.unclean_leader_election = unclean_leader_election
        self.tracer = tracer
        self.state: dict[TopicPartition, LeaderAndIsr] = {}
        #: the ongoing reassignments (KRaft keeps them in the partition registration)
        self.reassignments: dict[TopicPartition, PartitionReassignment] = {}
        self.registrations = BrokerRegistrations()
        #: each broker's life as the controller knows it (KRaft's broker epoch): 1, + 1 per restart
        self.broker_epochs: dict[int, int] = {}
        self.isr_commits = 0
        self.elections = 0
        #: called after every change of a partition state, before any broker hears of it (a data dir
        #: stores the metadata there, as KRaft commits a record before brokers apply it)
        self.on_change: Callable[[], None] = lambda: None
        #: live brokers fenced because their session ran out (unfenced by their next heartbeat)
        self.stale: set[int] = set()
        self.heartbeats = BrokerHeartbeatManager(
            scheduler,
            session_timeout_ms,
            heartbeat_interval_ms,
            heartbeat_latency_ms,
            self._session_expired,
            self._heartbeat_resumed,
        )
        network.register(CONTROLLER, self)

    # --- topics ------------------------------------------------------------------------------
    def create_partition(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """Register a partition led by its first replica, all replicas in sync; apply at once."""
        state = LeaderAndIsr(tp, replicas[0], 0, replicas, 0, replicas)
        self.state[tp] = state
        for broker in replicas:
            if self.alive(broker):
                self.apply_direct(broker, state)

    def leader_of(self, tp: TopicPartition) -> int:
        state = self.state.get(tp)
        return -1 if state is None else state.leader

    # --- AlterPartition ----------------------------------------------------------------------
    def deliver(self, src: Any, message: Any, respond: Callable[[Any], None] | None) -> None:
        if not isinstance(message, AlterPartitionRequest) or respond is None:
            raise TypeError(f"the controller cannot handle {type(message).__name__}")
        error = self._validate(message)
        if error is not Errors.NONE:
            self._reject(message, error, respond)
            return
        if self.isr_commit_delay_ms:
            self.scheduler.call_later(self.isr_commit_delay_ms, self._commit, message, respond)
        else:
            self._commit(message, respond)

    def _validate(self, request: AlterPartitionRequest) -> Errors:
        if request.broker_epoch >= 0 and request.broker_epoch != self.broker_epochs.get(request.broker_id, 1):
            # sent before its broker restarted: committing it would change an ISR behind the back of the
            # broker's new life, which never hears the answer (stale_broker_epoch_alter_partition.toml)
            return Errors.STALE_BROKER_EPOCH
        state = self.state.get(request.tp)
        if state is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        if state.leader != request.broker_id or state.leader_epoch != request.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if state.partition_epoch != request.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION
        if request.broker_id not in request.new_isr:
            return Errors.NOT_LEADER_OR_FOLLOWER
        added = set(request.new_isr) - set(state.isr)
        if any(not self.registrations.is_isr_eligible(broker) for broker in added):
            return Errors.INELIGIBLE_REPLICA
        return Errors.NONE

    def _reject(self, request: AlterPartitionRequest, error: Errors, respond: Callable[[Any], None]) -> None:
        """Answer ``error``; for a stale partition epoch also send the leader the current state.

        A KRaft leader whose AlterPartition is INVALID_UPDATE_VERSION does not retry: it
        waits for the newer state it will replay from the metadata log. Here that state
        reaches it as a LeaderAndIsr (its answer to an earlier proposal may have been lost
        to a request timeout, and nothing else would tell it).
        """
        respond(AlterPartitionResponse(error))
        if error is Errors.INVALID_UPDATE_VERSION:
            self.network.send(CONTROLLER, request.broker_id, self.state[request.tp])

    def _commit(self, request: AlterPartitionRequest, respond: Callable[[Any], None]) -> None:
        error = self._validate(request)
        if error is not Errors.NONE:
            self._reject(request, error, respond)
            return
        completed = self._complete_reassignment(request.tp, request.new_isr)
        if completed is not None:
            self.isr_commits += 1
            moved = completed.leader != request.broker_id
            respond(
                AlterPartitionResponse(Errors.NEW_LEADER_ELECTED)
                if moved
                else AlterPartitionResponse(Errors.NONE, completed)
            )
            return
        state = self.state[request.tp]
        new = LeaderAndIsr(
            request.tp,
            state.leader,
            state.leader_epoch,
            request.new_isr,
            state.partition_epoch + 1,
            state.replicas,
        )
        self.state[request.tp] = new
        self.on_change()
        self.isr_commits += 1
        if self.tracer.enabled:
            self.tracer.emit(
                "controller.isr",
                partition=str(request.tp),
                isr=list(new.isr),
                leader=new.leader,
                epoch=new.leader_epoch,
            )
        respond(AlterPartitionResponse(Errors.NONE, new))

    # --- reassignments (ReplicationControlManager.alterPartitionReassignments) ----------------------
    def alter_reassignment(self, tp: TopicPartition, target: tuple[int, ...] | None) -> LeaderAndIsr:
        """Start (or replace) the move of ``tp`` to ``target``; None cancels the ongoing one.

        A replaced or cancelled move is reverted first, so a new target is reached from the
        replicas the partition had before any move. The caller has checked the request.
        """
        state = self.state[tp]
        ongoing = self.reassignments.pop(tp, None)
        original = ongoing.original if ongoing is not None else state.replicas
        isr = ongoing.reverted_isr(state.isr) if ongoing is not None else state.isr
        if target is None:
            return self._change_replicas(tp, original, isr, "cancel", ongoing)
        move = PartitionReassignment(original, target)
        if not move.adding:
            completed = move.completed_isr(isr)
            if completed is not None:
                return self._change_replicas(tp, target, completed, "complete", move)
        self.reassignments[tp] = move
        return self._change_replicas(tp, move.replicas, isr, "start", move)

    def _complete_reassignment(self, tp: TopicPartition, isr: tuple[int, ...]) -> LeaderAndIsr | None:
        """Complete ``tp``'s move if ``isr`` lets it; the committed state, or None."""
        move = self.reassignments.get(tp)
        completed = None if move is None else move.completed_isr(isr)
        if move is None or completed is None:
            return None
        del self.reassignments[tp]
        return self._change_replicas(tp, move.target, completed, "complete", move)

    def _change_replicas(
        self,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        step: str,
        move: PartitionReassignment | None,
    ) -> LeaderAndIsr:
        """Commit new replicas and ISR; a leader left out is replaced by the first electable ISR member
        of ``replicas``; every old and new replica hears of it (a removed one stops)."""
        state = self.state[tp]
        leader = state.leader
        if leader not in replicas or leader not in isr:
            electable = [b for b in replicas if b in isr and self._electable(b)]
            leader = electable[0] if electable else -1
        removed = tuple(b for b in state.replicas if b not in replicas)
        epoch = state.leader_epoch + 1 if removed or leader != state.leader else state.leader_epoch
        new = LeaderAndIsr(tp, leader, epoch, isr, state.partition_epoch + 1, replicas)
        self.state[tp] = new
        self.on_change()
        if self.tracer.enabled:
            self.tracer.emit(
                "controller.reassign",
                partition=str(tp),
                step=step,
                replicas=list(replicas),
                adding=list(move.adding) if move else [],
                removing=list(move.removing) if move else [],
                leader=leader,
                epoch=epoch,
                isr=list(isr),
            )
        for broker in (*replicas, *removed):
            if self.alive(broker):
                self.network.send(CONTROLLER, broker, new)
        return new

    # --- broker failures ---------------------------------------------------------------------
    def broker_crashed(self, broker: int) -> None:
        self.scheduler.call_later(self.crash_detection_ms, self._fence, broker)

    def _fence(self, broker: int) -> None:
        if self.alive(broker):
            return  # it came back before we noticed
        self._set_broker_state(broker, FENCED)
        self._move_off(broker, direct=False)

    def controlled_shutdown(self, broker: int) -> None:
        """Mark ``broker`` as shutting down; move leadership and ISR membership off it before it stops."""
        self._set_broker_state(broker, CONTROLLED_SHUTDOWN)
        self._move_off(broker, direct=True)

    # --- heartbeats (BrokerHeartbeatManager) ---------------------------------------------------
    def heartbeats_lost(self, broker: int) -> None:
        """Messages from ``broker`` to the controller are lost from now: its session will run out."""
        self.heartbeats.heartbeats_lost(broker)

    def heartbeats_resumed(self, broker: int) -> None:
        """Messages from ``broker`` reach the controller again: its next heartbeat will arrive."""
        self.heartbeats.heartbeats_resumed(broker, broker in self.stale)

    def _session_expired(self, broker: int) -> None:
        if not self.alive(broker) or broker in self.registrations.fenced:
            return  # crashed: the crash path fences it
        self.stale.add(broker)
        self._set_broker_state(broker, FENCED, reason="session_timeout")
        self._move_off(broker, direct=False)

    def _heartbeat_resumed(self, broker: int) -> None:
        if broker not in self.stale or not self.alive(broker):
            return
        self.stale.discard(broker)
        self._set_broker_state(broker, UNFENCED, reason="heartbeat")
        for tp, state in list(self.state.items()):
            offline = broker in state.replicas and state.leader < 0
            if offline and (broker in state.isr or self.unclean_leader_election(tp)):
                self._elect(tp, exclude=None, direct_to=None)

    def _set_broker_state(self, broker: int, state: str, reason: str | None = None) -> None:
        """Record ``broker``'s registration state and tell every live broker (before any ISR change)."""
        self.registrations = self.registrations.with_state(broker, state)
        if self.tracer.enabled:
            if reason is None:
                self.tracer.emit("controller.broker", broker=broker, state=state)
            else:
                self.tracer.emit("controller.broker", broker=broker, state=state, reason=reason)
        for node in self.brokers:
            if self.alive(node):
                self.network.send(CONTROLLER, node, self.registrations)

    def _move_off(self, broker: int, direct: bool) -> None:
        for tp, state in list(self.state.items()):
            if broker not in state.replicas:
                continue
            if state.leader == broker:
                self._elect(tp, exclude=broker, direct_to=broker if direct else None)
            elif broker in state.isr and len(state.isr) > 1:
                # the last member stays: without ELR (KIP-966) KRaft never empties an ISR, so an
                # offline partition still knows which replica may lead it cleanly when it returns
                isr = tuple(b for b in state.isr if b != broker)
                self._publish(
                    LeaderAndIsr(
                        tp, state.leader, state.leader_epoch, isr, state.partition_epoch + 1, state.replicas
                    ),
                    direct_to=broker if direct else None,
                )

    def broker_started(self, broker: int) -> None:
        self.broker_epochs[broker] = self.broker_epochs.get(broker, 1) + 1
        self.heartbeats.registered(broker)
        self.stale.discard(broker)
        self._set_broker_state(broker, UNFENCED)
        for tp, state in list(self.state.items()):
            if broker not in state.replicas:
                continue
            if state.leader < 0 and (broker in state.isr or self.unclean_leader_election(tp)):
                self._elect(tp, exclude=None, direct_to=None)
            else:
                self.network.send(CONTROLLER, broker, self.state[tp])

    def elect_if_offline(self, tp: TopicPartition) -> None:
        """Elect a leader for ``tp`` if it has none and a live replica may lead (a restored cluster)."""
        state = self.state[tp]
        if state.leader < 0 and any(
            self.alive(b) and (b in state.isr or self.unclean_leader_election(tp)) for b in state.replicas
        ):
            self._elect(tp, exclude=None, direct_to=None)

    def catch_up(self, broker: int) -> None:
        """``broker``'s link to the controller healed: send the registrations and its partitions' states."""
        if not self.alive(broker):
            return
        self.network.send(CONTROLLER, broker, self.registrations)
        states = tuple(state for state in self.state.values() if broker in state.replicas)
        self.network.send(CONTROLLER, broker, MetadataCatchUp(states))

    def move_leader(self, tp: TopicPartition, broker: int) -> str | None:
        """Make ``broker`` the leader of ``tp`` now (a chosen-leader election); None, or why not."""
        state = self.state.get(tp)
        if state is None:
            return f"no partition {tp}"
        if broker not in state.isr:
            return f"broker {broker} is not in {tp}'s ISR {list(state.isr)}"
        if not self.alive(broker):
            return f"broker {broker} is down"
        if broker in self.registrations.fenced:
            return f"broker {broker} is fenced"
        if state.leader == broker:
            return None
        self._install(tp, broker, state.isr, direct_to=None)
        return None

    def elect_leaders(self, tp: TopicPartition, election_type: int) -> int | tuple[Errors, str]:
        """An admin's ElectLeaders for ``tp`` (0: preferred, 1: unclean): the leader elected now, or
        (error, message) when none is (Kafka's ``ReplicationControlManager.electLeaders``)."""
        state = self.state.get(tp)
        if state is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp} does not exist"
        if election_type == 1:
            if state.leader >= 0:
                return Errors.ELECTION_NOT_NEEDED, f"{tp} has a leader (broker {state.leader})"
            live = [b for b in state.replicas if self.alive(b)]
            if not live:
                return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {tp} is alive"
            self.elect_unclean(tp, live[0])
            return live[0]
        if election_type != 0:
            return Errors.INVALID_REQUEST, f"unknown election type {election_type}"
        preferred = state.replicas[0]
        if state.leader == preferred:
            return Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if preferred not in state.isr or self.move_leader(tp, preferred) is not None:
            return (
                Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {tp} under strategy "
                "PreferredReplicaPartitionLeaderElection",
            )
        return preferred

    def elect_unclean(self, tp: TopicPartition, broker: int) -> None:
        """An unclean election asked for by an admin: ``broker`` (alive) leads alone."""
        self._install(tp, broker, (broker,), direct_to=None)

    def _elect(self, tp: TopicPartition, exclude: int | None, direct_to: int | None) -> None:
        state = self.state[tp]
        live_isr = [b for b in state.replicas if b in state.isr and b != exclude and self._electable(b)]
        if live_isr:
            leader, isr = live_isr[0], tuple(live_isr)
        elif self.unclean_leader_election(tp):
            live = [b for b in state.replicas if b != exclude and self._electable(b)]
            leader, isr = (live[0], (live[0],)) if live else (-1, state.isr)
        else:
            leader = -1
            isr = tuple(b for b in state.isr if b != exclude) or state.isr
        self._install(tp, leader, isr, direct_to)

    def _electable(self, broker: int) -> bool:
        """Alive and not fenced (a broker is in controlled shutdown only as it stops)."""
        return self.alive(broker) and broker not in self.registrations.fenced

    def _install(self, tp: TopicPartition, leader: int, isr: tuple[int, ...], direct_to: int | None) -> None:
        """Publish an elected ``leader`` with the next leader and partition epochs."""
        state = self.state[tp]
        new = LeaderAndIsr(tp, leader, state.leader_epoch + 1, isr, state.partition_epoch + 1, state.replicas)
        self.elections += 1
        if self.tracer.enabled:
            self.tracer.emit(
                "controller.elect", partition=str(tp), leader=leader, epoch=new.leader_epoch, isr=list(isr)
            )
        self._publish(new, direct_to)

    def _publish(self, state: LeaderAndIsr, direct_to: int | None) -> None:
        self.state[state.tp] = state
        self.on_change()
        for broker in state.replicas:
            if broker == direct_to:
                self.apply_direct(broker, state)
            elif self.alive(broker):
                self.network.send(CONTROLLER, broker, state)
