"""Producer state snapshots: ``<offset>.snapshot`` in a partition's directory (Kafka's
``ProducerStateManager.takeSnapshot``).

A snapshot holds, for each idempotent producer, its epoch and its retained batches (sequence
range and offsets) as they were after every batch below ``offset``. One is written when a
segment rolls and at a clean stop; the two newest are kept, and any past a truncation point
is deleted. On load the newest snapshot at or below the log end is read and the batches from
its offset on are replayed over it, so producers whose batches DeleteRecords removed are still
known; without a usable snapshot the state is rebuilt from every batch the log holds.

Transactions are kept as Kafka's snapshot and transaction index keep them: each producer's
coordinator epoch (of the last marker written for it), the open transactions' first offsets
(``ongoing``), and the aborted transactions (``aborted``), so the last stable offset and the
aborted transactions a READ_COMMITTED fetch is told of are the same after a restart.

Format: JSON ``{"offset": N, "producers": [[id, epoch, [[first_seq, last_seq, first_offset,
last_offset], ...], coordinator_epoch], ...], "ongoing": [[id, first_offset], ...], "aborted":
[[id, first_offset, last_offset], ...], "crc": C}``, ``C`` the CRC-32 of the canonical JSON of the
rest. A snapshot without ``ongoing``, ``aborted`` or coordinator epochs (written before they were
kept) reads as having none.
"""

from __future__ import annotations

import json
import os
import zlib

from minibroker.broker.producer_state import AbortedTxn, BatchMetadata, ProducerEntry, ProducerStateManager

SUFFIX = ".snapshot"
KEEP = 2


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def snapshot_offsets(directory: str) -> list[int]:
    return sorted(
        int(name[: -len(SUFFIX)])
        for name in os.listdir(directory)
        if name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit()
    )


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def write_snapshot(directory: str, offset: int, state: ProducerStateManager) -> None:
    """Write the snapshot at ``offset`` (temporary file and rename); keep the ``KEEP`` newest."""
    producers = [
        [
            pid,
            entry.epoch,
            [[b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in entry.batches],
            entry.coordinator_epoch,
        ]
        for pid, entry in sorted(state.entries.items())
    ]
    body = {
        "offset": offset,
        "producers": producers,
        "ongoing": [[pid, first] for pid, first in sorted(state.ongoing.items())],
        "aborted": [[t.producer_id, t.first_offset, t.last_offset] for t in state.aborted],
    }
    data = json.dumps({**body, "crc": zlib.crc32(_canonical(body))}).encode()
    path = os.path.join(directory, snapshot_name(offset))
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    for old in snapshot_offsets(directory)[:-KEEP]:
        os.remove(os.path.join(directory, snapshot_name(old)))


def delete_snapshots_after(directory: str, offset: int) -> None:
    """Remove every snapshot past ``offset`` (the log was truncated to it)."""
    for found in snapshot_offsets(directory):
        if found > offset:
            os.remove(os.path.join(directory, snapshot_name(found)))


def read_snapshot(directory: str, offset: int) -> ProducerStateManager:
    """The snapshot at ``offset``; ValueError if it is not a whole, CRC-valid snapshot."""
    with open(os.path.join(directory, snapshot_name(offset)), "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw)
        body = {key: value for key, value in data.items() if key != "crc"}
        if data["crc"] != zlib.crc32(_canonical(body)) or body["offset"] != offset:
            raise ValueError("CRC or offset mismatch")
        state = ProducerStateManager()
        for pid, epoch, batches, *coordinator_epoch in body["producers"]:
            entry = state.entries[int(pid)] = ProducerEntry(int(epoch), *map(int, coordinator_epoch[:1]))
            for first_seq, last_seq, first_offset, last_offset in batches:
                entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset))
        for pid, first in body.get("ongoing", ()):
            state.ongoing[int(pid)] = int(first)
        for pid, first, last in body.get("aborted", ()):
            state.aborted.append(AbortedTxn(int(pid), int(first), int(last)))
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{snapshot_name(offset)}: not a producer state snapshot ({error})") from None
    return state
