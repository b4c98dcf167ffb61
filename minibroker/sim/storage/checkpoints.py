"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

- ``leader-epoch-checkpoint`` (per partition, ``LeaderEpochCheckpointFile``): ``epoch start-offset``;
- ``replication-offset-checkpoint`` (per broker, the high watermarks) and
  ``log-start-offset-checkpoint``: ``topic partition offset``.

A checkpoint is replaced whole: written to ``<name>.tmp``, then renamed over the old one
(Kafka's ``CheckpointFile.write``), so a reader sees the old file or the new one, never half;
with ``sync`` the data is fsynced before the rename, and the directory after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from minibroker.common.messages import TopicPartition

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that is not in the format above."""


def write_lines(path: str, entries: Iterable[str], sync: bool = False) -> None:
    lines = list(entries)
    text = "\n".join([str(VERSION), str(len(lines)), *lines]) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path))


def read_lines(path: str) -> list[list[str]] | None:
    """The entries of ``path`` split on spaces; None if it does not exist; CheckpointError if malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path}: {error}") from None
    if len(lines) < 2 or lines[0].strip() != str(VERSION) or not lines[1].strip().isdigit():
        raise CheckpointError(f"{path}: expected version {VERSION} and a count on its first two lines")
    count = int(lines[1])
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: {len(entries)} entries, the count says {count}")
    return entries


def write_epochs(path: str, epochs: Iterable[tuple[int, int]], sync: bool = False) -> None:
    write_lines(path, (f"{epoch} {start}" for epoch, start in epochs), sync)


def read_epochs(path: str) -> list[tuple[int, int]] | None:
    entries = read_lines(path)
    if entries is None:
        return None
    try:
        return [(int(epoch), int(start)) for epoch, start in entries]
    except ValueError:
        raise CheckpointError(f"{path}: expected 'epoch offset' lines") from None


def write_offsets(path: str, offsets: dict[TopicPartition, int], sync: bool = False) -> None:
    write_lines(path, (f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())), sync)


def read_offsets(path: str) -> dict[TopicPartition, int]:
    entries = read_lines(path)
    if entries is None:
        return {}
    try:
        return {TopicPartition(topic, int(p)): int(offset) for topic, p, offset in entries}
    except ValueError:
        raise CheckpointError(f"{path}: expected 'topic partition offset' lines") from None


def fsync_dir(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
