"""One transactional id's state: Kafka's ``TransactionMetadata`` and ``TransactionState``.

States and the transitions Kafka allows (``TransactionState.validPreviousStates``):

- EMPTY: a producer id and epoch, no transaction open;
- ONGOING: partitions added, records may be written (from EMPTY, ONGOING, COMPLETE_*);
- PREPARE_COMMIT / PREPARE_ABORT: EndTxn (or a timeout, or a fencing InitProducerId) decided;
  the markers are being written (from ONGOING; PREPARE_ABORT also from PREPARE_EPOCH_FENCE);
- COMPLETE_COMMIT / COMPLETE_ABORT: every marker is written (from PREPARE_*);
- PREPARE_EPOCH_FENCE: an open transaction is being aborted with a bumped epoch (in memory only).

``pending`` is the state a write to ``__transaction_state`` is bringing the id to (Kafka's
``pendingState``); while it is set, requests that would change the state answer
CONCURRENT_TRANSACTIONS. ``record``/``from_record`` are the value written for every change;
``tombstone`` is the one that forgets an expired id (DEAD).
Kafka writes its ``TransactionLogValue`` schema; minibroker writes the same fields as JSON
(the topic is internal: only minibroker reads it back).
"""

from __future__ import annotations

import json

import attrs

EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"
PREPARE_EPOCH_FENCE = "PrepareEpochFence"
#: an expired id on its way out (pending only: its tombstone is being written)
DEAD = "Dead"

#: state -> the states it may be entered from
VALID_PREVIOUS: dict[str, frozenset[str]] = {
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka bumps to a new producer id once the epoch reaches Short.MaxValue - 1
MAX_EPOCH = 32_766


@attrs.define(slots=True)
class TransactionMetadata:
    """A transactional id's producer id, epoch, timeout, state and partitions."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = EMPTY
    partitions: set[tuple[str, int]] = attrs.Factory(set)
    #: when the open transaction began (ms), -1 when none is open
    start_ms: int = -1
    update_ms: int = 0
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: str | None = None
    #: the protocol version of the client's last EndTxn (2: KIP-890's epoch bump at every end)
    transaction_version: int = 1

    def record(self, origin_ms: int = 0) -> bytes:
        """The value written to ``__transaction_state`` for this state (``tv`` only when not 1); its times
        are ``origin_ms`` (the wall-clock time of the clock's 0, or 0) later than the clock's."""
        version = {"tv": self.transaction_version} if self.transaction_version != 1 else {}
        return json.dumps(
            {
                "id": self.transactional_id,
                "pid": self.producer_id,
                "epoch": self.producer_epoch,
                "last_pid": self.last_producer_id,
                "last_epoch": self.last_producer_epoch,
                "timeout_ms": self.timeout_ms,
                "state": self.state,
                "partitions": sorted(self.partitions),
                "start_ms": self.start_ms + origin_ms if self.start_ms >= 0 else -1,
                "update_ms": self.update_ms + origin_ms,
                **version,
            },
            separators=(",", ":"),
        ).encode()

    def tombstone(self) -> bytes:
        """The value that removes this id (Kafka writes a null value under the id's key)."""
        return json.dumps({"id": self.transactional_id, "state": DEAD}, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, value: bytes, origin_ms: int = 0) -> TransactionMetadata | str:
        """The metadata a value holds, or the transactional id a tombstone removes. Times before the
        clock's 0 (``origin_ms`` as in ``record``: written by an earlier process) read as 0, so a
        transaction begun then times out no earlier than it would have, at most its timeout later."""
        data = json.loads(value)
        if data.get("state") == DEAD:
            return str(data["id"])
        start = data["start_ms"]
        return cls(
            data["id"],
            data["pid"],
            data["epoch"],
            data["timeout_ms"],
            data["state"],
            {(topic, partition) for topic, partition in data["partitions"]},
            max(0, start - origin_ms) if start >= 0 else -1,
            max(0, data["update_ms"] - origin_ms),
            data["last_pid"],
            data["last_epoch"],
            transaction_version=data.get("tv", 1),
        )


def compaction_key(value: bytes) -> tuple[bytes, bool] | None:
    """The log cleaner's key of a ``__transaction_state`` value (the transactional id) and whether it
    is a tombstone (the value that forgets an expired id); None for anything else (kept)."""
    try:
        data = json.loads(value)
        return str(data["id"]).encode(), data.get("state") == DEAD
    except (ValueError, TypeError, KeyError):
        return None
