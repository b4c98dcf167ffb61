"""The transactional part of a chaos schedule (the ``transactions`` profile), and its time bound.

- ``TxnSpec``: one transaction of a transactional producer, as the scenario steps that play it
  (``begin``, ``send`` ..., then ``commit``, ``abort`` or ``crash``), or a producer's ``init``
  (a successor's ``init`` fences the producer before it: a zombie when that one still sends);
- ``TransformSpec``: a consume-transform-produce loop (``minibroker.chaos.transform_loop``) that
  reads ``ctp-in``, writes one record per input to ``ctp-out`` and commits its input offset with
  the transaction (``send_offsets_to_transaction``), at the times of its cycles.

A transactional send writes ``TXN_BYTES + n`` bytes (``n`` numbers the sends of a run) and the loop's
output for input offset ``o`` writes ``OUTPUT_BYTES + o``, so a batch's size names what wrote it.
"""

from __future__ import annotations

from typing import Any

import attrs

from minibroker.coordinator.transaction.transaction_coordinator import MARKER_RETRY_BACKOFF_MS
from minibroker.scenario.model import ClientSpec, TransactionStep

#: sizes: transactional sends, the loop's inputs and its outputs
TXN_BYTES = 10_000
INPUT_BYTES = 20_000
OUTPUT_BYTES = 30_000
INPUT_TOPIC = "ctp-in"
OUTPUT_TOPIC = "ctp-out"
TRANSFORM_GROUP = "ctp"
TRANSFORM_TXN = "ctp-txn"


@attrs.frozen
class TxnSpec:
    """One transaction (or one ``init``) of ``client``: the steps that play it, in time order."""

    id: str
    client: str
    ending: str  # "commit", "abort", "crash" or "init"
    steps: tuple[TransactionStep, ...]


@attrs.frozen
class TransformSpec:
    """The consume-transform-produce loop: its producer's and consumer's settings and its cycles.

    Each cycle (``at``, ``ending``) fetches what ``ctp-in`` has past the loop's position, sends one
    output per input record and the next input offset with the transaction, then commits, aborts, or
    crashes (a new producer of the same transactional id takes over at the next cycle)."""

    producer: dict[str, Any]
    consumer: dict[str, Any]
    cycles: tuple[tuple[int, str], ...]


def transactional_clients(producers: tuple[ClientSpec, ...]) -> list[ClientSpec]:
    return [c for c in producers if c.config.get("transactional.id")]


def transaction_bound(
    config: dict[str, Any], producers: list[dict[str, Any]], latency_ms: int, settled_ms: int
) -> int:
    """ms after the last heal by which every transaction has ended (committed or aborted).

    ``settled_ms`` (the liveness bound: leaders elected, ISRs whole) first; then the latest a
    transaction can still start, a call made before the heal reaching its coordinator up to
    ``max.block.ms`` after it (and its send answered within ``request.timeout.ms``); then its
    ``transaction.timeout.ms``, after which the coordinator aborts it at its next check, one
    ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` later (two: a PrepareAbort whose
    write failed is tried again at the next); the PrepareAbort and CompleteAbort writes, each waiting
    at most the broker's ``request.timeout.ms`` for the ISR, and the markers, each sent again
    ``MARKER_RETRY_BACKOFF_MS`` after an answer lost within one ``request.timeout.ms``; four link
    latencies and 100 ms of slack.
    """
    if not producers:
        return 0
    start = max(
        p["max.block.ms"] + p["request.timeout.ms"] + p["minibroker.response.grace.ms"] for p in producers
    )
    timeout = max(p["transaction.timeout.ms"] for p in producers)
    cleanup = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
    write = config["request.timeout.ms"]
    return (
        settled_ms
        + start
        + timeout
        + 2 * cleanup
        + 3 * write
        + MARKER_RETRY_BACKOFF_MS
        + 4 * latency_ms
        + 100
    )
